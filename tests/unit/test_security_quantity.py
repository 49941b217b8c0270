"""Quantities parse as Kubernetes parses them, within explicit bounds, in bounded time; what
reads quantities or reservations from a body or from stored objects raises only its own
errors."""

from __future__ import annotations

import contextlib
import datetime
import time
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.core import quantity
from corral.core.api import ids
from corral.core.projects import quota, roles

# Kubernetes' grammar (k8s.io/apimachinery/pkg/api/resource), with exponents of any size.
GRAMMAR = (
    r"\A[+-]?([0-9]{1,30}(\.[0-9]{0,20})?|\.[0-9]{1,20})"
    r"([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]{1,12})?\Z"
)
# A parse that tried to expand an exponent of twelve digits would never end; two seconds tells
# that from a machine busy with other work, which a tighter deadline would not.
FAST = settings(max_examples=300, deadline=datetime.timedelta(seconds=2))
FEWER = settings(max_examples=100, deadline=datetime.timedelta(seconds=2))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("4", Decimal(4)),
        ("500m", Decimal("0.5")),
        ("1.5", Decimal("1.5")),
        ("256Mi", Decimal(256 * 2**20)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1E", Decimal(10**18)),  # exa, not an exponent
        (".5Ki", Decimal(512)),
        ("1.", Decimal(1)),
        ("+2k", Decimal(2000)),
        ("-1m", Decimal("-0.001")),
        ("0.1n", Decimal("1e-9")),  # rounded up to one nano-unit, as Kubernetes does
        ("-1e-30", Decimal("-1e-9")),
        ("1e-999999", Decimal("1e-9")),
        ("0e999999", Decimal(0)),
        ("7Ei", Decimal(7 * 2**60)),
        ("9223372036854775807", Decimal(2**63 - 1)),
    ],
)
def test_quantities_parse_as_kubernetes_parses_them(text: str, value: Decimal) -> None:
    assert quantity.parse(text) == value


@pytest.mark.parametrize(
    "text",
    ["", ".", "1e", "lots", " 1", "1 ", "1\n", "1Kb", "1e3.5", "1..2", "--1", "\uff11", "1" * 65,
     "9223372036854775808", "8Ei", "1e400", "1e999999", "-1e999999", "1E19"],
)  # fmt: skip
def test_what_kubernetes_refuses_or_exceeds_the_bound_is_refused(text: str) -> None:
    with pytest.raises(quantity.QuantityError):
        quantity.parse(text)


def test_a_huge_exponent_is_refused_at_once() -> None:
    began = time.perf_counter()
    for text in ("1e999999", "9" * 60 + "e99999", "1e-999999999999"):
        with contextlib.suppress(quantity.QuantityError):
            quantity.parse(text)
    assert time.perf_counter() - began < 1  # it took 23 s when the exponent was applied


def test_stored_values_beyond_the_bound_are_capped() -> None:
    assert quantity.parse("1e400", saturate=True) == quantity.MAX_VALUE
    assert quantity.parse("-1e999999", saturate=True) == -quantity.MAX_VALUE
    assert quantity.add([{"cpu": "1e400"}, {"cpu": "1"}, {"cpu": "9" * 70}]) == {"cpu": str(2**63)}
    with pytest.raises(quantity.QuantityError):
        quantity.format_quantity(Decimal("1e999999"), "cpu")


@FAST
@given(st.text(max_size=80))
def test_any_text_parses_or_raises_a_quantity_error(text: str) -> None:
    try:
        value = quantity.parse(text)
    except quantity.QuantityError:
        return
    assert abs(value) <= quantity.MAX_VALUE


@FAST
@given(st.from_regex(GRAMMAR), st.booleans())
def test_well_formed_quantities_stay_bounded_and_nano_exact(text: str, saturate: bool) -> None:
    try:
        value = quantity.parse(text, saturate)
    except quantity.QuantityError:
        assert len(text) > quantity.MAX_LENGTH or not saturate
        return
    assert abs(value) <= quantity.MAX_VALUE
    assert (value / quantity.NANO) == (value / quantity.NANO).to_integral_value()


@FAST
@given(st.from_regex(GRAMMAR))
def test_byte_sizes_are_whole_non_negative_and_bounded(text: str) -> None:
    try:
        size = quantity.parse_bytes(text)
    except quantity.QuantityError:
        return
    assert 0 <= size <= 2**63 - 1


@FAST
@given(
    st.integers(min_value=-(2**63 - 1) * 10**9, max_value=(2**63 - 1) * 10**9),
    st.sampled_from(["cpu", "memory", "pods", "ephemeral-storage"]),
)
def test_printed_quantities_parse_back_to_the_same_value(nanos: int, resource: str) -> None:
    value = Decimal(nanos).scaleb(-9)
    printed = quantity.format_quantity(value, resource)
    assert quantity.parse(printed) == value


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=70)
    | st.from_regex(GRAMMAR),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip


@FAST
@given(st.dictionaries(st.sampled_from([*quota.QUOTA_FIELDS, "gpus"]), JSON, max_size=4) | JSON)
def test_quota_limits_from_a_body_raise_only_quota_errors(value: object) -> None:
    try:
        limits = quota.parse_limits(value, "resourceQuota.limit")
    except quota.QuotaError as exc:
        assert exc.field.startswith("resourceQuota.limit")
        return
    for text in limits.values():
        assert 0 <= quantity.parse(text) <= quantity.MAX_VALUE


@FEWER
@given(st.lists(st.dictionaries(st.sampled_from(["pods", "limits.cpu", "x"]), JSON, max_size=3)))
def test_usage_of_whatever_is_stored_never_fails(statuses: list[dict[str, object]]) -> None:
    quotas = [{"metadata": {"namespace": "n"}, "status": {"used": s, "hard": s}} for s in statuses]
    totals = quota.usage(quotas)
    quota.printable(totals["used"])


@FEWER
@given(st.dictionaries(st.text(max_size=40) | st.just(quota.reservation_key("ns")), JSON))
def test_reservations_read_from_any_annotations(annotations: dict[str, object]) -> None:
    now = datetime.datetime.now(datetime.UTC)
    live, expired = quota.reservations(annotations, now)  # type: ignore[arg-type]
    assert not live & {k.removeprefix(quota.RESERVATION_PREFIX) for k in expired}


def test_reservations_expire() -> None:
    now = datetime.datetime.now(datetime.UTC)
    fresh, old = now - datetime.timedelta(seconds=5), now - datetime.timedelta(minutes=5)
    stored = {
        quota.reservation_key("a"): fresh.isoformat(),
        quota.reservation_key("b"): old.isoformat(),
        quota.reservation_key("c"): "yesterday",
        "other": "kept",
    }
    live, expired = quota.reservations(stored, now)
    assert live == {"a"}
    assert expired == [quota.reservation_key("b"), quota.reservation_key("c")]


def test_the_reservation_count_only_goes_up() -> None:
    assert quota.next_count({}) == "1"
    assert quota.next_count({quota.RESERVATION_COUNT: "41"}) == "42"
    assert quota.next_count({quota.RESERVATION_COUNT: "garbage"}) == "1"
    # Not a reservation itself: it never counts as a namespace.
    assert not quota.RESERVATION_COUNT.startswith(quota.RESERVATION_PREFIX)
    now = datetime.datetime.now(datetime.UTC)
    assert quota.reservations({quota.RESERVATION_COUNT: "3"}, now) == (set(), [])


def test_binding_names_are_derived_from_user_and_role() -> None:
    name = roles.project_binding_name("u-abcde", roles.PROJECT_OWNER)
    assert name == roles.project_binding_name("u-abcde", roles.PROJECT_OWNER)
    assert name != roles.project_binding_name("u-abcde", roles.READ_ONLY)
    assert name.startswith("prtb-") and set(name[5:]) <= set(ids.ALPHABET)
    assert roles.cluster_binding_name("u-abcde", roles.CLUSTER_OWNER).startswith("crtb-")


def test_the_largest_quantity_is_no_limit() -> None:
    stored = {"limitsMemory": "1e5000", "pods": "10"}
    assert quota.overcommit(stored, {"limitsMemory": "1e5000", "pods": "5"}, 2) == []
    assert [e.field for e in quota.overcommit(stored, {"limitsMemory": "1", "pods": "5"}, 3)] == [
        "pods"
    ]
    assert quota.below_use(stored, {"limitsMemory": Decimal(2**64)}, "the project") == []


# -- the one rule of every quantity field -------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "stored"), [("500m", "500m"), ("2Gi", "2Gi"), (4, "4"), (0.5, "0.5"), ("0", "0")]
)
def test_an_amount_is_text_or_a_number_of_the_grammar_kept_as_given(
    given: object, stored: str
) -> None:
    assert quantity.amount(given, "cpu") == stored


@pytest.mark.parametrize(
    "given",
    [True, None, [], {}, "", "1e999999", "-1", -1, "1Ki" + "0" * 64, "x", 2**63, float("inf")],
)
def test_an_amount_outside_the_grammar_or_the_bound_is_refused_naming_its_field(
    given: object,
) -> None:
    with pytest.raises(quantity.QuantityError) as refused:
        quantity.amount(given, "kwokConfig.memory")
    assert refused.value.field == "kwokConfig.memory"
    assert refused.value.message.startswith("kwokConfig.memory")
