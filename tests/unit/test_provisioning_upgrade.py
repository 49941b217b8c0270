"""A kubernetesVersion change of a provisioned cluster: what a PUT may ask for, the order of
the roll (etcd first when its image changes), and the progress `Updated` shows."""

from __future__ import annotations

from typing import Any

import pytest

from corral.core.api import condition_types as ct
from corral.core.clusters import observe
from corral.core.errors import Conflict, Invalid
from corral.core.provisioning import catalog, manifests, progress, rotation, upgrade
from corral.core.provisioning import pki as cp
from corral.core.provisioning.flavours import K3S, RKE2

VERSIONS = ("v1.34.2", "v1.35.8", "v1.35.9", "v1.36.3", "v1.37.0")
CATALOG = catalog.parse(
    catalog.document(
        {
            version: catalog.binaries({name: f"x/{name}:{version}" for name in catalog.REQUIRED})
            for version in VERSIONS
        }
    )
)


def spec(version: str = "v1.35.8", driver: str = "rke2", **more: Any) -> dict[str, Any]:
    return {"driver": driver, "kubernetesVersion": version, **more}


def admit(given: Any, applied: str = "", **more: Any) -> str | None:
    provisioning = {"appliedVersion": applied} if applied else None
    return upgrade.admit(RKE2, spec(**more), provisioning, given, CATALOG)


@pytest.mark.parametrize("given", ["v1.35.8", "1.35.8", "v1.35.8+rke2r1", " v1.35.8 "])
def test_putting_back_the_same_version_is_no_change(given: str) -> None:
    assert admit(given, applied="v1.35.8") is None


@pytest.mark.parametrize(
    ("given", "wanted"),
    [("v1.36.3", "v1.36.3"), ("v1.36.3+rke2r1", "v1.36.3"), ("1.35.9", "v1.35.9")],
)
def test_a_patch_or_the_next_minor_in_the_catalog_is_admitted(given: str, wanted: str) -> None:
    assert admit(given, applied="v1.35.8") == wanted


def test_a_k3s_cluster_takes_its_own_suffix() -> None:
    assert upgrade.admit(K3S, spec(driver="k3s"), None, "v1.36.3+k3s1", CATALOG) == "v1.36.3"


@pytest.mark.parametrize(
    ("given", "code", "said"),
    [
        ("v1.34.2", "InvalidOption", "cannot go down from v1.35.8 to v1.34.2"),
        (
            "v1.37.0",
            "InvalidOption",
            "one minor version at a time: from v1.35.8 to at most v1.36.x",
        ),
        ("v1.36.9", "InvalidOption", "versions: v1.34.2, v1.35.8, v1.35.9, v1.36.3, v1.37.0"),
        ("v1.36.3+k3s1", "InvalidFormat", "not a rke2 version"),
        ("latest", "InvalidFormat", "must look like v1.36.3"),
        (136, "InvalidFormat", "must be a version"),
    ],
)
def test_a_downgrade_a_skipped_minor_or_an_unknown_version_is_422(
    given: Any, code: str, said: str
) -> None:
    with pytest.raises(Invalid) as raised:
        admit(given, applied="v1.35.8")
    assert (raised.value.field, raised.value.code or "InvalidFormat") == ("kubernetesVersion", code)
    assert said in raised.value.message


def test_a_new_major_is_refused() -> None:
    two = catalog.parse(
        catalog.document(
            {
                v: catalog.binaries({name: f"x/{name}:{v}" for name in catalog.REQUIRED})
                for v in ("v1.36.3", "v2.0.0")
            }
        )
    )
    with pytest.raises(Invalid, match="one minor version at a time"):
        upgrade.admit(RKE2, spec("v1.36.3"), None, "v2.0.0", two)


def test_the_next_minor_counts_from_what_runs_while_a_roll_is_under_way() -> None:
    # Asked for 1.36 while 1.35 still runs: 1.37 would put two minors between the pods.
    with pytest.raises(Invalid, match=r"from v1\.35\.8 to at most v1\.36\.x"):
        admit("v1.37.0", applied="v1.35.8", version="v1.36.3")
    # ... and going back below what the spec asks is a downgrade.
    with pytest.raises(Invalid, match="cannot go down"):
        admit("v1.35.9", applied="v1.35.8", version="v1.36.3")
    assert admit("v1.37.0", applied="v1.36.3", version="v1.36.3") == "v1.37.0"


def test_no_change_while_a_restore_or_a_rotation_runs() -> None:
    restoring = {"etcdSnapshotRestore": {"name": "b", "generation": 1, "restoreRKEConfig": ""}}
    with pytest.raises(Conflict, match="while a restore from an etcd backup runs") as raised:
        admit("v1.36.3", applied="v1.35.8", **restoring)
    assert (raised.value.field, raised.value.code) == ("kubernetesVersion", "Conflict")
    rotating = {rotation.ACTION: {"generation": 2, "caCertificates": False, "services": []}}
    with pytest.raises(Conflict, match="while a certificate rotation runs"):
        admit("v1.36.3", applied="v1.35.8", **rotating)
    # Done ones are history: the restore's generation and the rotation's are recorded.
    done = {"restoreGeneration": 1, rotation.STATUS_FIELD: 2, "appliedVersion": "v1.35.8"}
    assert upgrade.admit(RKE2, spec(**restoring, **rotating), done, "v1.36.3", CATALOG) == (
        "v1.36.3"
    )
    # Putting back the same version is no change, whatever runs.
    assert admit("v1.35.8", applied="v1.35.8", **restoring) is None


def test_a_cluster_applied_with_kubectl_has_its_configurations_version() -> None:
    applied = {"driver": "k3s", "k3sConfig": {"kubernetesVersion": "v1.35.8+k3s1"}}
    assert upgrade.current(applied) == "v1.35.8"


def test_a_roll_is_under_way_while_the_applied_version_is_not_the_specs() -> None:
    assert upgrade.upgrading(spec("v1.36.3"), {"appliedVersion": "v1.35.8"}) == "v1.35.8"
    assert upgrade.upgrading(spec("v1.36.3"), {"appliedVersion": "v1.36.3"}) is None
    # Never run yet: the control plane comes up at the spec's version, nothing rolls.
    assert upgrade.upgrading(spec("v1.36.3"), {"step": "WaitingForControlPlane"}) is None
    assert upgrade.upgrading(spec("v1.36.3"), None) is None


# -- the order of the roll ----------------------------------------------------------------------

ADDRESSES = cp.Addresses(namespace="c-m-abc", apiserver_ip="10.0.0.40", etcd_ip="10.0.0.41")


def release(version: str, etcd: str) -> catalog.Release:
    images = {name: f"x/{name}:{version}" for name in catalog.REQUIRED} | {catalog.ETCD: etcd}
    return catalog.parse(catalog.document({version: catalog.binaries(images)})).release(version)


def test_etcd_rolls_first_only_when_its_image_changes() -> None:
    old, new = release("v1.35.8", "x/etcd:3.6.5"), release("v1.36.3", "x/etcd:3.6.8")
    assert upgrade.etcd_changes(old, new)
    assert not upgrade.etcd_changes(release("v1.35.8", "x/etcd:3.6.8"), new)
    # The old release gone from the catalog: nothing to wait for, all rolls at once.
    assert not upgrade.etcd_changes(None, new)


def test_while_etcd_rolls_first_the_deployment_keeps_the_old_release() -> None:
    old, new = release("v1.35.8", "x/etcd:3.6.5"), release("v1.36.3", "x/etcd:3.6.8")
    plan = manifests.Plan("c-m-abc", "rke2", new, ADDRESSES, pki_generation=1, previous=old)
    assert manifests.etcd(plan)["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "x/etcd:3.6.8"
    )
    pod = manifests.control_plane(plan)["spec"]["template"]["spec"]
    images = {c["name"]: c["image"] for c in [*pod["initContainers"], *pod["containers"]]}
    kept = (catalog.APISERVER, catalog.CONTROLLER_MANAGER, catalog.SCHEDULER)
    assert images == {name: f"x/{name}:v1.35.8" for name in kept}
    rolled = manifests.control_plane(manifests.Plan("c-m-abc", "rke2", new, ADDRESSES, 1))
    assert rolled["spec"]["template"]["spec"]["initContainers"][0]["image"] == (
        "x/kube-apiserver:v1.36.3"
    )
    # Surge 1, none unavailable: the new pod is Ready on the same etcd before the old goes.
    assert rolled["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}


def etcd_statefulset(image: str) -> dict[str, Any]:
    return {
        "metadata": {"generation": 3},
        "spec": {
            "replicas": 1,
            "template": {
                "metadata": {"annotations": {manifests.ANNOTATION_PKI_GENERATION: "1"}},
                "spec": {"containers": [{"name": "etcd", "image": image}]},
            },
        },
        "status": {
            "observedGeneration": 3,
            "currentRevision": "r2",
            "updateRevision": "r2",
            "updatedReplicas": 1,
            "readyReplicas": 1,
        },
    }


def test_etcd_has_rolled_to_an_image_once_its_template_runs_it() -> None:
    assert rotation.rolled(etcd_statefulset("x/etcd:3.6.8"), 1, "x/etcd:3.6.8")
    assert not rotation.rolled(etcd_statefulset("x/etcd:3.6.5"), 1, "x/etcd:3.6.8")
    assert rotation.rolled(etcd_statefulset("x/etcd:3.6.5"), 1)


# -- progress -----------------------------------------------------------------------------------


def seen(ready: bool, wanted: int = 1, updated: int = 1, replicas: int = 1,
         problems: tuple[str, ...] = ()) -> progress.Seen:  # fmt: skip
    return progress.Seen(True, ready, "", wanted, updated, replicas, problems)


def test_the_progress_of_a_roll_until_version_reports_the_target() -> None:
    def waiting(**given: Any) -> str | None:
        return upgrade.waiting("v1.35.8", "v1.36.3", **{"etcd_rolled": True, "served": None}
                               | given)  # fmt: skip

    assert waiting(etcd_rolled=False, seen=progress.Seen(False, True, "waiting for etcd")) == (
        "v1.35.8 → v1.36.3: etcd first: waiting for etcd"
    )
    assert waiting(seen=seen(False, updated=0, replicas=2)) == (
        "v1.35.8 → v1.36.3: kube-apiserver, kube-controller-manager and kube-scheduler: "
        "0/1 updated, 2 old pods serving until the new one is Ready"
    )
    stuck = seen(False, updated=1, replicas=2, problems=("container kube-apiserver of pod p is "
                                                         "CrashLoopBackOff",))  # fmt: skip
    assert waiting(seen=stuck) == (
        "v1.35.8 → v1.36.3: kube-apiserver, kube-controller-manager and kube-scheduler: 1/1 "
        "updated, 1 old pod serving until the new one is Ready: container kube-apiserver of pod "
        "p is CrashLoopBackOff"
    )
    assert waiting(seen=seen(True), served="v1.35.8") == (
        "v1.35.8 → v1.36.3: kube-apiserver, kube-controller-manager and kube-scheduler rolled, "
        "waiting for /version to report v1.36.3 (it reports v1.35.8)"
    )
    assert "(it did not answer)" in (waiting(seen=seen(True)) or "")
    assert waiting(seen=seen(True), served="v1.36.3") is None


def test_the_deployments_counts_are_seen() -> None:
    deployment = {
        "metadata": {"generation": 4},
        "spec": {"replicas": 1},
        "status": {
            "observedGeneration": 4,
            "updatedReplicas": 1,
            "replicas": 2,
            "availableReplicas": 1,
        },
    }
    found = progress.control_plane({"status": {"readyReplicas": 1}}, deployment, [], [])
    assert (found.control_plane_ready, found.wanted, found.updated, found.replicas) == (
        False, 1, 1, 2,
    )  # fmt: skip


def test_updated_is_false_upgrading_with_the_progress_then_true() -> None:
    probe = observe.Probe(reachable=True, ready=True)
    provisioning = {"step": upgrade.STEP, "message": "v1.35.8 → v1.36.3: etcd first"}
    conditions = observe.cluster_conditions("rke2", True, probe, [], provisioning=provisioning)
    updated = next(c for c in conditions if c.type == ct.UPDATED)
    assert (updated.status, updated.reason, updated.message) == (
        "False", "Upgrading", "v1.35.8 → v1.36.3: etcd first",
    )  # fmt: skip
    done = observe.cluster_conditions("rke2", True, probe, [], provisioning={"step": "Provisioned"})
    assert next(c for c in done if c.type == ct.UPDATED).status == "True"
