from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.core.api.ids import MAX_LABEL, MAX_SUBDOMAIN, ScopedId, is_dns_label, is_dns_subdomain
from corral.core.errors import Invalid

LABELS = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True)
SUBDOMAINS = (
    st.lists(LABELS, min_size=1, max_size=4)
    .map(".".join)
    .filter(lambda name: len(name) <= MAX_SUBDOMAIN)
)
IDS = st.builds(ScopedId, LABELS, SUBDOMAINS)
# Text near ids: the characters they are made of, and those that break them.
NEAR = st.text(alphabet="abc-019.:_A /\n\u00e9", max_size=80)


@given(IDS)
def test_an_id_reads_back_as_written(scoped: ScopedId) -> None:
    assert ScopedId.parse(str(scoped)) == scoped
    assert str(scoped) == f"{scoped.namespace}:{scoped.name}"


@given(st.one_of(st.text(), NEAR))
def test_any_text_is_an_id_or_invalid(text: str) -> None:
    try:
        scoped = ScopedId.parse(text, "projectId")
    except Invalid as exc:
        assert exc.field == "projectId"
        assert ScopedId.parse_or_none(text) is None
        return
    assert str(scoped) == text
    assert is_dns_label(scoped.namespace)
    assert is_dns_subdomain(scoped.name)
    assert ScopedId.parse_or_none(text) == scoped


@given(
    st.one_of(st.none(), st.integers(), st.lists(st.text()), st.dictionaries(st.text(), st.text()))
)
def test_what_is_not_text_is_invalid(value: object) -> None:
    with pytest.raises(Invalid, match="must be text"):
        ScopedId.parse(value)


@pytest.mark.parametrize(
    ("text", "part"),
    [
        ("p-x7k2p", "form"),
        ("", "form"),
        (":p-x7k2p", "before ':'"),
        ("C-X:p-y", "before ':'"),
        ("c-x.y:p-y", "before ':'"),
        (f"{'c' * (MAX_LABEL + 1)}:p-y", "before ':'"),
        ("c-x:", "after ':'"),
        ("c-x:p-y:z", "after ':'"),
        ("c-x:p_y", "after ':'"),
        ("c-x:p-y\n", "after ':'"),
        ("c-x:-p", "after ':'"),
        ("c-x:a..b", "after ':'"),
        (f"c-x:{'p' * (MAX_SUBDOMAIN + 1)}", "after ':'"),
    ],
)
def test_a_malformed_id_says_which_part_is_wrong(text: str, part: str) -> None:
    with pytest.raises(Invalid, match=part):
        ScopedId.parse(text)


def test_the_longest_names_kubernetes_allows_are_ids() -> None:
    namespace, name = "c" * MAX_LABEL, ".".join(["p" * 63] * 4)[:MAX_SUBDOMAIN].rstrip(".")
    assert ScopedId.parse(f"{namespace}:{name}") == ScopedId(namespace, name)


def test_an_object_knows_its_id_and_its_cache_key() -> None:
    scoped = ScopedId.of({"metadata": {"namespace": "c-x", "name": "p-y"}})
    assert (str(scoped), scoped.key) == ("c-x:p-y", "c-x/p-y")
