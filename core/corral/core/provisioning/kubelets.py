"""Which certificate requests of a provisioned cluster's kubelets corral approves.

A machine's kubelet bootstraps its TLS: with its join credential it asks for a client
certificate as `system:node:<hostname>`, and once it is a node, for a serving certificate
naming its addresses. Kubernetes' own approver would sign any node name for any bootstrapper;
corral approves a request only when it is for the machine that asked (docs/design/
real-machines.md, "The kubelet's credential"):

- a client certificate, asked by the join account of the machine whose hostname it names, or by
  that node itself renewing;
- a serving certificate, asked by the node itself, naming only its hostname and its addresses.

Anything else is left alone, to expire unsigned: a request corral does not recognise may be
somebody else's to approve.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID

CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
SERVING_SIGNER = "kubernetes.io/kubelet-serving"
NODE_USER_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"

CLIENT_USAGES = frozenset({"digital signature", "client auth"})
SERVING_USAGES = frozenset({"digital signature", "server auth"})
# RSA keys ask for key encipherment too; it adds nothing a node could misuse.
OPTIONAL_USAGES = frozenset({"key encipherment"})


@dataclass(frozen=True)
class Request:
    """What of a CertificateSigningRequest the decision reads."""

    name: str
    signer: str
    requester: str
    usages: frozenset[str]
    common_name: str
    organizations: tuple[str, ...]
    dns_names: tuple[str, ...]
    ip_addresses: tuple[str, ...]
    other_names: bool  # email, URI or other SANs: never in a kubelet's request


def pending(csr: Mapping[str, Any]) -> bool:
    """Neither approved nor denied yet."""
    conditions = (csr.get("status") or {}).get("conditions") or []
    return not any(c.get("type") in ("Approved", "Denied") for c in conditions)


def read(csr: Mapping[str, Any]) -> Request | None:
    """The request, or None when its PEM does not parse (left alone)."""
    spec = csr.get("spec") or {}
    try:
        parsed = x509.load_pem_x509_csr(base64.b64decode(spec.get("request") or ""))
    except ValueError:
        return None
    try:
        sans = parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        sans = x509.SubjectAlternativeName([])
    names = parsed.subject
    return Request(
        name=str((csr.get("metadata") or {}).get("name") or ""),
        signer=str(spec.get("signerName") or ""),
        requester=str(spec.get("username") or ""),
        usages=frozenset(spec.get("usages") or ()),
        common_name=_only(names.get_attributes_for_oid(NameOID.COMMON_NAME)),
        organizations=tuple(
            str(a.value) for a in names.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
        ),
        dns_names=tuple(sans.get_values_for_type(x509.DNSName)),
        ip_addresses=tuple(str(ip) for ip in sans.get_values_for_type(x509.IPAddress)),
        other_names=len(sans)
        != len(sans.get_values_for_type(x509.DNSName))
        + len(sans.get_values_for_type(x509.IPAddress)),
    )


def approval(
    request: Request,
    join_accounts: Mapping[str, str],
    nodes: Mapping[str, frozenset[str]],
) -> str | None:
    """Why `request` is approved, or None when it is not for corral to approve.

    `join_accounts` maps the username of each machine's join account to that machine's
    hostname; `nodes` maps each node of a corral machine to its addresses.
    """
    if request.signer == CLIENT_SIGNER:
        return _client(request, join_accounts, nodes)
    if request.signer == SERVING_SIGNER:
        return _serving(request, nodes)
    return None


def _client(
    request: Request, join_accounts: Mapping[str, str], nodes: Mapping[str, frozenset[str]]
) -> str | None:
    if not _usages_are(request.usages, CLIENT_USAGES) or request.dns_names or request.ip_addresses:
        return None
    if request.other_names or request.organizations != (NODES_GROUP,):
        return None
    hostname = _node_name(request.common_name)
    if hostname is None:
        return None
    if join_accounts.get(request.requester) == hostname:
        return f"machine {hostname} joins with its join credential"
    if request.requester == request.common_name and hostname in nodes:
        return f"node {hostname} renews its client certificate"
    return None


def _serving(request: Request, nodes: Mapping[str, frozenset[str]]) -> str | None:
    if not _usages_are(request.usages, SERVING_USAGES) or request.other_names:
        return None
    if request.organizations != (NODES_GROUP,) or request.requester != request.common_name:
        return None
    hostname = _node_name(request.common_name)
    if hostname is None or hostname not in nodes:
        return None
    if not request.dns_names and not request.ip_addresses:
        return None
    if any(name != hostname for name in request.dns_names):
        return None
    known = {_normal(a) for a in nodes[hostname]}
    if any(_normal(ip) not in known for ip in request.ip_addresses):
        return None
    return f"node {hostname} serves on its own addresses"


def _usages_are(asked: frozenset[str], needed: frozenset[str]) -> bool:
    return needed <= asked <= needed | OPTIONAL_USAGES


def _node_name(common_name: str) -> str | None:
    if not common_name.startswith(NODE_USER_PREFIX):
        return None
    return common_name[len(NODE_USER_PREFIX) :] or None


def _only(attributes: list[x509.NameAttribute[Any]]) -> str:
    return str(attributes[0].value) if len(attributes) == 1 else ""


def _normal(address: str) -> str:
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return address
