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


SHA = "0123456789abcdef" * 4


def with_node(**node: object) -> str:
    """The local catalog of v1.36.3 with a node section of `node`, the pod network's images and
    commands beside it."""
    document = local()
    release = document["v1.36.3"]
    assert isinstance(release, dict)
    release["flannel"] = {
        "image": "localhost/corral-flannel:v0.28.10",
        "command": ["/opt/bin/flanneld"],
    }
    release["network-policies"] = {
        "image": "localhost/kube-router:v2.1.0",
        "command": ["/usr/local/bin/kube-router"],
    }
    release["node"] = node
    return json.dumps(document)


def node_files(**changes: object) -> dict[str, object]:
    files: dict[str, object] = {
        "kubelet": {"url": "/assets/kubelet-v1.36.3", "sha256": SHA},
        "kube-proxy": {"url": "https://downloads.example.com/v1.36.3/kube-proxy", "sha256": SHA},
        "cni-plugins": {"url": "/assets/cni-plugins-v1.10.0.tgz", "sha256": SHA},
    }
    return {name: spec for name, spec in (files | changes).items() if spec is not None}


def test_a_version_with_a_node_section_names_each_file_and_its_checksum() -> None:
    images = {"url": "/assets/images-v1.36.3.tar", "sha256": SHA}
    release = catalog.parse(with_node(**node_files(images=images))).release("v1.36.3")
    assert release.node is not None
    assert release.node["kubelet"] == catalog.Asset("/assets/kubelet-v1.36.3", SHA)
    assert release.node["kube-proxy"].url == "https://downloads.example.com/v1.36.3/kube-proxy"
    assert release.node["images"] == catalog.Asset("/assets/images-v1.36.3.tar", SHA)
    assert release.component("flannel").command == ("/opt/bin/flanneld",)
    assert release.component("network-policies").image == "localhost/kube-router:v2.1.0"


def test_the_node_section_and_its_image_archive_are_optional() -> None:
    assert catalog.parse(json.dumps(local())).release("v1.36.3").node is None
    node = catalog.parse(with_node(**node_files())).release("v1.36.3").node
    assert node is not None
    assert set(node) == {"kubelet", "kube-proxy", "cni-plugins"}


def test_document_writes_node_sections_that_parse_back() -> None:
    assets = {name: catalog.Asset(f"/assets/{name}", SHA) for name in catalog.NODE_REQUIRED}
    components = catalog.binaries(dict.fromkeys(catalog.REQUIRED, "x"))
    text = catalog.document({"v1.36.3": components}, {"v1.36.3": assets})
    assert catalog.parse(text).release("v1.36.3").node == assets


@pytest.mark.parametrize(
    ("node", "says"),
    [
        ("x", "node must be an object of files"),
        (None, "node must be an object of files"),
        (node_files(kubelet=None), "node lacks files: kubelet"),
        (node_files(kubectl={"url": "/assets/k", "sha256": SHA}), "unknown files: kubectl"),
        (node_files(kubelet={"url": "/assets/k"}), "kubelet must be an object of url and sha256"),
        (node_files(kubelet={"url": "/assets/k", "sha256": SHA, "mode": "0755"}), "url and sha256"),
        (node_files(kubelet=["/assets/k", SHA]), "url and sha256"),
    ],
)
def test_a_node_section_of_the_wrong_shape_is_refused(node: object, says: str) -> None:
    document = json.loads(with_node())
    document["v1.36.3"]["node"] = node
    with pytest.raises(Invalid, match=says) as raised:
        catalog.parse(json.dumps(document))
    assert raised.value.field == "value"


@pytest.mark.parametrize(
    "url",
    [
        "http://downloads.example.com/kubelet",
        "ftp://downloads.example.com/kubelet",
        "file:///usr/bin/kubelet",
        "https:///kubelet",
        "https://user:secret@downloads.example.com/kubelet",
        "https://downloads.example.com/kube let",
        "https://downloads.example.com/kubelet\n",
        "https://[::1/kubelet",
        "https://downloads.example.com:99999/kubelet",
        "https://downloads.example.com:x/kubelet",
        "https://downloads.example.com/" + "k" * catalog.MAX_URL,
        "kubelet",
        "assets/kubelet",
        "/assets/",
        "/assets/../etc/shadow",
        "/assets/bin/kubelet",
        "/assets/.kubelet",
        "/assets/%2e%2e%2fetc%2fshadow",
        "/assets/kubelet?x=1",
        "/etc/shadow",
        "//evil.example.com/kubelet",
        "",
        7,
    ],
)
def test_a_file_url_must_be_https_or_a_file_of_assets(url: object) -> None:
    with pytest.raises(Invalid, match=r"node\.kubelet\.url must be an https:// URL or /assets/"):
        catalog.parse(with_node(**node_files(kubelet={"url": url, "sha256": SHA})))


@pytest.mark.parametrize("sha256", [SHA.upper(), SHA[:-1], SHA + "0", "g" * 64, "", None, 0])
def test_a_checksum_must_be_64_lowercase_hex_digits(sha256: object) -> None:
    with pytest.raises(Invalid, match=r"node\.cni-plugins\.sha256 must be 64 lowercase"):
        catalog.parse(
            with_node(**node_files(**{"cni-plugins": {"url": "/assets/c.tgz", "sha256": sha256}}))
        )


def test_the_pod_network_components_are_checked_as_every_component() -> None:
    document = json.loads(with_node(**node_files()))
    document["v1.36.3"]["flannel"] = {"image": "localhost/flannel", "command": "/opt/bin/flanneld"}
    with pytest.raises(Invalid, match=r"flannel\.command"):
        catalog.parse(json.dumps(document))
