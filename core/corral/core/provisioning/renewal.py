"""The renewal of a hosted control plane's leaf certificates (docs/design/provisioned-clusters.md,
section 2.14): when the first leaf comes within `pki.RENEW_BEFORE` of expiring, the provisioner
asks for a `rotateCertificates` of the services whose leaves are due, as a user would, and the
rotation replaces them and rolls the control plane. The CAs (ten years) are left to a user's
rotation.

Pure: the provisioner reads the expiries (`pki.expiries`), stores the request this returns in
`spec.rotateCertificates`, and asks to be woken when the next leaf falls due.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from corral.core import times
from corral.core.provisioning import pki as cp
from corral.core.provisioning import restore as rs
from corral.core.provisioning import rotation, upgrade

# The longest the provisioner sleeps on a renewal: a year away is asked again each day, so
# that no timer is set at a far date and a jump of the wall clock is caught within a day.
MAX_WAKE = datetime.timedelta(days=1)
# The event on the Cluster once a renewal is done.
EVENT_REASON = "CertificatesRenewed"


def blocked(
    cluster: Mapping[str, Any], expiries: Mapping[str, datetime.datetime], now: datetime.datetime
) -> bool:
    """Something else rolls the control plane, and a renewal waits for it, one operation at a
    time: a restore, a version change, a rotation. A leaf that has expired, though, waits for
    no roll that cannot finish without it: a roll starts a new kube-apiserver with the Secrets
    as they are, and one whose etcd client certificate has expired never gets Ready. So the
    renewal joins a restore or a version change, and widens a rotation that leaves such a
    leaf out (`wanted`); only a rotation that renews it anyway holds it back."""
    spec = cluster["spec"]
    provisioning = (cluster.get("status") or {}).get("provisioning")
    gone = services(expired(expiries, now))
    owed = rotation.requested(spec, provisioning)
    if owed is not None:
        return owed.ca or set(gone) <= set(owed.named)
    rolling = (
        rs.pending(rs.requested(spec), rs.record(provisioning))
        or upgrade.upgrading(spec, provisioning) is not None
    )
    return rolling and not gone


def wanted(
    cluster: Mapping[str, Any], expiries: Mapping[str, datetime.datetime], now: datetime.datetime
) -> rotation.Request | None:
    """The renewal to ask of `cluster` at `now`: the next generation, with the services of a
    rotation it widens; None when nothing is due or it waits (`blocked`)."""
    if blocked(cluster, expiries, now):
        return None
    spec = cluster["spec"]
    provisioning = (cluster.get("status") or {}).get("provisioning")
    owed = rotation.requested(spec, provisioning)
    return request(rotation.Request.from_spec(spec), expiries, now, owed)


def expired(expiries: Mapping[str, datetime.datetime], now: datetime.datetime) -> list[str]:
    """The Secrets whose first leaf has expired at `now`, by name."""
    return sorted(name for name, expiry in expiries.items() if expiry <= now)


def expiry_in(expiries: Mapping[str, datetime.datetime], now: datetime.datetime) -> float | None:
    """Seconds until the next leaf expires, at most MAX_WAKE; None when none is left to
    expire: when a renewal held back may wait no longer."""
    ahead = [expiry for expiry in expiries.values() if expiry > now]
    if not ahead:
        return None
    return min(min(ahead) - now, MAX_WAKE).total_seconds()


def services(due: list[str]) -> tuple[str, ...]:
    """The services whose certificates are in the Secrets `due`, in the canonical order."""
    return tuple(
        service
        for service in rotation.SERVICES
        if set(rotation.SERVICE_SECRETS[service]) & set(due)
    )


def request(
    previous: rotation.Request | None,
    expiries: Mapping[str, datetime.datetime],
    now: datetime.datetime,
    owed: rotation.Request | None = None,
) -> rotation.Request | None:
    """The rotation that renews the leaves due at `now`, as the generation after `previous`
    (the last rotation asked for), and the services of `owed` (a rotation not done yet, which
    it replaces) too; None when none is due."""
    due = cp.due(expiries, now)
    if not due:
        return None
    first = min(expiries[name] for name in due)
    named = set(services(due)) | set(owed.named if owed is not None else ())
    return rotation.Request(
        generation=(previous.generation if previous else 0) + 1,
        services=tuple(service for service in rotation.SERVICES if service in named),
        expires=times.format_time(first),
    )


def wake_in(expiries: Mapping[str, datetime.datetime], now: datetime.datetime) -> float | None:
    """Seconds until the first leaf falls due, at most MAX_WAKE and none below zero; None when
    there is no leaf."""
    if not expiries:
        return None
    due = min(expiries.values()) - cp.RENEW_BEFORE - now
    return min(max(due, datetime.timedelta(0)), MAX_WAKE).total_seconds()


def event_message(request: rotation.Request) -> str:
    return (
        f"renewed the {', '.join(request.named)} certificates (expiring on {request.expires}): "
        "the control plane runs the new ones"
    )
