"""A cluster imported before claims existed (no claim, no identity on its Cluster) is claimed
by the operator, as an import claims it now, so importing it again is refused."""

from __future__ import annotations

import base64

from kubernetes import client as k8s

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api

GROUP, VERSION = "management.svc.io", "v3"
CLAIM_TYPE = "management.svc.io/cluster-claim"
IDENTITY = "management.svc.io/kube-system-uid"


def claims_of(core: k8s.CoreV1Api, cluster: str) -> list[k8s.V1Secret]:
    return [
        s
        for s in core.list_namespaced_secret("svc-system").items
        if s.type == CLAIM_TYPE
        and (s.metadata.annotations or {}).get("management.svc.io/cluster-id") == cluster
    ]


def test_a_cluster_imported_before_claims_is_claimed_by_the_operator(
    stack: Environment, api: Api, crs: k8s.CustomObjectsApi, management: k8s.ApiClient
) -> None:
    cluster = stack.cluster_ids[0]
    core = k8s.CoreV1Api(management)
    [claim] = claims_of(core, cluster)
    uid = crs.get_cluster_custom_object(GROUP, VERSION, "clusters", cluster)["metadata"]["uid"]

    # As an older corral left it: the claim first, so that the operator cannot see the
    # Cluster without its identity while the old claim still stands.
    core.delete_namespaced_secret(claim.metadata.name, "svc-system")
    crs.patch_cluster_custom_object(
        GROUP, VERSION, "clusters", cluster, {"metadata": {"annotations": {IDENTITY: None}}}
    )

    def backfilled() -> bool:
        found = claims_of(core, cluster)
        body = crs.get_cluster_custom_object(GROUP, VERSION, "clusters", cluster)
        annotations = body["metadata"].get("annotations") or {}
        return (
            len(found) == 1
            and found[0].metadata.name == claim.metadata.name
            and [(o.kind, o.name, o.uid) for o in found[0].metadata.owner_references or []]
            == [("Cluster", cluster, uid)]
            and annotations.get(IDENTITY) == claim.metadata.annotations[IDENTITY]
        )

    wait_for("the operator to claim the cluster again", backfilled, 60)

    kubeconfig = base64.b64encode(stack.downstreams[0].kubeconfig_path.read_bytes()).decode()
    body = {"type": "cluster", "name": "again", "importedConfig": {"kubeConfig": kubeconfig}}
    again = api.post("/v3/clusters", body)
    assert (again.status, again.body["code"]) == (409, "AlreadyExists"), again.body
    assert cluster in again.body["message"]
