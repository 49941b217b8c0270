"""Issue 15's wire details as pure logic: which driver a create body makes, the merge patch
that replaces an agent customization whole, bindings' fields, and deprecated values in
schemas."""

from __future__ import annotations

from typing import Any

import pytest

from corral.apiserver.http.errors import from_core
from corral.apiserver.routes import clusterroletemplatebindings as crtbs
from corral.apiserver.routes import projectroletemplatebindings as prtbs
from corral.apiserver.routes.clusters import SCHEMA
from corral.apiserver.services.clusterspec import driver_of, given_kubeconfig, replacing
from corral.core.errors import CorralError


@pytest.mark.parametrize(
    ("body", "driver"),
    [
        ({"name": "x"}, "imported"),  # every configuration is optional: waits for an import
        ({"name": "x", "driver": "rke2"}, "rke2"),
        ({"name": "x", "k3sConfig": {}}, "k3s"),
        ({"name": "x", "importedConfig": {"kubeConfig": "eA=="}}, "imported"),
    ],
)
def test_the_driver_of_a_create_body(body: dict[str, Any], driver: str) -> None:
    assert driver_of(body) == driver


def test_the_legacy_driver_is_refused_as_deprecated() -> None:
    with pytest.raises(CorralError) as refused:
        driver_of({"name": "x", "driver": "svcKubernetesEngine"})
    error = from_core(refused.value)
    assert (error.status, error.code) == (422, "InvalidOption")
    assert "deprecated" in error.message


@pytest.mark.parametrize(
    ("body", "given"),
    [
        ({"name": "x"}, None),
        ({"importedConfig": None}, None),
        ({"importedConfig": {}}, ""),  # an import with no kubeconfig: MissingRequired later
        ({"importedConfig": {"kubeConfig": "eA=="}}, "eA=="),
        ({"kubeConfig": "eA=="}, "eA=="),
    ],
)
def test_the_kubeconfig_a_body_gives(body: dict[str, Any], given: str | None) -> None:
    assert given_kubeconfig(body) == given


def test_a_customization_is_replaced_whole() -> None:
    old = {"appendTolerations": [{"key": "a"}], "overrideAffinity": {"nodeAffinity": {"x": 1}}}
    new = {"overrideAffinity": {"podAffinity": {}}}
    assert replacing(old, new) == {
        "appendTolerations": None,
        "overrideAffinity": {"nodeAffinity": None, "podAffinity": {}},
    }
    assert replacing(None, new) == new
    assert replacing(old, {}) == {"appendTolerations": None, "overrideAffinity": None}


@pytest.mark.parametrize(
    ("schema", "names"),
    [
        (prtbs.SCHEMA, ("projectName", "userName", "roleTemplateName")),
        (crtbs.SCHEMA, ("clusterName", "userName", "roleTemplateName")),
    ],
)
def test_bindings_show_their_stored_names(schema: Any, names: tuple[str, ...]) -> None:
    module = prtbs if schema is prtbs.SCHEMA else crtbs
    spec = {"projectName": "c-x:p-y", "clusterName": "c-x", "userName": "u-1",
            "roleTemplateName": "read-only"}  # fmt: skip
    obj = {"metadata": {"name": "b", "namespace": "c-x-p-y"}, "spec": spec}
    shown = module.FAMILY.fields(None, obj)  # the fields of a binding ask nothing of the request
    assert {n: shown[n] for n in names} == {n: spec[n] for n in names}
    assert all(schema.fields[n].create for n in names)


def test_the_deprecated_driver_is_in_the_schema() -> None:
    driver = SCHEMA.document("https://corral")["resourceFields"]["driver"]
    assert "svcKubernetesEngine" in driver["options"]
    assert set(driver["deprecatedOptions"]) == {"svcKubernetesEngine"}
