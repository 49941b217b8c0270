from __future__ import annotations

import base64
import datetime

import pytest
import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from corral.core import pki
from corral.core.provisioning import pki as cp

ADDRESSES = cp.Addresses(namespace="c-abc12", apiserver_ip="10.0.0.17", etcd_ip="10.0.0.18")


@pytest.fixture(scope="module")
def authorities() -> cp.Authorities:
    return cp.Authorities.create("c-abc12")


@pytest.fixture(scope="module")
def sa_key() -> bytes:
    return cp.new_service_account_key()


@pytest.fixture(scope="module")
def secrets(authorities: cp.Authorities, sa_key: bytes) -> dict[str, dict[str, bytes]]:
    return cp.issue(authorities, ADDRESSES, sa_key)


def load(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def names(cert: x509.Certificate) -> tuple[list[str], list[str]]:
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    ips = [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)]
    return ips, sans.get_values_for_type(x509.DNSName)


def subject(cert: x509.Certificate) -> tuple[str, list[str]]:
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    groups = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    return str(cn), [str(g) for g in groups]


def usages(cert: x509.Certificate) -> list[x509.ObjectIdentifier]:
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def kubeconfig_parts(data: bytes) -> tuple[str, bytes, x509.Certificate]:
    """The server, the CA and the client certificate of a one-context kubeconfig."""
    config = yaml.safe_load(data)
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    return (
        cluster["server"],
        base64.b64decode(cluster["certificate-authority-data"]),
        load(base64.b64decode(user["client-certificate-data"])),
    )


def test_the_secrets_of_the_design_each_hold_the_files_their_containers_mount(
    secrets: dict[str, dict[str, bytes]],
) -> None:
    assert {name: sorted(data) for name, data in secrets.items()} == {
        "pki-ca": ["ca.crt", "ca.key"],
        "pki-etcd-ca": ["ca.crt", "ca.key"],
        "pki-etcd": ["ca.crt", "tls.crt", "tls.key"],
        "pki-apiserver": [
            "ca.crt",
            "etcd-ca.crt",
            "etcd-client.crt",
            "etcd-client.key",
            "kubelet-client.crt",
            "kubelet-client.key",
            "sa.key",
            "sa.pub",
            "tls.crt",
            "tls.key",
        ],
        "kubeconfig-controller-manager": ["ca.crt", "ca.key", "kubeconfig", "sa.key"],
        "kubeconfig-scheduler": ["kubeconfig"],
        "kubeconfig-kwok": ["kubeconfig", "tls.crt", "tls.key"],
        "kubeconfig-admin": ["kubeconfig"],
    }


def test_the_cas_are_two_distinct_ten_year_authorities(
    secrets: dict[str, dict[str, bytes]],
) -> None:
    cluster_ca, etcd_ca = load(secrets["pki-ca"]["ca.crt"]), load(secrets["pki-etcd-ca"]["ca.crt"])
    assert cluster_ca.public_key() != etcd_ca.public_key()
    for ca in (cluster_ca, etcd_ca):
        assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        assert (ca.not_valid_after_utc - ca.not_valid_before_utc).days == 3650
    assert subject(cluster_ca)[0] == "c-abc12-ca"
    assert subject(etcd_ca)[0] == "c-abc12-etcd-ca"


def test_etcd_serves_its_service_names_and_clusterip_signed_by_the_etcd_ca(
    secrets: dict[str, dict[str, bytes]],
) -> None:
    etcd_ca = load(secrets["pki-etcd-ca"]["ca.crt"])
    serving = load(secrets["pki-etcd"]["tls.crt"])

    serving.verify_directly_issued_by(etcd_ca)
    assert secrets["pki-etcd"]["ca.crt"] == secrets["pki-etcd-ca"]["ca.crt"]
    assert names(serving) == (
        ["10.0.0.18", "127.0.0.1"],
        [
            "etcd",
            "etcd.c-abc12",
            "etcd.c-abc12.svc",
            "etcd.c-abc12.svc.cluster.local",
            "localhost",
        ],
    )
    assert usages(serving) == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]


def test_the_apiserver_serves_every_name_it_is_dialled_by(
    secrets: dict[str, dict[str, bytes]],
) -> None:
    serving = load(secrets["pki-apiserver"]["tls.crt"])

    serving.verify_directly_issued_by(load(secrets["pki-ca"]["ca.crt"]))
    ips, dns = names(serving)
    assert ips == ["10.0.0.17", "10.43.0.1", "127.0.0.1"]
    assert {
        "kube-apiserver.c-abc12.svc",
        "kube-apiserver.c-abc12.svc.cluster.local",
        "kubernetes",
        "kubernetes.default.svc.cluster.local",
        "localhost",
    } <= set(dns)
    assert usages(serving) == [ExtendedKeyUsageOID.SERVER_AUTH]


def test_only_the_apiserver_holds_a_client_certificate_of_the_etcd_ca(
    secrets: dict[str, dict[str, bytes]],
) -> None:
    etcd_ca = load(secrets["pki-etcd-ca"]["ca.crt"])
    apiserver = secrets["pki-apiserver"]
    client = load(apiserver["etcd-client.crt"])

    client.verify_directly_issued_by(etcd_ca)
    assert usages(client) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert apiserver["etcd-ca.crt"] == secrets["pki-etcd-ca"]["ca.crt"]
    # What the cluster CA signs never opens etcd.
    for name in ("kubeconfig-controller-manager", "kubeconfig-scheduler", "kubeconfig-admin"):
        _, _, cert = kubeconfig_parts(secrets[name]["kubeconfig"])
        with pytest.raises((InvalidSignature, ValueError)):
            cert.verify_directly_issued_by(etcd_ca)


@pytest.mark.parametrize(
    ("secret", "user", "groups", "server"),
    [
        ("kubeconfig-controller-manager", "system:kube-controller-manager", [], "127.0.0.1"),
        ("kubeconfig-scheduler", "system:kube-scheduler", [], "127.0.0.1"),
        ("kubeconfig-kwok", "kwok", ["system:masters"], "127.0.0.1"),
        ("kubeconfig-admin", "corral-bootstrap", ["system:masters"], "10.0.0.17"),
    ],
)
def test_each_kubeconfig_names_its_component_and_dials_where_it_runs(
    secrets: dict[str, dict[str, bytes]], secret: str, user: str, groups: list[str], server: str
) -> None:
    url, ca, cert = kubeconfig_parts(secrets[secret]["kubeconfig"])

    assert url == f"https://{server}:6443"
    assert ca == secrets["pki-ca"]["ca.crt"]
    cert.verify_directly_issued_by(load(ca))
    assert subject(cert) == (user, groups)
    assert usages(cert) == [ExtendedKeyUsageOID.CLIENT_AUTH]


def test_kwok_serves_on_loopback_for_the_apiserver_in_its_pod(
    secrets: dict[str, dict[str, bytes]],
) -> None:
    serving = load(secrets["kubeconfig-kwok"]["tls.crt"])

    serving.verify_directly_issued_by(load(secrets["pki-ca"]["ca.crt"]))
    assert names(serving) == (["127.0.0.1"], ["localhost"])


def test_the_apiserver_and_kcm_share_one_service_account_key_pair(
    secrets: dict[str, dict[str, bytes]], sa_key: bytes
) -> None:
    apiserver, kcm = secrets["pki-apiserver"], secrets["kubeconfig-controller-manager"]
    public = serialization.load_pem_public_key(apiserver["sa.pub"])

    assert apiserver["sa.key"] == kcm["sa.key"] == sa_key
    assert public == pki.load_key(sa_key).public_key()
    assert kcm["ca.crt"] == secrets["pki-ca"]["ca.crt"]


def test_a_later_pass_issues_new_leaves_from_the_stored_cas_and_keeps_the_sa_key(
    secrets: dict[str, dict[str, bytes]], sa_key: bytes
) -> None:
    stored = {name: cp.decode(cp.encode(data)) for name, data in secrets.items()}
    again = cp.issue(cp.Authorities.load(stored), ADDRESSES, sa_key)

    assert again["pki-ca"] == secrets["pki-ca"]
    assert again["pki-etcd-ca"] == secrets["pki-etcd-ca"]
    old, new = load(secrets["pki-apiserver"]["tls.crt"]), load(again["pki-apiserver"]["tls.crt"])
    assert new.serial_number != old.serial_number
    new.verify_directly_issued_by(load(secrets["pki-ca"]["ca.crt"]))
    assert again["pki-apiserver"]["sa.key"] == sa_key


def test_the_certificates_follow_the_reserved_addresses(
    authorities: cp.Authorities, sa_key: bytes
) -> None:
    moved = cp.Addresses(namespace="c-other", apiserver_ip="10.0.0.99", etcd_ip="10.0.0.98")
    etcd = load(cp.etcd_data(authorities, moved)["tls.crt"])
    apiserver = load(cp.apiserver_data(authorities, moved, sa_key)["tls.crt"])
    server, _, _ = kubeconfig_parts(cp.admin_data(authorities, moved)["kubeconfig"])

    assert names(etcd)[0][0] == "10.0.0.98"
    assert "etcd.c-other.svc" in names(etcd)[1]
    assert names(apiserver)[0][0] == "10.0.0.99"
    assert "kube-apiserver.c-other.svc" in names(apiserver)[1]
    assert server == "https://10.0.0.99:6443"


def test_secret_data_is_base64_of_the_files() -> None:
    data = {"ca.crt": b"-----BEGIN CERTIFICATE-----\n", "kubeconfig": b"apiVersion: v1\n"}

    encoded = cp.encode(data)
    assert encoded["kubeconfig"] == base64.b64encode(b"apiVersion: v1\n").decode()
    assert cp.decode(encoded) == data


def test_a_secret_is_due_for_renewal_once_a_leaf_in_it_has_thirty_days_left(
    secrets: dict[str, dict[str, bytes]],
) -> None:
    serving = load(secrets["pki-apiserver"]["tls.crt"])
    leaves = sorted(set(secrets) - {"pki-ca", "pki-etcd-ca"})

    assert cp.renewal_due(secrets, serving.not_valid_before_utc) == []
    # The leaves of one pass all last a year from (almost) the same moment; the scheduler's and
    # the admin's Secrets hold nothing but a kubeconfig, so its certificate is read too.
    almost = serving.not_valid_after_utc - datetime.timedelta(days=30, minutes=1)
    assert cp.renewal_due(secrets, almost) == []
    due = serving.not_valid_after_utc - datetime.timedelta(days=29)
    assert cp.renewal_due(secrets, due) == leaves
    # The CAs are replaced only by a rotation that asks for it, never by this rule.
    ca_end = load(secrets["pki-ca"]["ca.crt"]).not_valid_after_utc
    assert cp.renewal_due(secrets, ca_end - datetime.timedelta(days=1)) == leaves


def test_a_controller_manager_secret_without_the_signing_key_is_issued_again(
    secrets: dict[str, dict[str, bytes]],
) -> None:
    kcm = secrets["kubeconfig-controller-manager"]
    assert not cp.outdated("kubeconfig-controller-manager", kcm)
    older = {key: value for key, value in kcm.items() if key != "ca.key"}
    assert cp.outdated("kubeconfig-controller-manager", older)
    assert not cp.outdated("kubeconfig-scheduler", secrets["kubeconfig-scheduler"])
