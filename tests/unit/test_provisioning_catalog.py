"""The version catalog: what it accepts, what it refuses, how client versions map onto it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.core.errors import Invalid
from corral.core.provisioning import catalog


def local(version: str = "v1.36.3", kwok: bool = True) -> dict[str, object]:
    image = f"localhost/corral-controlplane:{version}-abc"
    return json.loads(
        catalog.document(
            {
                version: catalog.binaries(
                    {name: image for name in (*catalog.REQUIRED, catalog.KWOK)},
                    ("/usr/local/bin/corral-kwok",) if kwok else None,
                )
            }
        )
    )


def test_the_default_catalog_names_the_upstream_images() -> None:
    release = catalog.parse(catalog.DEFAULT).release("v1.36.3")
    assert release.component("kube-apiserver") == catalog.Component(
        "registry.k8s.io/kube-apiserver:v1.36.3", ("/usr/local/bin/kube-apiserver",)
    )
    assert release.component("etcdutl").image == "registry.k8s.io/etcd:3.6.8-0"
    assert not release.simulates_nodes


def test_a_local_catalog_with_kwok_simulates_nodes() -> None:
    release = catalog.parse(json.dumps(local())).release("v1.36.3")
    assert release.simulates_nodes
    assert release.component("kwok").command == ("/usr/local/bin/corral-kwok",)


def test_a_version_not_in_the_catalog_is_refused_naming_those_it_has() -> None:
    parsed = catalog.parse(json.dumps(local() | local("v1.35.4")))
    with pytest.raises(Invalid, match=r"versions: v1\.35\.4, v1\.36\.3") as raised:
        parsed.release("v1.34.0", "rke2Config.kubernetesVersion")
    assert raised.value.field == "rke2Config.kubernetesVersion"
    assert raised.value.code == "InvalidOption"


@pytest.mark.parametrize(
    ("given", "driver", "key"),
    [
        ("v1.36.3", "rke2", "v1.36.3"),
        ("1.36.3", "k3s", "v1.36.3"),
        ("v1.36.3+rke2r1", "rke2", "v1.36.3"),
        ("v1.36.3+k3s2", "k3s", "v1.36.3"),
        (" v1.36.3 ", "rke2", "v1.36.3"),
    ],
)
def test_client_versions_map_to_catalog_keys(given: str, driver: str, key: str) -> None:
    assert catalog.normalise(given, driver) == key


@pytest.mark.parametrize(
    ("given", "driver"),
    [
        ("v1.36.3+k3s1", "rke2"),
        ("v1.36.3+rke2r1", "k3s"),
        ("v1.36", "rke2"),
        ("latest", "k3s"),
        ("", "rke2"),
        ("v01.36.3", "rke2"),
        ("v1.36.3-rc.1", "rke2"),
        ("v1.36.3+rke2r1", "imported"),
    ],
)
def test_malformed_or_other_flavour_versions_are_refused(given: str, driver: str) -> None:
    with pytest.raises(Invalid) as raised:
        catalog.normalise(given, driver)
    assert raised.value.code == "InvalidFormat"


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ("not json", "is not JSON"),
        ("[]", "JSON object"),
        ("{}", "JSON object"),
        ('{"1.36.3": {}}', "is not a version"),
        ('{"v1.36.3": []}', "object of components"),
        ('{"v1.36.3": {"etcd": {"image": "x", "command": ["/e"]}}}', "lacks components"),
    ],
)
def test_a_catalog_that_is_not_one_is_refused(document: str, says: str) -> None:
    with pytest.raises(Invalid, match=says) as raised:
        catalog.parse(document)
    assert raised.value.field == "value"


def test_components_are_checked_one_by_one() -> None:
    good = local()
    for change, says in [
        ({"kubelet": {"image": "x", "command": ["/k"]}}, "unknown components: kubelet"),
        ({"etcd": {"image": "Bad Image", "command": ["/e"]}}, "etcd.image"),
        ({"etcd": {"image": "x", "command": []}}, "etcd.command"),
        ({"etcd": {"image": "x", "command": [""]}}, "etcd.command"),
        ({"etcd": {"image": "x", "command": "/e"}}, "etcd.command"),
        ({"etcd": {"image": "x", "command": ["/e"], "args": []}}, "image and command"),
    ]:
        document = {"v1.36.3": {**good["v1.36.3"], **change}}  # type: ignore[dict-item]
        with pytest.raises(Invalid, match=says):
            catalog.parse(json.dumps(document))


def test_a_catalog_is_bounded() -> None:
    with pytest.raises(Invalid, match="at most"):
        catalog.parse(" " * (catalog.MAX_BYTES + 1))
    many = {f"v1.{i}.0": {} for i in range(catalog.MAX_VERSIONS + 1)}
    with pytest.raises(Invalid, match="at most"):
        catalog.parse(json.dumps(many))


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                    max_leaves=20))  # fmt: skip
def test_any_json_parses_or_is_refused_as_invalid(document: object) -> None:
    try:
        parsed = catalog.parse(json.dumps(document))
    except Invalid:
        return
    for release in parsed.releases.values():
        assert set(catalog.REQUIRED) <= set(release.components)
