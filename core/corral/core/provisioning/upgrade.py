"""A `kubernetesVersion` change of a provisioned cluster (docs/provisioning.md, "Changing the
Kubernetes version"): which changes a PUT may ask for, and how far the rolling replacement of
the control plane has come.

Pure: the API server admits the change into `spec.kubernetesVersion`; the provisioner rolls
etcd first when its image changes, then the control-plane Deployment, and records the version
in `status.provisioning.appliedVersion` once `/version` reports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.core.api import condition_types as ct
from corral.core.errors import Conflict, Invalid
from corral.core.provisioning import admission, catalog, rotation
from corral.core.provisioning import restore as rs
from corral.core.provisioning.flavours import Flavour
from corral.core.provisioning.progress import Seen

STEP = ct.REASON_UPGRADING
APPLIED_FIELD = "appliedVersion"
FIELD = "kubernetesVersion"
CONTROL_PLANE = "kube-apiserver, kube-controller-manager and kube-scheduler"
# What `admit` reads of a Cluster: the spec (its generation moves with any change of it) and
# what the provisioner records of the control plane. A version change is written on condition
# that these are still as read, and other status writes do not stand in its way.
READS = (
    ("metadata", "generation"),
    ("status", "provisioning", APPLIED_FIELD),
    ("status", "provisioning", rs.GENERATION_FIELD),
    ("status", "provisioning", rotation.STATUS_FIELD),
)


def current(spec: Mapping[str, Any]) -> str:
    """The catalog key of the version the spec asks for. The API stores it at the top; a
    Cluster applied with kubectl may give only its configuration's."""
    config = spec.get(f"{spec['driver']}Config") or {}
    given = spec.get(FIELD) or config.get(FIELD) or ""
    return catalog.normalise(given, spec["driver"])


def applied(provisioning: Mapping[str, Any] | None) -> str:
    """The version the control plane was last seen to run; empty before it first ran."""
    return str((provisioning or {}).get(APPLIED_FIELD) or "")


def admit(
    flavour: Flavour,
    spec: Mapping[str, Any],
    provisioning: Mapping[str, Any] | None,
    given: Any,
    versions: catalog.Catalog,
) -> str | None:
    """The catalog key a PUT's `kubernetesVersion` moves a cluster of `flavour` to, or None
    when it names the version the cluster has (a client may PUT back what it read).

    Invalid (422) unless the version is in the catalog, not older than the spec's, and at most
    one minor above what runs: the upstream skew policy lets one minor's components talk to the
    next's, not two apart. Conflict (409) while a restore or a certificate rotation runs: each
    rolls the control plane too, and two rolls at once would show neither's progress."""
    wanted = admission.catalog_key(flavour, given, FIELD)
    now = current(spec)
    if wanted == now:
        return None
    versions.release(wanted, FIELD)
    running = applied(provisioning) or now
    lowest = min(now, running, key=catalog.version_key)
    if catalog.version_key(wanted) < catalog.version_key(now):
        raise Invalid(
            f"kubernetesVersion cannot go down from {now} to {wanted}: a control plane is only "
            "replaced by a newer one (etcd's data may already be in the newer format)",
            FIELD,
            code="InvalidOption",
        )
    major, minor, _ = catalog.version_key(wanted)
    low_major, low_minor, _ = catalog.version_key(lowest)
    if major != low_major or minor > low_minor + 1:
        raise Invalid(
            f"kubernetesVersion can go up one minor version at a time: from {lowest} to at "
            f"most v{low_major}.{low_minor + 1}.x, not {wanted}",
            FIELD,
            code="InvalidOption",
        )
    if (busy := running_operation(spec, provisioning)) is not None:
        raise Conflict(
            f"kubernetesVersion cannot change while {busy} runs; try again once the cluster "
            "is Updated",
            FIELD,
            code="Conflict",
        )
    return wanted


def running_operation(
    spec: Mapping[str, Any], provisioning: Mapping[str, Any] | None
) -> str | None:
    """What rolls the control plane now, other than a version change: None when nothing."""
    if rs.pending(rs.requested(spec), rs.record(provisioning)):
        return "a restore from an etcd backup"
    if rotation.requested(spec, provisioning) is not None:
        return "a certificate rotation"
    return None


def upgrading(spec: Mapping[str, Any], provisioning: Mapping[str, Any] | None) -> str | None:
    """The version the control plane is being rolled from, or None when it runs the spec's
    (or has never run: a control plane still coming up starts at the spec's version)."""
    running = applied(provisioning)
    if not running or running == current(spec):
        return None
    return running


def etcd_changes(previous: catalog.Release | None, target: catalog.Release) -> bool:
    """The target's etcd differs from what runs, so etcd rolls before the control plane. A
    release gone from the catalog is not known: everything rolls at once."""
    return (
        previous is not None
        and previous.component(catalog.ETCD).image != target.component(catalog.ETCD).image
    )


def waiting(
    source: str,
    target: str,
    *,
    etcd_rolled: bool,
    seen: Seen,
    served: str | None,
) -> str | None:
    """What the roll from `source` to `target` waits for, or None once it is over: etcd on its
    new image (`etcd_rolled` is True when it has none), every control-plane pod of the new
    template and Ready with the old ones gone, and `/version` reporting the target (`served`:
    what it reports, None when it did not answer)."""
    head = f"{source} → {target}"
    if not etcd_rolled:
        return f"{head}: etcd first: {seen.message or 'waiting for etcd to roll'}"
    if not seen.control_plane_ready:
        done = f"{CONTROL_PLANE}: {min(seen.updated, seen.wanted)}/{seen.wanted} updated"
        old = max(seen.replicas - seen.updated, 0)
        if old:
            done += f", {old} old pod{'s' if old != 1 else ''} serving until the new one is Ready"
        if seen.problems:
            done += ": " + "; ".join(seen.problems)
        return f"{head}: {done}"
    if served != target:
        said = f" (it reports {served})" if served else " (it did not answer)"
        return f"{head}: {CONTROL_PLANE} rolled, waiting for /version to report {target}{said}"
    return None
