"""Node templates and cloud credentials without a cluster: a template's `<driver>Config` and a
credential's `<driver>credentialConfig` checked against a driver's schema, which driver a body
names, how credential fields are kept in a Secret, what a driver is given for a template, and
who sees an owned object."""

from __future__ import annotations

from typing import Any

import pytest

from corral.core.api import names
from corral.core.auth import ownership
from corral.core.drivers import schema, templates
from corral.core.errors import Invalid

CLOUD = schema.parse(
    {
        "fields": {
            "region": {"type": "string", "required": True},
            "size": {"type": "int", "default": 2},
            "tags": {"type": "array[string]"},
            "apiKey": {"type": "string", "secret": True, "required": True},
            "port": {"type": "int", "secret": True},
        }
    }
)


def owned_by(user: str, spec: dict[str, Any], name: str = "x") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": {names.ANNOTATION_CREATOR: user}},
        "spec": spec,
    }


# -- a template's config ------------------------------------------------------------------------


def test_a_kwok_config_is_checked_against_the_kwok_schema_and_defaults_filled() -> None:
    kwok = schema.parse(schema.KWOK)
    assert templates.check_config(kwok, {"cpu": "2"}, "kwokConfig") == {
        "cpu": "2", "memory": "8Gi", "pods": 110
    }  # fmt: skip
    # A quantity is one as everywhere in the API: text or a number, of the grammar and bound.
    assert templates.check_config(kwok, {"cpu": 2, "pods": "50"}, "kwokConfig")["cpu"] == 2
    for wrong in (True, [2], "1e999999", "-1", "x" * 65):
        with pytest.raises(Invalid) as ill_typed:
            templates.check_config(kwok, {"cpu": wrong}, "kwokConfig")
        assert ill_typed.value.field == "kwokConfig.cpu"
        assert ill_typed.value.message.startswith("kwokConfig.cpu")
    with pytest.raises(Invalid) as negative_pods:
        templates.check_config(kwok, {"pods": -5}, "kwokConfig")
    assert negative_pods.value.field == "kwokConfig.pods"
    with pytest.raises(Invalid) as unknown:
        templates.check_config(kwok, {"gpu": "1"}, "kwokConfig")
    assert unknown.value.field == "kwokConfig.gpu"


def test_a_template_config_refuses_secret_fields_and_needs_its_required_ones() -> None:
    with pytest.raises(Invalid) as secret:
        templates.check_config(CLOUD, {"region": "eu", "apiKey": "k"}, "cloudConfig")
    assert secret.value.field == "cloudConfig.apiKey"
    assert "cloud credential" in secret.value.message
    assert "k" not in secret.value.message.split()
    with pytest.raises(Invalid) as missing:
        templates.check_config(CLOUD, {}, "cloudConfig")
    assert (missing.value.field, missing.value.code) == ("cloudConfig.region", "MissingRequired")
    assert templates.check_config(CLOUD, {"region": "eu"}, "cloudConfig") == {
        "region": "eu", "size": 2
    }  # fmt: skip


# -- a credential's fields ----------------------------------------------------------------------


def test_a_credential_holds_only_the_secret_fields_each_of_its_type() -> None:
    field = "cloudcredentialConfig"
    assert templates.check_credential(CLOUD, {"apiKey": "k", "port": 22}, field, {}) == {
        "apiKey": "k", "port": 22
    }  # fmt: skip
    with pytest.raises(Invalid) as plain:
        templates.check_credential(CLOUD, {"region": "eu"}, field, {})
    assert plain.value.field == f"{field}.region"
    with pytest.raises(Invalid) as ill_typed:
        templates.check_credential(CLOUD, {"port": "22"}, field, {})
    assert ill_typed.value.field == f"{field}.port"
    with pytest.raises(Invalid):
        templates.check_credential(CLOUD, ["apiKey"], field, {})


def test_a_credential_update_replaces_given_fields_keeps_others_and_null_removes() -> None:
    current = {"apiKey": "old", "port": 22}
    field = "cloudcredentialConfig"
    assert templates.check_credential(CLOUD, {"apiKey": "new"}, field, current) == {
        "apiKey": "new", "port": 22
    }  # fmt: skip
    assert templates.check_credential(CLOUD, {"port": None}, field, current) == {"apiKey": "old"}
    assert current == {"apiKey": "old", "port": 22}


def test_required_secret_fields_a_credential_does_not_set() -> None:
    assert templates.missing(CLOUD, ()) == ["apiKey"]
    assert templates.missing(CLOUD, ["apiKey"]) == []
    assert templates.missing(schema.parse(schema.KWOK), ()) == []


def test_credential_fields_keep_their_types_through_the_secret() -> None:
    values = {"apiKey": "k:é", "port": 22, "on": True, "tags": ["a", "b"]}
    data = templates.encode(values)
    assert set(data) == set(values)
    assert "k:é" not in "".join(data.values())
    assert templates.decode(data) == values
    assert templates.decode(None) == {}


# -- which driver a body names ------------------------------------------------------------------


def test_the_driver_is_named_by_the_one_config_key() -> None:
    suffix = templates.CONFIG_SUFFIX
    assert templates.driver_in({"kwokConfig": {}, "name": "a"}, suffix) == "kwok"
    assert templates.driver_in({"name": "a", "cloudCredentialName": "cc-x"}, suffix) is None
    # A credential's key is not a template's config, and the other way round.
    assert templates.driver_in({"kwokcredentialConfig": {}}, suffix) is None
    credential = templates.CREDENTIAL_SUFFIX
    assert templates.driver_in({"kwokcredentialConfig": {}}, credential) == "kwok"
    assert templates.driver_in({"kwokConfig": {}}, credential) is None
    with pytest.raises(Invalid) as two:
        templates.driver_in({"kwokConfig": {}, "cloudConfig": {}}, suffix)
    assert two.value.field in ("kwokConfig", "cloudConfig")
    assert templates.config_field("kwok") == "kwokConfig"
    assert templates.credential_field("amazonec2") == "amazonec2credentialConfig"


# -- what a driver is given ---------------------------------------------------------------------


def test_machine_inputs_are_the_templates_config_and_its_credentials_fields() -> None:
    template = owned_by("u-a", {"driver": "cloud", "config": {"region": "eu", "size": 2},
                                "cloudCredentialName": "cc-b",
                                "nodeTaints": [{"key": "k", "effect": "NoSchedule"}]})  # fmt: skip
    credential = owned_by("u-a", {"driver": "cloud", "fields": ["apiKey"]}, "cc-b")
    inputs = templates.machine_inputs(template, credential, templates.encode({"apiKey": "k"}))
    assert inputs == templates.MachineInputs(
        driver="cloud",
        config={"region": "eu", "size": 2},
        credential={"apiKey": "k"},
        taints=[{"key": "k", "effect": "NoSchedule"}],
    )
    plain = owned_by("u-a", {"driver": "kwok", "config": {"cpu": "1"}})
    assert templates.machine_inputs(plain, None, None).credential == {}


@pytest.mark.parametrize(
    ("credential", "secret", "why"),
    [
        (None, None, "gone"),
        (owned_by("u-a", {"driver": "cloud"}, "cc-b"), None, "gone"),
        (owned_by("u-a", {"driver": "other"}, "cc-b"), {}, "not of driver cloud"),
        (owned_by("u-z", {"driver": "cloud"}, "cc-b"), {}, "another user"),
    ],
)
def test_machine_inputs_refuse_a_credential_that_no_longer_fits(
    credential: dict[str, Any] | None, secret: dict[str, str] | None, why: str
) -> None:
    template = owned_by("u-a", {"driver": "cloud", "cloudCredentialName": "cc-b"})
    with pytest.raises(Invalid) as refused:
        templates.machine_inputs(template, credential, secret)
    assert why in refused.value.message
    assert refused.value.field == "cloudCredentialName"


# -- ownership ----------------------------------------------------------------------------------


def test_an_owned_object_is_seen_by_its_creator_and_administrators_only() -> None:
    obj = owned_by("u-a", {})
    assert ownership.owner_of(obj) == "u-a"
    assert ownership.sees(obj, "u-a", is_admin=False)
    assert not ownership.sees(obj, "u-b", is_admin=False)
    assert ownership.sees(obj, "u-b", is_admin=True)
    unowned = {"metadata": {"name": "x"}}
    assert ownership.owner_of(unowned) == ""
    assert not ownership.sees(unowned, "", is_admin=False)
