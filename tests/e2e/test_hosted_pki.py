"""The PKI of a hosted control plane (corral.core.provisioning.pki) is what a real etcd and
kube-apiserver from devkube accept: mTLS to etcd with the etcd CA only, every component's
kubeconfig authenticates as its component, and the service-account key pair signs tokens.

The processes run on loopback with the ClusterIPs replaced by 127.0.0.1, which the
certificates name for the components in the control-plane pod anyway.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from corral.core import pki
from corral.core.provisioning import pki as cp
from corral.devenv.controlplane import advertise_address, free_port
from corral.devenv.process import Process
from corral.devenv.waiting import wait_for

ADDRESSES = cp.Addresses(namespace="c-pkitest", apiserver_ip="127.0.0.1", etcd_ip="127.0.0.1")


def write_secrets(root: Path, secrets: dict[str, dict[str, bytes]]) -> Path:
    """Each Secret as the directory its volume would mount."""
    for name, data in secrets.items():
        for file, content in data.items():
            (root / name).mkdir(parents=True, exist_ok=True, mode=0o700)
            pki.write_private(root / name / file, content)
    return root


def on_port(kubeconfig: Path, port: int, out: Path) -> Path:
    """The same kubeconfig dialling the test's port instead of 6443 (the host is shared)."""
    config = yaml.safe_load(kubeconfig.read_bytes())
    server = config["clusters"][0]["cluster"]["server"]
    config["clusters"][0]["cluster"]["server"] = server.replace(":6443", f":{port}")
    pki.write_private(out, yaml.safe_dump(config).encode())
    return out


def run(devkube: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(devkube), *args], capture_output=True, text=True, timeout=60, check=False
    )


class Plane:
    def __init__(self, devkube: Path, root: Path) -> None:
        self.devkube = devkube
        self.pki = write_secrets(
            root / "pki",
            cp.issue(cp.Authorities.create("c-pkitest"), ADDRESSES, cp.new_service_account_key()),
        )
        self.etcd_url = f"https://127.0.0.1:{free_port()}"
        self.port = free_port()
        self.root = root
        self.processes: list[Process] = []

    def file(self, secret: str, name: str) -> str:
        return str(self.pki / secret / name)

    def kubeconfig(self, secret: str) -> Path:
        return on_port(Path(self.file(secret, "kubeconfig")), self.port, self.root / secret)

    def start(self) -> None:
        peer = f"http://127.0.0.1:{free_port()}"
        etcd = cp.ETCD
        self.processes.append(
            Process(
                "etcd",
                [
                    str(self.devkube),
                    "etcd",
                    "--name=etcd",
                    f"--data-dir={self.root / 'etcd'}",
                    f"--listen-client-urls={self.etcd_url}",
                    f"--advertise-client-urls={self.etcd_url}",
                    f"--listen-peer-urls={peer}",
                    f"--initial-advertise-peer-urls={peer}",
                    f"--initial-cluster=etcd={peer}",
                    f"--cert-file={self.file(etcd, 'tls.crt')}",
                    f"--key-file={self.file(etcd, 'tls.key')}",
                    f"--trusted-ca-file={self.file(etcd, 'ca.crt')}",
                    "--client-cert-auth",
                    "--log-level=warn",
                ],
                self.root / "etcd.log",
            )
        )
        api = cp.APISERVER
        self.processes.append(
            Process(
                "kube-apiserver",
                [
                    str(self.devkube),
                    "kube-apiserver",
                    f"--etcd-servers={self.etcd_url}",
                    f"--etcd-cafile={self.file(api, 'etcd-ca.crt')}",
                    f"--etcd-certfile={self.file(api, 'etcd-client.crt')}",
                    f"--etcd-keyfile={self.file(api, 'etcd-client.key')}",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={self.port}",
                    f"--advertise-address={advertise_address()}",
                    f"--tls-cert-file={self.file(api, 'tls.crt')}",
                    f"--tls-private-key-file={self.file(api, 'tls.key')}",
                    f"--client-ca-file={self.file(api, 'ca.crt')}",
                    f"--kubelet-client-certificate={self.file(api, 'kubelet-client.crt')}",
                    f"--kubelet-client-key={self.file(api, 'kubelet-client.key')}",
                    "--authorization-mode=Node,RBAC",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    f"--service-account-key-file={self.file(api, 'sa.pub')}",
                    f"--service-account-signing-key-file={self.file(api, 'sa.key')}",
                    "--service-cluster-ip-range=10.43.0.0/16",
                    "--profiling=false",
                ],
                self.root / "kube-apiserver.log",
            )
        )
        admin = self.kubeconfig(cp.ADMIN)
        wait_for(
            "kube-apiserver /readyz",
            lambda: self.kubectl(admin, "get", "--raw=/readyz").returncode == 0,
            timeout=120,
            watch=self.processes,
            interval=0.5,
        )

    def kubectl(self, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return run(self.devkube, "kubectl", f"--kubeconfig={kubeconfig}", *args)

    def whoami(self, *args: str) -> tuple[str, list[str]]:
        result = run(self.devkube, "kubectl", *args, "auth", "whoami", "-o", "json")
        assert result.returncode == 0, result.stderr
        user = json.loads(result.stdout)["status"]["userInfo"]
        return user["username"], sorted(user.get("groups", []))

    def etcdctl(self, cert: str, key: str) -> subprocess.CompletedProcess[str]:
        return run(
            self.devkube,
            "etcdctl",
            f"--endpoints={self.etcd_url}",
            f"--cacert={self.file(cp.APISERVER, 'etcd-ca.crt')}",
            f"--cert={cert}",
            f"--key={key}",
            "endpoint",
            "health",
        )


@pytest.fixture(scope="module")
def plane(devkube: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    plane = Plane(devkube, tmp_path_factory.mktemp("hosted-pki"))
    try:
        plane.start()
        yield plane
    finally:
        # kube-apiserver before its etcd: stopped together, it waits out its grace period
        # retrying an etcd that is gone.
        for process in reversed(plane.processes):
            process.stop()


@pytest.mark.parametrize(
    ("secret", "user", "groups"),
    [
        (cp.CONTROLLER_MANAGER, "system:kube-controller-manager", ["system:authenticated"]),
        (cp.SCHEDULER, "system:kube-scheduler", ["system:authenticated"]),
        (cp.KWOK, "kwok", ["system:authenticated", "system:masters"]),
        (cp.ADMIN, "corral-bootstrap", ["system:authenticated", "system:masters"]),
    ],
)
def test_each_kubeconfig_is_accepted_as_its_component(
    plane: Plane, secret: str, user: str, groups: list[str]
) -> None:
    # kubectl verifies the serving certificate against the kubeconfig's CA and 127.0.0.1.
    assert plane.whoami(f"--kubeconfig={plane.kubeconfig(secret)}") == (user, groups)


def test_only_the_etcd_ca_opens_etcd(plane: Plane) -> None:
    api = cp.APISERVER
    trusted = plane.etcdctl(plane.file(api, "etcd-client.crt"), plane.file(api, "etcd-client.key"))
    assert trusted.returncode == 0, trusted.stderr
    # A client certificate of the cluster CA, even one in system:masters, is refused.
    refused = plane.etcdctl(
        plane.file(api, "kubelet-client.crt"), plane.file(api, "kubelet-client.key")
    )
    assert refused.returncode != 0
    assert "unhealthy" in refused.stderr or "certificate" in refused.stderr


def test_etcds_json_gateway_answers_which_dials_the_member_with_the_serving_certificate(
    plane: Plane,
) -> None:
    api = cp.APISERVER
    context = ssl.create_default_context(cafile=plane.file(api, "etcd-ca.crt"))
    context.load_cert_chain(plane.file(api, "etcd-client.crt"), plane.file(api, "etcd-client.key"))
    request = urllib.request.Request(
        f"{plane.etcd_url}/v3/kv/range",
        data=json.dumps({"key": "Lw=="}).encode(),  # "/"
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=context, timeout=15) as response:
        assert "header" in json.loads(response.read())


def test_the_service_account_key_pair_signs_tokens_the_apiserver_accepts(plane: Plane) -> None:
    admin = plane.kubeconfig(cp.ADMIN)
    created = plane.kubectl(admin, "create", "serviceaccount", "probe", "-n", "default")
    assert created.returncode == 0, created.stderr
    token = plane.kubectl(admin, "create", "token", "probe", "-n", "default")
    assert token.returncode == 0, token.stderr

    server = f"--server=https://127.0.0.1:{plane.port}"
    ca = f"--certificate-authority={plane.file(cp.APISERVER, 'ca.crt')}"
    assert plane.whoami(
        server, ca, f"--token={token.stdout.strip()}", "--kubeconfig=/dev/null"
    ) == (
        "system:serviceaccount:default:probe",
        ["system:authenticated", "system:serviceaccounts", "system:serviceaccounts:default"],
    )
