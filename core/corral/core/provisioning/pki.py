"""The certificates and keys of a hosted control plane, as the data of the Secrets in its
cluster's namespace (docs/design/provisioned-clusters.md, section 2.6).

Two CAs: the cluster CA signs everything Kubernetes verifies (serving, component clients,
kwok's "kubelet"), and a separate etcd CA signs etcd's serving certificate and its only
client, kube-apiserver. A certificate from the cluster CA therefore never opens etcd.

Each Secret's data maps the file name its container mounts to the PEM or kubeconfig bytes;
`encode` turns that into a Secret's base64 `data`.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from corral.core import kubeconfig, pki

CA_VALIDITY = datetime.timedelta(days=3650)
# Leaves (one year) are issued again this long before they expire; the CAs are replaced only
# by a rotation that asks for it.
RENEW_BEFORE = datetime.timedelta(days=30)
_CA_FILES = {"ca.crt", "etcd-ca.crt"}

# Both flavours give the hosted cluster the Service CIDR 10.43.0.0/16; its first address is the
# `kubernetes` Service, which pods inside the hosted cluster dial.
KUBERNETES_SERVICE_IP = "10.43.0.1"
CLUSTER_DOMAIN = "cluster.local"
APISERVER_PORT = 6443

# The two Services of the cluster's namespace in the management cluster.
ETCD_SERVICE = "etcd"
APISERVER_SERVICE = "kube-apiserver"

# Secret names.
CA = "pki-ca"
ETCD_CA = "pki-etcd-ca"
ETCD = "pki-etcd"
APISERVER = "pki-apiserver"
CONTROLLER_MANAGER = "kubeconfig-controller-manager"
SCHEDULER = "kubeconfig-scheduler"
KWOK = "kubeconfig-kwok"
ADMIN = "kubeconfig-admin"

# corral's bootstrap identity: it installs corral's service account in the hosted cluster, and
# is kept for recovery.
ADMIN_USER = "corral-bootstrap"
MASTERS = "system:masters"


@dataclass(frozen=True)
class Addresses:
    """Where a hosted control plane is reached: its namespace in the management cluster and
    the ClusterIPs of its two Services, reserved before any certificate is issued."""

    namespace: str
    apiserver_ip: str
    etcd_ip: str

    @property
    def server(self) -> str:
        """The hosted apiserver as seen from the management cluster (and from corral)."""
        return f"https://{self.apiserver_ip}:{APISERVER_PORT}"


@dataclass(frozen=True)
class Authorities:
    cluster: pki.CertificateAuthority
    etcd: pki.CertificateAuthority

    @classmethod
    def create(cls, cluster_id: str) -> Authorities:
        return cls(
            cluster=pki.CertificateAuthority.create(f"{cluster_id}-ca", CA_VALIDITY),
            etcd=pki.CertificateAuthority.create(f"{cluster_id}-etcd-ca", CA_VALIDITY),
        )

    @classmethod
    def load(cls, secrets: Mapping[str, Mapping[str, bytes]]) -> Authorities:
        """The CAs from their Secrets' decoded data, to issue leaves on a later pass."""
        return cls(cluster=_load_ca(secrets[CA]), etcd=_load_ca(secrets[ETCD_CA]))


def service_names(service: str, namespace: str) -> list[str]:
    """The DNS names a Service answers to, short to fully qualified."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.{CLUSTER_DOMAIN}",
    ]


def etcd_hosts(addresses: Addresses) -> list[str]:
    return [
        addresses.etcd_ip,
        *service_names(ETCD_SERVICE, addresses.namespace),
        "127.0.0.1",
        "localhost",
    ]


def apiserver_hosts(addresses: Addresses) -> list[str]:
    """Reached by corral at the ClusterIP (the management cluster has no DNS in the local
    environment), by pods of the hosted cluster at the `kubernetes` Service, and by the
    components in its own pod at 127.0.0.1."""
    return [
        addresses.apiserver_ip,
        *service_names(APISERVER_SERVICE, addresses.namespace),
        KUBERNETES_SERVICE_IP,
        *service_names("kubernetes", "default"),
        "127.0.0.1",
        "localhost",
    ]


def new_service_account_key() -> bytes:
    """The key that signs service-account tokens. It is never rotated, so that corral's own
    token and every pod's token outlive a certificate rotation."""
    return pki.key_pem(pki.new_key())


def issue(
    authorities: Authorities, addresses: Addresses, service_account_key: bytes
) -> dict[str, dict[str, bytes]]:
    """Every Secret of the control plane, by name: the CAs as given, the leaves new."""
    return {
        CA: ca_data(authorities.cluster),
        ETCD_CA: ca_data(authorities.etcd),
        ETCD: etcd_data(authorities, addresses),
        APISERVER: apiserver_data(authorities, addresses, service_account_key),
        CONTROLLER_MANAGER: controller_manager_data(authorities, service_account_key),
        SCHEDULER: scheduler_data(authorities),
        KWOK: kwok_data(authorities),
        ADMIN: admin_data(authorities, addresses),
    }


def ca_data(ca: pki.CertificateAuthority) -> dict[str, bytes]:
    pair = ca.pair()
    return {"ca.crt": pair.cert, "ca.key": pair.key}


def etcd_data(authorities: Authorities, addresses: Addresses) -> dict[str, bytes]:
    serving = authorities.etcd.issue_server("etcd", etcd_hosts(addresses), client_auth=True)
    return {"tls.crt": serving.cert, "tls.key": serving.key, "ca.crt": authorities.etcd.cert_pem}


def apiserver_data(
    authorities: Authorities, addresses: Addresses, service_account_key: bytes
) -> dict[str, bytes]:
    serving = authorities.cluster.issue_server("kube-apiserver", apiserver_hosts(addresses))
    etcd_client = authorities.etcd.issue_client("kube-apiserver-etcd-client")
    # The apiserver's identity towards kubelets (logs, exec, port-forward), as in the devenv.
    kubelet_client = authorities.cluster.issue_client("kube-apiserver-kubelet-client", [MASTERS])
    return {
        "tls.crt": serving.cert,
        "tls.key": serving.key,
        "ca.crt": authorities.cluster.cert_pem,
        "etcd-ca.crt": authorities.etcd.cert_pem,
        "etcd-client.crt": etcd_client.cert,
        "etcd-client.key": etcd_client.key,
        "kubelet-client.crt": kubelet_client.cert,
        "kubelet-client.key": kubelet_client.key,
        "sa.key": service_account_key,
        "sa.pub": pki.public_key_pem(pki.load_key(service_account_key)),
    }


def controller_manager_data(
    authorities: Authorities, service_account_key: bytes
) -> dict[str, bytes]:
    # sa.key signs the tokens of the service accounts kcm creates; ca.crt is --root-ca-file,
    # what every pod's service-account volume carries; with ca.key kcm signs the kubelet
    # certificates corral approved (operator/downstream/kubelets.py).
    pair = authorities.cluster.pair()
    return {
        "kubeconfig": _in_pod_kubeconfig(authorities, "system:kube-controller-manager", []),
        "sa.key": service_account_key,
        "ca.crt": pair.cert,
        "ca.key": pair.key,
    }


# Keys a Secret written by an earlier corral may lack: such a Secret is issued again.
KEYS_ADDED = {CONTROLLER_MANAGER: ("ca.key",)}


def outdated(name: str, data: Mapping[str, bytes]) -> bool:
    """The Secret `name` holding `data` lacks what this corral's control plane mounts."""
    return any(key not in data for key in KEYS_ADDED.get(name, ()))


def scheduler_data(authorities: Authorities) -> dict[str, bytes]:
    return {"kubeconfig": _in_pod_kubeconfig(authorities, "system:kube-scheduler", [])}


def kwok_data(authorities: Authorities) -> dict[str, bytes]:
    # kwok plays every node's kubelet: it writes Nodes, Leases and any pod's status, which no
    # built-in role but cluster-admin allows. It listens at 127.0.0.1 in the pod, where the
    # apiserver dials the "kubelet" and checks it against the cluster CA.
    serving = authorities.cluster.issue_server("kwok", ["127.0.0.1", "localhost"])
    return {
        "kubeconfig": _in_pod_kubeconfig(authorities, "kwok", [MASTERS]),
        "tls.crt": serving.cert,
        "tls.key": serving.key,
    }


def admin_data(authorities: Authorities, addresses: Addresses) -> dict[str, bytes]:
    client = authorities.cluster.issue_client(ADMIN_USER, [MASTERS])
    config = kubeconfig.build(
        ADMIN_USER,
        addresses.server,
        authorities.cluster.cert_pem,
        kubeconfig.Credentials(client_cert=client.cert, client_key=client.key),
    )
    return {"kubeconfig": kubeconfig.dump(config).encode()}


def expiries(secrets: Mapping[str, Mapping[str, bytes]]) -> dict[str, datetime.datetime]:
    """When the first leaf certificate of each Secret that holds one, served or embedded in a
    kubeconfig, expires, by name."""
    found = {}
    for name, data in secrets.items():
        leaves = [] if name in (CA, ETCD_CA) else _leaves(data)
        if leaves:
            found[name] = min(pki.not_valid_after(cert) for cert in leaves)
    return found


def due(expiries: Mapping[str, datetime.datetime], now: datetime.datetime) -> list[str]:
    """The Secrets whose first leaf expires within RENEW_BEFORE of `now` (or has expired), by
    name."""
    return sorted(name for name, expiry in expiries.items() if expiry - now < RENEW_BEFORE)


def renewal_due(secrets: Mapping[str, Mapping[str, bytes]], now: datetime.datetime) -> list[str]:
    """The Secrets holding a leaf certificate, served or embedded in a kubeconfig, that expires
    within RENEW_BEFORE of `now`, by name."""
    return due(expiries(secrets), now)


def encode(data: Mapping[str, bytes]) -> dict[str, str]:
    """A Secret's `data`: each value base64."""
    return {name: base64.b64encode(value).decode() for name, value in data.items()}


def decode(data: Mapping[str, str]) -> dict[str, bytes]:
    return {name: base64.b64decode(value) for name, value in data.items()}


def _in_pod_kubeconfig(authorities: Authorities, user: str, groups: list[str]) -> bytes:
    """kcm, the scheduler and kwok run in the apiserver's pod and dial it on loopback."""
    client = authorities.cluster.issue_client(user, groups)
    config = kubeconfig.build(
        user,
        f"https://127.0.0.1:{APISERVER_PORT}",
        authorities.cluster.cert_pem,
        kubeconfig.Credentials(client_cert=client.cert, client_key=client.key),
    )
    return kubeconfig.dump(config).encode()


def _leaves(data: Mapping[str, bytes]) -> list[bytes]:
    leaves = [
        value for file, value in data.items() if file.endswith(".crt") and file not in _CA_FILES
    ]
    if "kubeconfig" in data:
        for user in yaml.safe_load(data["kubeconfig"])["users"]:
            leaves.append(base64.b64decode(user["user"]["client-certificate-data"]))
    return leaves


def _load_ca(data: Mapping[str, bytes]) -> pki.CertificateAuthority:
    return pki.CertificateAuthority.load(pki.KeyPair(cert=data["ca.crt"], key=data["ca.key"]))
