"""Which kubelet certificate requests corral approves (core/provisioning/kubelets.py)."""

from __future__ import annotations

import base64
import ipaddress
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from corral.core.provisioning import kubelets

JOIN = "system:serviceaccount:corral-machines:machine-m-1"
ACCOUNTS = {JOIN: "worker1"}
NODES = {"worker1": frozenset({"10.254.0.40"})}


def csr(
    signer: str,
    requester: str,
    common_name: str = "system:node:worker1",
    organizations: tuple[str, ...] = ("system:nodes",),
    dns: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
    usages: tuple[str, ...] = ("digital signature", "client auth"),
    email: str | None = None,
) -> dict[str, Any]:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(attributes))
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if email:
        sans.append(x509.RFC822Name(email))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    request = builder.sign(ec.generate_private_key(ec.SECP256R1()), hashes.SHA256())
    pem = request.public_bytes(serialization.Encoding.PEM)
    return {
        "metadata": {"name": "csr-1"},
        "spec": {
            "request": base64.b64encode(pem).decode(),
            "signerName": signer,
            "username": requester,
            "usages": list(usages),
        },
    }


def decide(body: dict[str, Any]) -> str | None:
    request = kubelets.read(body)
    assert request is not None
    return kubelets.approval(request, ACCOUNTS, NODES)


SERVING = ("digital signature", "key encipherment", "server auth")
CLIENT_AND_SERVER = ("digital signature", "client auth", "server auth")


def test_the_machine_s_join_account_gets_its_own_node_s_client_certificate() -> None:
    assert decide(csr(kubelets.CLIENT_SIGNER, JOIN)) is not None


@pytest.mark.parametrize(
    "body",
    [
        # another machine's name
        csr(kubelets.CLIENT_SIGNER, JOIN, common_name="system:node:worker2"),
        # somebody else asking for the machine's name
        csr(kubelets.CLIENT_SIGNER, "system:serviceaccount:default:builder"),
        # more groups than a node's
        csr(kubelets.CLIENT_SIGNER, JOIN, organizations=("system:nodes", "system:masters")),
        csr(kubelets.CLIENT_SIGNER, JOIN, organizations=("system:masters",)),
        # a client certificate that could also serve
        csr(kubelets.CLIENT_SIGNER, JOIN, usages=CLIENT_AND_SERVER),
        csr(kubelets.CLIENT_SIGNER, JOIN, dns=("worker1",)),
        # not a node's name at all
        csr(kubelets.CLIENT_SIGNER, JOIN, common_name="admin"),
        csr(kubelets.CLIENT_SIGNER, JOIN, common_name="system:node:"),
    ],
)
def test_a_client_request_for_anything_else_is_left_alone(body: dict[str, Any]) -> None:
    assert decide(body) is None


def test_a_node_renews_its_own_client_certificate_only() -> None:
    assert decide(csr(kubelets.CLIENT_SIGNER, "system:node:worker1")) is not None
    other = csr(kubelets.CLIENT_SIGNER, "system:node:worker2")
    assert decide(other) is None
    # a node corral does not know of
    unknown = csr(kubelets.CLIENT_SIGNER, "system:node:ghost", common_name="system:node:ghost")
    assert decide(unknown) is None


def test_a_node_gets_a_serving_certificate_for_its_own_name_and_addresses() -> None:
    body = csr(kubelets.SERVING_SIGNER, "system:node:worker1", dns=("worker1",),
               ips=("10.254.0.40",), usages=SERVING)  # fmt: skip
    assert decide(body) is not None


@pytest.mark.parametrize(
    "body",
    [
        csr(kubelets.SERVING_SIGNER, "system:node:worker1", dns=("kubernetes.default",),
            usages=SERVING),
        csr(kubelets.SERVING_SIGNER, "system:node:worker1", ips=("10.0.0.1",), usages=SERVING),
        csr(kubelets.SERVING_SIGNER, "system:node:worker1", dns=("worker1",),
            email="a@example.com", usages=SERVING),
        # asked for another node
        csr(kubelets.SERVING_SIGNER, "system:node:worker2", dns=("worker1",), usages=SERVING),
        # by the join account, not the node
        csr(kubelets.SERVING_SIGNER, JOIN, dns=("worker1",), usages=SERVING),
        # names nothing
        csr(kubelets.SERVING_SIGNER, "system:node:worker1", usages=SERVING),
        # could be used as a client
        csr(kubelets.SERVING_SIGNER, "system:node:worker1", dns=("worker1",),
            usages=("digital signature", "server auth", "client auth")),
    ],
)  # fmt: skip
def test_a_serving_request_beyond_the_node_is_left_alone(body: dict[str, Any]) -> None:
    assert decide(body) is None


def test_other_signers_and_unreadable_requests_are_left_alone() -> None:
    assert decide(csr("example.com/custom", JOIN)) is None
    broken = csr(kubelets.CLIENT_SIGNER, JOIN)
    broken["spec"]["request"] = base64.b64encode(b"not a request").decode()
    assert kubelets.read(broken) is None


def test_only_requests_without_a_verdict_are_pending() -> None:
    body = csr(kubelets.CLIENT_SIGNER, JOIN)
    assert kubelets.pending(body)
    body["status"] = {"conditions": [{"type": "Denied", "status": "True"}]}
    assert not kubelets.pending(body)
    body["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
    assert not kubelets.pending(body)
