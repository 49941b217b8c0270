"""Certificates and keys: a small certificate authority built on `cryptography`.

ECDSA P-256 throughout: kube-apiserver, etcd and Python's ssl all accept it for serving,
client and service-account keys, and it is fast to generate.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=365)
# Backdated so that a clock a little behind on the verifying side still accepts new certificates.
_BACKDATE = datetime.timedelta(hours=1)


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def public_key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """The public half, as kube-apiserver's --service-account-key-file reads it."""
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def not_valid_after(pem: bytes) -> datetime.datetime:
    """When a PEM certificate expires (UTC)."""
    return x509.load_pem_x509_certificate(pem).not_valid_after_utc


def load_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("not an ECDSA private key")
    return key


@dataclass(frozen=True)
class KeyPair:
    """A certificate with its private key, as PEM bytes ready to write or embed."""

    cert: bytes
    key: bytes

    def write(self, directory: Path, name: str) -> tuple[Path, Path]:
        """Write `<name>.crt` and `<name>.key` (owner-only) and return their paths."""
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        crt, key = directory / f"{name}.crt", directory / f"{name}.key"
        write_private(crt, self.cert)
        write_private(key, self.key)
        return crt, key


def write_private(path: Path, data: bytes) -> None:
    """Write a file readable by its owner only, whatever the umask, whole or not at all: it is
    written beside and renamed in, so a reader (a script waiting for dev.env) never sees it
    half written."""
    fd, staged = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        Path(staged).replace(path)
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise


class CertificateAuthority:
    """A self-signed CA that issues serving and client certificates."""

    def __init__(self, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
        self._key = key
        self._cert = cert

    @classmethod
    def create(
        cls, common_name: str, validity: datetime.timedelta = _VALIDITY
    ) -> CertificateAuthority:
        key = new_key()
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        cert = (
            _builder(name, key.public_key(), validity)
            .issuer_name(name)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    @classmethod
    def load(cls, pair: KeyPair) -> CertificateAuthority:
        """The CA kept as PEM (in a Secret), to issue more certificates from it later. A
        certificate that may not sign, or a key that is not its own, is refused: issuing from
        it would give certificates that nothing trusts."""
        cert, key = x509.load_pem_x509_certificate(pair.cert), load_key(pair.key)
        if not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
            raise ValueError("not a CA certificate")
        if cert.public_key() != key.public_key():
            raise ValueError("the key does not belong to the CA certificate")
        return cls(key, cert)

    @property
    def cert_pem(self) -> bytes:
        return cert_pem(self._cert)

    def pair(self) -> KeyPair:
        return KeyPair(cert=self.cert_pem, key=key_pem(self._key))

    def issue_server(
        self, common_name: str, hosts: list[str], *, client_auth: bool = False
    ) -> KeyPair:
        """A serving certificate; each host becomes an IP or DNS subject alternative name.

        `client_auth` lets the same certificate authenticate as a client too, which etcd needs
        when it requires client certificates: its gRPC gateway dials the member itself with the
        serving certificate."""
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        usages = [ExtendedKeyUsageOID.SERVER_AUTH]
        if client_auth:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        return self._issue(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]),
            usages,
            x509.SubjectAlternativeName(sans),
        )

    def issue_client(self, user: str, groups: list[str] | None = None) -> KeyPair:
        """A client certificate; Kubernetes reads the user from CN and groups from O."""
        attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups or []]
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
        return self._issue(x509.Name(attributes), [ExtendedKeyUsageOID.CLIENT_AUTH], None)

    def _issue(
        self,
        subject: x509.Name,
        usages: list[x509.ObjectIdentifier],
        sans: x509.SubjectAlternativeName | None,
    ) -> KeyPair:
        key = new_key()
        builder = (
            _builder(subject, key.public_key())
            .issuer_name(self._cert.subject)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), False
            )
        )
        if sans is not None:
            builder = builder.add_extension(sans, critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert=cert_pem(cert), key=key_pem(key))


def _builder(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    validity: datetime.timedelta = _VALIDITY,
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + validity)
    )
