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
from corral.core.provisioning import rotation, upgrade

# The longest the provisioner sleeps on a renewal: a year away is asked again each day, so
# that no timer is set at a far date and a jump of the wall clock is caught within a day.
MAX_WAKE = datetime.timedelta(days=1)
# The event on the Cluster once a renewal is done.
EVENT_REASON = "CertificatesRenewed"


def held_back(cluster: Mapping[str, Any]) -> bool:
    """A rotation asked for and not done, or a restore, rolls the control plane: a renewal
    waits for it, one operation at a time."""
    provisioning = (cluster.get("status") or {}).get("provisioning")
    return upgrade.running_operation(cluster["spec"], provisioning) is not None


def blocked(
    cluster: Mapping[str, Any], expiries: Mapping[str, datetime.datetime], now: datetime.datetime
) -> bool:
    """Something else rolls the control plane (`held_back`, or a version change): a renewal
    waits for it. A version change holds back no leaf that has expired: its roll cannot finish
    with one (a new kube-apiserver whose etcd client certificate has expired never gets Ready),
    so the renewal joins the version change and one roll carries both."""
    if held_back(cluster):
        return True
    provisioning = (cluster.get("status") or {}).get("provisioning")
    changing = upgrade.upgrading(cluster["spec"], provisioning) is not None
    return changing and not expired(expiries, now)


def expired(expiries: Mapping[str, datetime.datetime], now: datetime.datetime) -> bool:
    return any(expiry <= now for expiry in expiries.values())


def expiry_in(expiries: Mapping[str, datetime.datetime], now: datetime.datetime) -> float | None:
    """Seconds until the first leaf expires, at most MAX_WAKE and none below zero; None when
    there is no leaf: when a renewal held back by a version change may wait no longer."""
    if not expiries:
        return None
    left = min(expiries.values()) - now
    return min(max(left, datetime.timedelta(0)), MAX_WAKE).total_seconds()


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
) -> rotation.Request | None:
    """The rotation that renews the leaves due at `now`, as the generation after `previous`
    (the last rotation asked for); None when none is due."""
    due = cp.due(expiries, now)
    if not due:
        return None
    first = min(expiries[name] for name in due)
    return rotation.Request(
        generation=(previous.generation if previous else 0) + 1,
        services=services(due),
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
