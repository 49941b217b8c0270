"""Certificate rotation of a hosted control plane (docs/design/provisioned-clusters.md, section
2.14): what a `rotateCertificates` request asks for, which Secrets it replaces, their new data,
what corral's credential trusts meanwhile, and when the roll is over.

Pure: the API server stores the request in `spec.rotateCertificates`, the provisioner writes the
Secrets this returns and records the generation in `status.provisioning` once rolled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from corral.core import pki
from corral.core.api import condition_types as ct
from corral.core.errors import unknown
from corral.core.provisioning import pki as cp
from corral.core.provisioning.manifests import ANNOTATION_PKI_GENERATION

ACTION = "rotateCertificates"
INPUT_TYPE = "rotateCertificatesInput"
INPUT_FIELDS = ("caCertificates", "services")
OUTPUT_TYPE = "rotateCertificateOutput"
ANNOTATION_ROTATION = "management.svc.io/certificate-rotation"
STATUS_FIELD = "certificateRotationGeneration"
STEP = ct.REASON_ROTATING_CERTIFICATES

ETCD = "etcd"
KUBELET = "kubelet"
KUBE_PROXY = "kube-proxy"
# The services a request may name, as Rancher's API type allows them.
SERVICES = (ETCD, "kube-apiserver", "kube-controller-manager", "kube-scheduler", KUBELET,
            KUBE_PROXY)  # fmt: skip
# The Secrets holding each service's leaf certificates. kwok plays every node's kubelet, so its
# serving certificate is the kubelet's; no kube-proxy runs on simulated nodes. corral's
# bootstrap administrator is a client of kube-apiserver's, renewed with it.
SERVICE_SECRETS: dict[str, tuple[str, ...]] = {
    ETCD: (cp.ETCD,),
    "kube-apiserver": (cp.APISERVER, cp.ADMIN),
    "kube-controller-manager": (cp.CONTROLLER_MANAGER,),
    "kube-scheduler": (cp.SCHEDULER,),
    KUBELET: (cp.KWOK,),
    KUBE_PROXY: (),
}
# Everything that embeds a certificate of, or trusts, the cluster CA.
CLUSTER_CA_SECRETS = (cp.CA, cp.APISERVER, cp.CONTROLLER_MANAGER, cp.SCHEDULER, cp.KWOK, cp.ADMIN)
# Everything that embeds a certificate of, or trusts, the etcd CA.
ETCD_CA_SECRETS = (cp.ETCD_CA, cp.ETCD, cp.APISERVER)
# The order Secrets are written in: the CAs first, so that a pass cut short after them issues
# the remaining leaves with the new CAs it finds stored.
ORDER = (cp.CA, cp.ETCD_CA, cp.ETCD, cp.APISERVER, cp.CONTROLLER_MANAGER, cp.SCHEDULER, cp.KWOK,
         cp.ADMIN)  # fmt: skip


@dataclass(frozen=True)
class Request:
    """One rotation, keyed by its generation: `services` empty means all of them. `expires`
    (RFC 3339) is set on a renewal, the rotation the provisioner asks for itself when a leaf
    of these services comes within `pki.RENEW_BEFORE` of that time (`renewal`)."""

    generation: int
    ca: bool = False
    services: tuple[str, ...] = ()
    expires: str = ""

    @property
    def named(self) -> tuple[str, ...]:
        return self.services or SERVICES

    def spec(self) -> dict[str, Any]:
        spec = {"generation": self.generation, "caCertificates": self.ca,
                "services": list(self.services)}  # fmt: skip
        if self.expires:
            spec["expires"] = self.expires
        return spec

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> Request | None:
        given = spec.get(ACTION)
        if not given:
            return None
        return cls(
            generation=int(given.get("generation") or 0),
            ca=bool(given.get("caCertificates")),
            services=tuple(given.get("services") or ()),
            expires=str(given.get("expires") or ""),
        )


def check_input(body: Mapping[str, Any]) -> None:
    """A request names only what a rotation takes: any other field is refused, not ignored."""
    for field in body:
        if field not in INPUT_FIELDS:
            raise unknown(field, INPUT_TYPE)


def parse_services(value: Any) -> tuple[str, ...]:
    """The services a request names, from a list or Rancher's comma-separated text, in the
    canonical order; ValueError saying which are unknown."""
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        given = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, list) and all(isinstance(part, str) for part in value):
        given = [part.strip() for part in value]
    else:
        raise ValueError("services is a list of service names or a comma-separated string")
    unknown = sorted(set(given) - set(SERVICES))
    if unknown:
        raise ValueError(
            f"unknown service {', '.join(unknown)}; the services are {', '.join(SERVICES)}"
        )
    return tuple(service for service in SERVICES if service in given)


def requested(spec: Mapping[str, Any], provisioning: Mapping[str, Any] | None) -> Request | None:
    """The rotation the provisioner still owes: the spec's, unless its generation is recorded."""
    request = Request.from_spec(spec)
    done = int((provisioning or {}).get(STATUS_FIELD) or 0)
    if request is None or request.generation == done:
        return None
    return request


def message(request: Request) -> str:
    """Rancher's answer, and that kube-proxy has nothing to rotate here; for a renewal, which
    certificates and why."""
    if request.expires:
        services = ", ".join(request.named)
        return f"renewing the {services} certificates, which expire on {request.expires}"
    if request.ca:
        said = "rotating CA certificates and all components"
    elif not request.services:
        said = "rotating certificates for all components"
    else:
        said = f"rotating {', '.join(request.services)} certificates"
    if KUBE_PROXY in request.named:
        said += "; kube-proxy has no certificates here: simulated nodes run no kube-proxy"
    return said


def rotates_etcd_ca(request: Request) -> bool:
    return request.ca and ETCD in request.named


def secrets(request: Request) -> tuple[str, ...]:
    """The Secrets the rotation replaces, in the order they are written. A new CA replaces
    every Secret that holds or trusts it, whatever the services named."""
    names: set[str] = set()
    for service in request.named:
        names.update(SERVICE_SECRETS[service])
    if request.ca:
        names.update(CLUSTER_CA_SECRETS)
    if rotates_etcd_ca(request):
        names.update(ETCD_CA_SECRETS)
    return tuple(name for name in ORDER if name in names)


def reissue(
    request: Request,
    cluster: str,
    addresses: cp.Addresses,
    stored: Mapping[str, Mapping[str, bytes]],
    todo: Sequence[str],
) -> dict[str, dict[str, bytes]]:
    """The new data of the Secrets in `todo`: new CAs where a CA is in it, the stored CAs
    otherwise (new ones a pass cut short wrote already), and the service-account key kept."""
    loaded = cp.Authorities.load(stored)
    authorities = cp.Authorities(
        cluster=_new_ca(f"{cluster}-ca") if cp.CA in todo else loaded.cluster,
        etcd=_new_ca(f"{cluster}-etcd-ca") if cp.ETCD_CA in todo else loaded.etcd,
    )
    sa_key = stored[cp.APISERVER]["sa.key"]
    makers = {
        cp.CA: lambda: cp.ca_data(authorities.cluster),
        cp.ETCD_CA: lambda: cp.ca_data(authorities.etcd),
        cp.ETCD: lambda: cp.etcd_data(authorities, addresses),
        cp.APISERVER: lambda: cp.apiserver_data(authorities, addresses, sa_key),
        cp.CONTROLLER_MANAGER: lambda: cp.controller_manager_data(authorities, sa_key),
        cp.SCHEDULER: lambda: cp.scheduler_data(authorities),
        cp.KWOK: lambda: cp.kwok_data(authorities),
        cp.ADMIN: lambda: cp.admin_data(authorities, addresses),
    }
    return {name: makers[name]() for name in todo}


def trusted(current: bytes | None, ca: bytes) -> bytes:
    """What corral's credential trusts while a new CA rolls out: what it trusted, and the new
    CA, each certificate once."""
    certificates = [*_certificates(current or b""), *_certificates(ca)]
    seen: list[bytes] = []
    for certificate in certificates:
        if certificate not in seen:
            seen.append(certificate)
    return b"".join(seen)


def rolled(
    statefulset: Mapping[str, Any] | None, pki_generation: int, image: str | None = None
) -> bool:
    """etcd runs the certificates of `pki_generation` (and `image`, when given): its template
    carries them and every replica is of that template and Ready. (The Deployment's roll is
    `progress`'s.)"""
    if statefulset is None:
        return False
    spec = statefulset.get("spec") or {}
    status = statefulset.get("status") or {}
    template = ((spec.get("template") or {}).get("metadata") or {}).get("annotations") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    wanted = int(spec.get("replicas", 1))
    return (
        template.get(ANNOTATION_PKI_GENERATION) == str(pki_generation)
        and (image is None or [c.get("image") for c in containers] == [image])
        and int(status.get("observedGeneration") or 0)
        >= statefulset["metadata"].get("generation", 0)
        and status.get("currentRevision") == status.get("updateRevision")
        and int(status.get("updatedReplicas") or 0) >= wanted
        and int(status.get("readyReplicas") or 0) >= wanted
    )


def _new_ca(name: str) -> pki.CertificateAuthority:
    return pki.CertificateAuthority.create(name, cp.CA_VALIDITY)


def _certificates(pem: bytes) -> list[bytes]:
    if not pem.strip():
        return []
    return [c.public_bytes(Encoding.PEM) for c in x509.load_pem_x509_certificates(pem)]
