"""Registration's pure parts: tokens, the node command, what a machine sends, the tar it gets,
the catalog's node section, and the installer scripts as shellcheck reads them."""

from __future__ import annotations

import base64
import datetime
import hashlib
import io
import json
import shlex
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from corral.core import settings
from corral.core.api import names
from corral.core.errors import Invalid
from corral.core.pki import CertificateAuthority
from corral.core.provisioning import catalog
from corral.core.registration import bundle, command, request, tokens

SH = shutil.which("sh") or "/bin/sh"
SCRIPTS = Path(__file__).resolve().parents[2] / "apiserver" / "corral" / "apiserver" / "node"
NOW = datetime.datetime(2026, 11, 28, 12, 0, tzinfo=datetime.UTC)


# -- tokens ---------------------------------------------------------------------------------


def test_a_token_value_is_48_characters_of_the_alphabet_and_found_by_its_sha256() -> None:
    value = tokens.new_value()
    assert len(value) == tokens.VALUE_LENGTH and tokens.well_formed(value)
    assert tokens.digest(value) == hashlib.sha256(value.encode()).hexdigest()
    assert value != tokens.new_value()


@pytest.mark.parametrize("value", ["", "a" * 48, "b" * 47, "b" * 49, "b" * 47 + "/"])
def test_what_is_not_a_token_value_is_not_looked_up(value: str) -> None:
    assert not tokens.well_formed(value)


@pytest.mark.parametrize("ttl", [None, 0])
def test_no_ttl_never_expires(ttl: int | None) -> None:
    assert tokens.ttl(ttl) is None
    assert tokens.expires_at(NOW, tokens.ttl(ttl)) == ""
    assert not tokens.expired({"expiresAt": ""}, NOW)


@pytest.mark.parametrize("ttl", [-1, 59, tokens.MAX_TTL_SECONDS + 1, 1.5, "60", True])
def test_a_ttl_out_of_bounds_or_not_whole_seconds_is_refused(ttl: object) -> None:
    with pytest.raises(Invalid) as refused:
        tokens.ttl(ttl)
    assert refused.value.field == "ttl"


def test_a_token_expires_when_its_ttl_has_passed() -> None:
    spec = {"expiresAt": tokens.expires_at(NOW, tokens.ttl(60))}
    assert tokens.state(spec, NOW + datetime.timedelta(seconds=59)) == tokens.ACTIVE
    assert tokens.state(spec, NOW + datetime.timedelta(seconds=60)) == tokens.EXPIRED


# -- the node command -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls() -> tuple[bytes, bytes]:
    ca = CertificateAuthority.create("registration-test-ca")
    return ca.cert_pem, ca.issue_server("corral", ["127.0.0.1"]).cert


def test_the_pin_is_curls_sha256_of_the_public_key(tls: tuple[bytes, bytes]) -> None:
    """Computed as curl's manual says, with openssl, independently of corral's code."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    _, cert = tls
    public = subprocess.run([openssl, "x509", "-pubkey", "-noout"], input=cert,
                            capture_output=True, check=True).stdout  # fmt: skip
    der = subprocess.run([openssl, "pkey", "-pubin", "-outform", "der"], input=public,
                         capture_output=True, check=True).stdout  # fmt: skip
    expected = base64.b64encode(hashlib.sha256(der).digest()).decode()
    assert command.pin(cert) == f"sha256//{expected}"


def test_the_node_command_pins_the_key_and_checks_the_ca(tls: tuple[bytes, bytes]) -> None:
    ca, cert = tls
    token = tokens.new_value()
    fetch, install = command.node_command("https://corral.test", token, ca, cert).split(" | ")
    assert shlex.split(fetch) == ["curl", "-fsSL", "--pinnedpubkey", command.pin(cert), "-k",
                                  "https://corral.test/v3/connect/install.sh"]  # fmt: skip
    assert shlex.split(install) == [
        "sh", "-s", "-", "--server", "https://corral.test", "--token", token,
        "--ca-checksum", hashlib.sha256(ca).hexdigest(), "--worker",
    ]  # fmt: skip


def test_the_insecure_command_drops_the_pin_only(tls: tuple[bytes, bytes]) -> None:
    ca, cert = tls
    secure = command.node_command("https://c.test", "t", ca, cert)
    insecure = command.node_command("https://c.test", "t", ca, cert, pinned=False)
    assert "--pinnedpubkey" not in insecure
    assert insecure == secure.replace(f"--pinnedpubkey {shlex.quote(command.pin(cert))} ", "")


def test_without_a_ca_of_its_own_the_command_trusts_the_system(tls: tuple[bytes, bytes]) -> None:
    _, cert = tls
    line = command.node_command("https://c.test", "t", None, cert)
    assert "-k" not in shlex.split(line) and "--ca-checksum" not in line
    assert "--pinnedpubkey" not in line


# -- what a machine sends -------------------------------------------------------------------


def test_a_registration_is_read_with_its_defaults() -> None:
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    got = request.parse({"hostname": "worker-1", "address": "10.0.0.7",
                         "labels": {"disk": "ssd"}, "taints": [taint]})  # fmt: skip
    assert got == request.Registration(
        hostname="worker-1", address="10.0.0.7", labels={"disk": "ssd"},
        taints=({"key": "k", "value": "v", "effect": "NoSchedule"},),
        cgroup_driver="systemd", containerd_socket=bundle.DEFAULT_SOCKET,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({}, "hostname", "MissingRequired"),
        ({"hostname": "Worker"}, "hostname", "InvalidFormat"),
        ({"hostname": "a_b"}, "hostname", "InvalidFormat"),
        ({"hostname": "w", "roles": ["worker", "etcd"]}, "roles", "InvalidOption"),
        ({"hostname": "w", "roles": ["controlplane"]}, "roles", "InvalidOption"),
        ({"hostname": "w", "roles": []}, "roles", "InvalidOption"),
        ({"hostname": "w", "address": "10.0.0.300"}, "address", "InvalidFormat"),
        ({"hostname": "w", "internalAddress": 7}, "internalAddress", "InvalidFormat"),
        ({"hostname": "w", "labels": {"a": "b,c=d"}}, "labels", "InvalidFormat"),
        ({"hostname": "w", "labels": {"node-role.kubernetes.io/worker": ""}}, "labels",
         "InvalidFormat"),
        ({"hostname": "w", "labels": {"k8s.io/x": "y"}}, "labels", "InvalidFormat"),
        ({"hostname": "w", "taints": [{"key": "k", "effect": "Never"}]}, "taints",
         "InvalidFormat"),
        ({"hostname": "w", "cgroupDriver": "cgroups"}, "cgroupDriver", "InvalidOption"),
        ({"hostname": "w", "cgroupRoot": "relative"}, "cgroupRoot", "InvalidFormat"),
        ({"hostname": "w", "containerdSocket": "/run/../etc/x"}, "containerdSocket",
         "InvalidFormat"),
        ({"hostname": "w", "containerdSocket": "/run/c d.sock"}, "containerdSocket",
         "InvalidFormat"),
    ],
)  # fmt: skip
def test_a_bad_registration_names_its_field(body: dict[str, object], field: str,
                                            code: str) -> None:  # fmt: skip
    with pytest.raises(Invalid) as refused:
        request.parse(body)
    assert (refused.value.field, refused.value.code or "InvalidFormat") == (field, code)


@pytest.mark.parametrize(
    ("key", "allowed"),
    [
        ("disk", True),
        ("example.com/disk", True),
        ("kubernetes.io.example.com/x", True),
        ("topology.kubernetes.io/zone", True),
        ("node.kubernetes.io/instance-type", True),
        ("node.kubernetes.io/anything", True),
        ("a.kubelet.kubernetes.io/anything", True),
        ("node-role.kubernetes.io/worker", False),
        ("kubernetes.io/role", False),
        ("topology.kubernetes.io/rack", False),
        ("storage.k8s.io/x", False),
    ],
)
def test_a_machine_may_ask_only_for_labels_its_kubelet_starts_with(key: str, allowed: bool) -> None:
    assert request.kubelet_may_set(key) is allowed


def test_the_control_plane_roles_are_refused_saying_why() -> None:
    with pytest.raises(Invalid, match="hosted by corral"):
        request.parse({"hostname": "w", "roles": ["etcd"]})


# -- the tar --------------------------------------------------------------------------------

MACHINE = bundle.Machine(
    hostname="worker-1", record="m-0123456789", address="10.0.0.7",
    internal_address="192.168.0.7", labels={"disk": "ssd"},
    taints=({"key": "k", "effect": "NoSchedule"},), cgroup_driver="cgroupfs",
    cgroup_root="/corral-node-a", containerd_socket="/run/c/containerd.sock",
)  # fmt: skip
ASSETS = [bundle.Asset("kubelet", "https://corral.test/assets/kubelet", "a" * 64),
          bundle.Asset("cni-plugins", "https://other.test/cni.tgz", "b" * 64)]  # fmt: skip


def unpacked() -> dict[str, tuple[int, bytes]]:
    files = bundle.files(MACHINE, bundle.Cluster("https://10.0.0.1:6443", b"CA PEM"), "join-tok",
                         ASSETS)  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(bundle.tar(files))) as archive:
        return {
            m.name: (m.mode, archive.extractfile(m).read())  # type: ignore[union-attr]
            for m in archive.getmembers()
        }


def test_the_tar_holds_the_files_the_installer_writes_readable_by_root_only() -> None:
    contents = unpacked()
    assert sorted(contents) == sorted(bundle.FILES)
    assert {mode for mode, _ in contents.values()} == {0o600}


def test_the_bootstrap_kubeconfig_is_the_clusters_with_the_join_token() -> None:
    config = yaml.safe_load(unpacked()["bootstrap.kubeconfig"][1])
    assert config["clusters"][0]["cluster"] == {
        "server": "https://10.0.0.1:6443",
        "certificate-authority-data": base64.b64encode(b"CA PEM").decode(),
    }
    assert config["users"][0]["user"] == {"token": "join-tok"}
    assert unpacked()["ca.crt"][1] == b"CA PEM"


def test_the_kubelet_bootstraps_and_rotates_its_certificates_on_the_machines_runtime() -> None:
    config = yaml.safe_load(unpacked()["kubelet.yaml"][1])
    assert config["serverTLSBootstrap"] is True and config["rotateCertificates"] is True
    assert config["cgroupDriver"] == "cgroupfs" and config["cgroupRoot"] == "/corral-node-a"
    assert config["containerRuntimeEndpoint"] == "unix:///run/c/containerd.sock"
    assert config["registerWithTaints"] == [{"key": "k", "effect": "NoSchedule"}]
    assert config["authentication"]["anonymous"] == {"enabled": False}
    assert config["authentication"]["x509"]["clientCAFile"] == f"{bundle.NODE_DIR}/ca.crt"


def test_the_kubelets_flags_name_the_node_its_address_and_its_record() -> None:
    args = unpacked()["kubelet.args"][1].decode().splitlines()
    assert args == [
        "--hostname-override=worker-1",
        f"--node-labels=disk=ssd,{names.LABEL_MACHINE}=m-0123456789",
        "--node-ip=192.168.0.7",
    ]


def test_kube_proxy_uses_the_kubelets_credential_and_the_pod_network() -> None:
    config = yaml.safe_load(unpacked()["kube-proxy.yaml"][1])
    assert config["clientConnection"]["kubeconfig"] == bundle.KUBELET_KUBECONFIG
    assert config["clusterCIDR"] == "10.42.0.0/16"
    assert config["hostnameOverride"] == "worker-1"


def test_the_assets_are_one_line_each_name_sha256_url() -> None:
    assert unpacked()["assets"][1].decode().splitlines() == [
        f"kubelet {'a' * 64} https://corral.test/assets/kubelet",
        f"cni-plugins {'b' * 64} https://other.test/cni.tgz",
    ]


# -- the catalog's node section -------------------------------------------------------------


def with_node(node: object) -> str:
    document = json.loads(settings.CATALOG[catalog.SETTING].default)
    document[catalog.UPSTREAM_VERSION][catalog.NODE] = node
    return json.dumps(document)


GOOD_NODE = {
    "kubelet": {"url": "/assets/kubelet", "sha256": "a" * 64},
    "kube-proxy": {"url": "https://dl.example/kube-proxy", "sha256": "b" * 64},
    "cni-plugins": {"url": "/assets/cni-plugins.tgz", "sha256": "c" * 64},
}


def test_a_version_with_a_node_section_gives_its_downloads() -> None:
    release = catalog.parse(with_node(GOOD_NODE)).release(catalog.UPSTREAM_VERSION)
    assert release.node == {
        "kubelet": catalog.Asset("/assets/kubelet", "a" * 64),
        "kube-proxy": catalog.Asset("https://dl.example/kube-proxy", "b" * 64),
        "cni-plugins": catalog.Asset("/assets/cni-plugins.tgz", "c" * 64),
    }
    default = catalog.parse(settings.CATALOG[catalog.SETTING].default)
    assert default.release(catalog.UPSTREAM_VERSION).node is None


@pytest.mark.parametrize(
    "node",
    [
        [],
        {k: v for k, v in GOOD_NODE.items() if k != "kubelet"},
        {**GOOD_NODE, "kubectl": GOOD_NODE["kubelet"]},
        {**GOOD_NODE, "kubelet": {"url": "http://dl.example/kubelet", "sha256": "a" * 64}},
        {**GOOD_NODE, "kubelet": {"url": "/assets/../etc/passwd", "sha256": "a" * 64}},
        {**GOOD_NODE, "kubelet": {"url": "/assets/kubelet", "sha256": "A" * 64}},
        {**GOOD_NODE, "kubelet": {"url": "/assets/kubelet", "sha256": "a" * 63}},
        {**GOOD_NODE, "kubelet": {"url": "/assets/kubelet"}},
    ],
)
def test_a_bad_node_section_is_refused(node: object) -> None:
    with pytest.raises(Invalid, match="node"):
        catalog.parse(with_node(node))


# -- the installer --------------------------------------------------------------------------


@pytest.mark.parametrize("script", ["install.sh", "uninstall.sh"])
def test_the_node_scripts_pass_shellcheck_as_posix_sh(script: str) -> None:
    shellcheck = Path(sys.executable).parent / "shellcheck"
    checked = subprocess.run([str(shellcheck), "-s", "sh", str(SCRIPTS / script)],
                             capture_output=True, text=True)  # fmt: skip
    assert checked.returncode == 0, checked.stdout


def test_the_installer_refuses_the_control_plane_roles_before_anything_else() -> None:
    ran = subprocess.run([SH, str(SCRIPTS / "install.sh"), "--etcd"], capture_output=True,
                         text=True)  # fmt: skip
    assert ran.returncode == 1
    assert "hosted by corral" in ran.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--token", "t", "--worker"], "--server is required"),
        (["--server", "https://c", "--worker"], "--token is required"),
        (["--server", "https://c", "--token", "t"], "--worker is required"),
        (["--server", "http://c", "--token", "t", "--worker"], "must be https"),
        (["--server", "https://c", "--token", "t", "--worker", "--ca-checksum", "xyz"],
         "--ca-checksum"),
        (["--server", "https://c", "--token", "t", "--worker", "--label", "a=b;rm"], "--label"),
        (["--server"], "--server needs a value"),
        (["--bogus"], "unknown flag --bogus"),
    ],
)  # fmt: skip
def test_the_installer_says_what_is_wrong_with_its_flags(args: list[str], says: str) -> None:
    ran = subprocess.run([SH, str(SCRIPTS / "install.sh"), *args], capture_output=True,
                         text=True)  # fmt: skip
    assert ran.returncode == 1
    assert says in ran.stderr
