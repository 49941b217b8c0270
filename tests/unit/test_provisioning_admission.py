"""What a create or update of an rke2 or k3s cluster may say, and what is stored of it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.apiserver.routes.clusters import SCHEMA
from corral.core.errors import Invalid
from corral.core.provisioning import admission, catalog
from corral.core.provisioning.flavours import FLAVOURS, K3S, RKE2

TWO = catalog.parse(
    catalog.document(
        {
            version: catalog.binaries({name: f"x/{name}:{version}" for name in catalog.REQUIRED})
            for version in ("v1.35.4", "v1.36.3")
        }
    )
)


def refusal(config: Any, version: Any = None, flavour: Any = RKE2) -> Invalid:
    with pytest.raises(Invalid) as raised:
        admission.admit(flavour, config, version, TWO)
    return raised.value


def test_the_flavours_and_their_plugins() -> None:
    assert set(FLAVOURS) == {"rke2", "k3s"}
    assert (RKE2.default_plugin, RKE2.plugins) == ("canal", ("canal", "none"))
    assert (K3S.default_plugin, K3S.plugins) == ("flannel", ("flannel", "none"))
    for flavour in FLAVOURS.values():
        assert flavour.default_plugin in flavour.plugins
        assert catalog.normalise(flavour.example_version, flavour.driver) == "v1.36.3"


@pytest.mark.parametrize(
    ("flavour", "config", "version", "key"),
    [
        (RKE2, {"kubernetesVersion": "v1.36.3+rke2r1"}, None, "v1.36.3"),
        (RKE2, {"kubernetesVersion": "1.35.4"}, "v1.35.4", "v1.35.4"),
        (RKE2, {}, "v1.36.3", "v1.36.3"),
        (RKE2, None, "v1.36.3+rke2r2", "v1.36.3"),  # the driver given alone
        (K3S, {"kubernetesVersion": "v1.36.3+k3s1"}, "", "v1.36.3"),
        (K3S, {"kubernetesVersion": None}, "1.35.4", "v1.35.4"),
    ],
)
def test_the_catalog_key_is_stored_and_the_version_kept_as_given(
    flavour: Any, config: Any, version: Any, key: str
) -> None:
    admitted = admission.admit(flavour, config, version, TWO)
    assert admitted.version == key
    given = (config or {}).get("kubernetesVersion") or version
    assert admitted.config["kubernetesVersion"] == given
    assert admitted.config["networking"] == {"plugin": flavour.default_plugin}


def test_other_keys_are_kept_and_the_plugin_given_is_kept() -> None:
    config = {
        "kubernetesVersion": "v1.36.3",
        "networking": {"plugin": "none", "mtu": 1400},
        "etcd": {"snapshotRetention": 5},
    }
    admitted = admission.admit(RKE2, config, None, TWO)
    assert admitted.config == config
    assert admission.admit(K3S, {"networking": {"plugin": "none"}}, "v1.36.3", TWO).config[
        "networking"
    ] == {"plugin": "none"}


def test_a_version_not_in_the_catalog_lists_the_versions_it_has() -> None:
    refused = refusal({"kubernetesVersion": "v1.34.0+rke2r1"})
    assert (refused.code, refused.field) == ("InvalidOption", "rke2Config.kubernetesVersion")
    assert "versions: v1.35.4, v1.36.3" in refused.message
    refused = refusal({}, "v1.37.0", K3S)
    assert (refused.code, refused.field) == ("InvalidOption", "kubernetesVersion")


IN_CONFIG = "rke2Config.kubernetesVersion"
PLUGIN = "rke2Config.networking.plugin"
FORMAT, OPTION, MISSING = "InvalidFormat", "InvalidOption", "MissingRequired"


@pytest.mark.parametrize(
    ("config", "version", "field", "code"),
    [
        ({}, None, IN_CONFIG, MISSING),
        ({"kubernetesVersion": ""}, "", IN_CONFIG, MISSING),
        ({"kubernetesVersion": "v1.36.3"}, "v1.35.4", IN_CONFIG, FORMAT),
        ({"kubernetesVersion": "v1.36.3+k3s1"}, None, IN_CONFIG, FORMAT),
        ({}, "v1.36.3+k3s1", "kubernetesVersion", FORMAT),
        ({"kubernetesVersion": "v1.36.3"}, "latest", "kubernetesVersion", FORMAT),
        ({"kubernetesVersion": 1.36}, None, IN_CONFIG, FORMAT),
        ({"kubernetesVersion": "v" + "1" * 80}, None, IN_CONFIG, FORMAT),
        ({"networking": "canal"}, "v1.36.3", "rke2Config.networking", FORMAT),
        ({"networking": {"plugin": "flannel"}}, "v1.36.3", PLUGIN, OPTION),
        ({"networking": {"plugin": ["canal"]}}, "v1.36.3", PLUGIN, OPTION),
        ("v1.36.3", None, "rke2Config", FORMAT),
        ({"x": "y" * admission.MAX_CONFIG_BYTES}, "v1.36.3", "rke2Config", FORMAT),
    ],
)
def test_what_is_refused_names_its_field(config: Any, version: Any, field: str, code: str) -> None:
    refused = refusal(config, version)
    assert refused.field == field
    assert (refused.code or FORMAT) == code  # None: the kind's own


def test_a_bad_plugin_is_refused_listing_the_flavours_plugins() -> None:
    refused = refusal({"networking": {"plugin": "canal"}}, "v1.36.3", K3S)
    assert refused.field == "k3sConfig.networking.plugin"
    assert "flannel, none" in refused.message


@settings(max_examples=300, deadline=1000)
@given(
    st.sampled_from([RKE2, K3S]),
    st.none() | st.dictionaries(st.sampled_from(["kubernetesVersion", "networking", "x"]),
                                st.none() | st.text(max_size=20) | st.integers()
                                | st.dictionaries(st.just("plugin"), st.text(max_size=10))),
    st.none() | st.text(max_size=20) | st.sampled_from(["v1.36.3", "1.35.4+rke2r1"]),
)  # fmt: skip
def test_any_config_is_admitted_clean_or_refused(flavour: Any, config: Any, version: Any) -> None:
    try:
        admitted = admission.admit(flavour, config, version, TWO)
    except Invalid as refused:
        assert refused.field is not None
        assert refused.field.split(".")[0] in (flavour.config_field, "kubernetesVersion")
        return
    assert admitted.version in TWO.releases
    assert admitted.config["networking"]["plugin"] in flavour.plugins
    assert len(json.dumps(admitted.config)) < 2 * admission.MAX_CONFIG_BYTES


def test_the_schema_says_what_each_flavour_accepts() -> None:
    for flavour in FLAVOURS.values():
        description = SCHEMA.fields[flavour.config_field].description
        assert ", ".join(flavour.plugins) in description
        assert flavour.example_version in description
        assert "kubernetes-version-catalog" in description
    for config in ("aksConfig", "eksConfig", "gkeConfig"):
        assert "no provider for" in SCHEMA.fields[config].description
    assert SCHEMA.fields["importedConfig"].description == ""


@pytest.mark.parametrize("plugin", ["calico", "cilium"])
def test_a_plugin_corral_does_not_install_yet_is_refused_saying_so(plugin: str) -> None:
    refused = refusal({"kubernetesVersion": "v1.36.3", "networking": {"plugin": plugin}})
    assert (refused.code, refused.field) == ("InvalidOption", "rke2Config.networking.plugin")
    assert f"{plugin} is not installed by corral yet" in refused.message
    assert "canal, none" in refused.message
