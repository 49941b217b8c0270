from __future__ import annotations

import datetime
import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from corral.core import pki


def load(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def test_server_certificate_is_signed_by_the_ca_and_carries_ip_and_dns_names() -> None:
    ca = pki.CertificateAuthority.create("test-ca")
    pair = ca.issue_server("apiserver", ["127.0.0.1", "localhost", "kubernetes.default.svc"])
    cert, issuer = load(pair.cert), load(ca.cert_pem)

    cert.verify_directly_issued_by(issuer)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert sans.get_values_for_type(x509.DNSName) == ["localhost", "kubernetes.default.svc"]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]


def test_client_certificate_carries_user_and_groups_as_kubernetes_reads_them() -> None:
    ca = pki.CertificateAuthority.create("test-ca")
    cert = load(ca.issue_client("admin", ["system:masters"]).cert)

    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "admin"
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:masters"
    ]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]


def test_ca_certificate_may_sign_and_key_matches() -> None:
    ca = pki.CertificateAuthority.create("test-ca")
    pair = ca.pair()
    cert = load(pair.cert)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    key = serialization.load_pem_private_key(pair.key, password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()


def test_written_keys_are_readable_by_the_owner_only(tmp_path: Path) -> None:
    crt, key = pki.CertificateAuthority.create("ca").pair().write(tmp_path / "pki", "ca")
    for path in (crt, key):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_private_file_is_replaced_whole_and_left_private(tmp_path: Path) -> None:
    target = tmp_path / "dev.env"
    target.write_text("OLD=1\n")
    target.chmod(0o644)
    pki.write_private(target, b"NEW=2\n")
    assert target.read_text() == "NEW=2\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["dev.env"]  # nothing staged left behind


def test_a_ca_loaded_from_pem_issues_certificates_that_verify_against_the_stored_one() -> None:
    stored = pki.CertificateAuthority.create("test-ca").pair()
    loaded = pki.CertificateAuthority.load(stored)

    load(loaded.issue_client("someone").cert).verify_directly_issued_by(load(stored.cert))
    assert loaded.cert_pem == stored.cert


def test_loading_refuses_a_leaf_or_a_key_that_is_not_the_cas() -> None:
    ca = pki.CertificateAuthority.create("test-ca")
    leaf = ca.issue_server("server", ["localhost"])
    other = pki.CertificateAuthority.create("other-ca").pair()

    with pytest.raises(ValueError, match="not a CA"):
        pki.CertificateAuthority.load(leaf)
    with pytest.raises(ValueError, match="does not belong"):
        pki.CertificateAuthority.load(pki.KeyPair(cert=ca.cert_pem, key=other.key))


def test_a_ca_lasts_as_long_as_asked_and_leaves_one_year() -> None:
    ca = pki.CertificateAuthority.create("test-ca", datetime.timedelta(days=3650))
    ca_cert, leaf = load(ca.cert_pem), load(ca.issue_client("someone").cert)

    assert (ca_cert.not_valid_after_utc - ca_cert.not_valid_before_utc).days == 3650
    assert (leaf.not_valid_after_utc - leaf.not_valid_before_utc).days == 365


def test_a_serving_certificate_may_also_authenticate_as_a_client_when_asked() -> None:
    ca = pki.CertificateAuthority.create("test-ca")
    cert = load(ca.issue_server("etcd", ["localhost"], client_auth=True).cert)

    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]


def test_the_public_key_pem_is_the_private_keys_half() -> None:
    key = pki.new_key()
    public = serialization.load_pem_public_key(pki.public_key_pem(key))

    assert public == key.public_key()
    assert pki.load_key(pki.key_pem(key)).private_numbers() == key.private_numbers()
