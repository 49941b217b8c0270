"""The autoscaler of node pools with bounds, on the main kwok stack's imported cluster: pods
that do not fit grow their pool within its max, pods no pool fits grow none, a pool without
bounds is never touched, and once the workload is gone the pool goes back to its min. The
bounds' CEL rules hold for direct writes and for `/v3` PUTs (v3 pools do not show the bounds,
as Rancher's v3 pools have none)."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from corral.core import settings
from corral.core.api import names
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api

GROUP, VERSION = names.GROUP, names.VERSION
TIMEOUT = 90
# Low enough for a test, high enough that new nodes get their pods before they could look
# unneeded (the delay after a scale-up covers that).
KNOBS = {settings.SCALE_DOWN_UNNEEDED_SETTING: "4",
         settings.SCALE_DOWN_DELAY_AFTER_ADD_SETTING: "10"}  # fmt: skip


@pytest.fixture(scope="module")
def cluster(stack: Environment) -> str:
    return stack.cluster_ids[0]


@pytest.fixture
def knobs(api: Api) -> Iterator[None]:
    """The autoscaler's timers lowered through the settings API, restored afterwards."""
    for name, value in KNOBS.items():
        changed = api.put(f"/v3/settings/{name}", {"value": value})
        assert changed.status == 200, changed.body
    yield
    for name in KNOBS:
        assert api.put(f"/v3/settings/{name}", {"value": ""}).status == 200


@pytest.fixture
def template(api: Api) -> Iterator[str]:
    made = api.post("/v3/nodetemplates",
                    {"name": "small", "kwokConfig": {"cpu": "2", "memory": "4Gi"}})  # fmt: skip
    assert made.status == 201, made.body
    yield made.body["id"]
    wait_for("template free", lambda: api.delete(f"/v3/nodetemplates/{made.body['id']}")
             .status in (204, 404), TIMEOUT)  # fmt: skip


@pytest.fixture
def pools(api: Api) -> Iterator[Callable[..., dict[str, Any]]]:
    created: list[str] = []

    def make(**fields: Any) -> dict[str, Any]:
        response = api.post("/v3/nodepools", {"type": "nodePool", **fields})
        assert response.status == 201, response.body
        created.append(response.body["id"])
        return dict(response.body)

    yield make
    for pool_id in created:
        assert api.delete(f"/v3/nodepools/{pool_id}").status in (204, 404)
    for pool_id in created:
        wait_for("pool gone", lambda p=pool_id: api.get(f"/v3/nodepools/{p}").status == 404,
                 TIMEOUT)  # fmt: skip


@pytest.fixture
def namespace(downstream: k8s.ApiClient) -> Iterator[str]:
    core = k8s.CoreV1Api(downstream)
    name = f"autoscale-{secrets.token_hex(3)}"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)


def stored(crs: k8s.CustomObjectsApi, pid: str) -> dict[str, Any]:
    cluster, name = pid.split(":")
    found: dict[str, Any] = crs.get_namespaced_custom_object(GROUP, VERSION, cluster,
                                                             "nodepools", name)  # fmt: skip
    return found


def set_bounds(crs: k8s.CustomObjectsApi, pid: str, **spec: Any) -> None:
    """As kubectl (or the /v1 machine pools) would write them."""
    cluster, name = pid.split(":")
    crs.patch_namespaced_custom_object(GROUP, VERSION, cluster, "nodepools", name, {"spec": spec})


def quantity(crs: k8s.CustomObjectsApi, pid: str) -> int:
    return int(stored(crs, pid)["spec"]["quantity"])


def pool_nodes(core: k8s.CoreV1Api, tag: str) -> set[str]:
    return {n.metadata.name for n in core.list_node(label_selector=f"autoscale={tag}").items}


def events(core: k8s.CoreV1Api, namespace: str, name: str, reason: str) -> list[str]:
    found = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
    return [e.message for e in found.items if e.reason == reason]


def pod_body(name: str, cpu: str, selector: dict[str, str]) -> k8s.V1Pod:
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name, labels={"app": name}),
        spec=k8s.V1PodSpec(node_selector=selector, containers=[
            k8s.V1Container(name="c", image="busybox",
                            resources=k8s.V1ResourceRequirements(requests={"cpu": cpu}))]),
    )  # fmt: skip


def deployment(name: str, replicas: int, cpu: str, selector: dict[str, str]) -> k8s.V1Deployment:
    template = pod_body(name, cpu, selector)
    return k8s.V1Deployment(
        metadata=k8s.V1ObjectMeta(name=name),
        spec=k8s.V1DeploymentSpec(
            replicas=replicas,
            selector=k8s.V1LabelSelector(match_labels={"app": name}),
            template=k8s.V1PodTemplateSpec(metadata=template.metadata, spec=template.spec),
        ),
    )


def spread(body: k8s.V1Deployment) -> k8s.V1Deployment:
    """Its pods rather on different nodes: a preference the scheduler weighs and the
    autoscaler's simulation leaves out."""
    app = body.metadata.name
    term = k8s.V1PodAffinityTerm(
        topology_key="kubernetes.io/hostname",
        label_selector=k8s.V1LabelSelector(match_labels={"app": app}),
    )
    body.spec.template.spec.affinity = k8s.V1Affinity(
        pod_anti_affinity=k8s.V1PodAntiAffinity(
            preferred_during_scheduling_ignored_during_execution=[
                k8s.V1WeightedPodAffinityTerm(weight=100, pod_affinity_term=term)
            ]
        )
    )
    return body


def placed(core: k8s.CoreV1Api, namespace: str, app: str) -> dict[str, str | None]:
    """The app's pods (not going) and the node of each that runs."""
    pods = core.list_namespaced_pod(namespace, label_selector=f"app={app}").items
    return {
        p.metadata.name: p.spec.node_name if p.status.phase == "Running" else None
        for p in pods if not p.metadata.deletion_timestamp
    }  # fmt: skip


def test_pods_that_do_not_fit_grow_the_pool_within_max_and_it_shrinks_back_to_min(
    api: Api, cluster: str, template: str, knobs: None, namespace: str,
    downstream: k8s.ApiClient, management: k8s.ApiClient, crs: k8s.CustomObjectsApi,
    pools: Callable[..., dict[str, Any]],
) -> None:  # fmt: skip
    core, apps = k8s.CoreV1Api(downstream), k8s.AppsV1Api(downstream)
    events_of_pools = k8s.CoreV1Api(management)
    tag = secrets.token_hex(3)
    prefix = f"as{tag}-"
    labels = {"autoscale": tag}
    pid = pools(clusterId=cluster, hostnamePrefix=prefix, quantity=1, worker=True,
                nodeTemplateName=template, nodeLabels=labels)["id"]  # fmt: skip
    set_bounds(crs, pid, autoscalingMinSize=1, autoscalingMaxSize=3)
    # Fits the same pods, has no bounds: the autoscaler never touches it.
    unbounded = pools(clusterId=cluster, hostnamePrefix=f"un{tag}-", quantity=0,
                      nodeTemplateName=template, nodeLabels=labels)["id"]  # fmt: skip
    wait_for("the pool's first node", lambda: pool_nodes(core, tag) == {f"{prefix}1"}, TIMEOUT)

    # Pods no pool can take: too big for its machines, or a label no pool has.
    for name, cpu, selector in (("huge", "64", labels), ("nowhere", "100m", {"autoscale": "none"})):
        core.create_namespaced_pod(namespace, pod_body(name, cpu, selector))
        wait_for(f"{name}: not triggering a scale-up",
                 lambda n=name: events(core, namespace, n, "NotTriggerScaleUp"),
                 TIMEOUT)  # fmt: skip
        assert quantity(crs, pid) == 1
    assert "fits no node pool" in events(core, namespace, "huge", "NotTriggerScaleUp")[0]

    # 4 pods of 1500m on 2-cpu machines: one machine each, and the pool stops at 3.
    apps.create_namespaced_deployment(namespace, deployment("web", 4, "1500m", labels))

    def three_running() -> bool:
        nodes = [n for n in placed(core, namespace, "web").values() if n]
        return len(nodes) == 3 and set(nodes) == {f"{prefix}{i}" for i in (1, 2, 3)}

    wait_for("3 web pods running on 3 machines of the pool", three_running, TIMEOUT)
    assert quantity(crs, pid) == 3
    waiting = [p for p, n in placed(core, namespace, "web").items() if n is None]
    assert len(waiting) == 1
    said = wait_for("the 4th pod told why it waits",
                    lambda: events(core, namespace, waiting[0], "NotTriggerScaleUp"),
                    TIMEOUT)  # fmt: skip
    assert "maximum size" in said[0]
    assert quantity(crs, pid) == 3
    assert (quantity(crs, unbounded), api.get(f"/v3/nodepools/{unbounded}").body["requested"]) == (
        0, 0,
    )  # fmt: skip
    scaled = events(events_of_pools, cluster, pid.split(":")[1], "ScaledUpGroup")
    assert scaled and "max 3" in scaled[0], scaled
    assert any(events(core, namespace, p, "TriggeredScaleUp") for p in placed(core, namespace,
                                                                               "web"))  # fmt: skip
    assert stored(crs, pid)["metadata"]["managedFields"]
    assert any(
        f["manager"] == "corral-autoscaler" and "f:quantity" in f["fieldsV1"].get("f:spec", {})
        for f in stored(crs, pid)["metadata"]["managedFields"]
    )

    # The workload gone, the pool goes back to its min, removing the highest machines.
    apps.delete_namespaced_deployment("web", namespace)
    wait_for("back to 1 machine", lambda: quantity(crs, pid) == 1
             and pool_nodes(core, tag) == {f"{prefix}1"}, TIMEOUT)  # fmt: skip
    wait_for("the pool shows 1", lambda: api.get(f"/v3/nodepools/{pid}").body["requested"] == 1,
             TIMEOUT)  # fmt: skip
    down = events(events_of_pools, cluster, pid.split(":")[1], "ScaleDown")
    assert down and "(min 1)" in down[-1], down

    def machines() -> list[str]:
        records = api.get(f"/v3/clusters/{cluster}/nodes").body["data"]
        return [r["requestedHostname"] for r in records if r["spec"].get("nodePoolName") == pid]

    wait_for("1 machine record", lambda: machines() == [f"{prefix}1"], TIMEOUT)
    # Still pending, still growing nothing; the pool without bounds untouched.
    assert placed(core, namespace, "huge") == {"huge": None}
    assert quantity(crs, pid) == 1 and quantity(crs, unbounded) == 0


def test_a_node_whose_pods_fit_elsewhere_is_drained_and_removed(
    api: Api, cluster: str, template: str, knobs: None, namespace: str,
    downstream: k8s.ApiClient, management: k8s.ApiClient, crs: k8s.CustomObjectsApi,
    pools: Callable[..., dict[str, Any]],
) -> None:  # fmt: skip
    core, apps = k8s.CoreV1Api(downstream), k8s.AppsV1Api(downstream)
    tag = secrets.token_hex(3)
    prefix = f"dr{tag}-"
    labels = {"autoscale": tag}
    pid = pools(clusterId=cluster, hostnamePrefix=prefix, quantity=1,
                nodeTemplateName=template, nodeLabels=labels)["id"]  # fmt: skip
    set_bounds(crs, pid, autoscalingMinSize=1, autoscalingMaxSize=2)
    first, second = f"{prefix}1", f"{prefix}2"
    wait_for("the pool's first node", lambda: pool_nodes(core, tag) == {first}, TIMEOUT)
    # Two big pods take a machine each; two small ones spread over both.
    apps.create_namespaced_deployment(namespace, deployment("big", 2, "1500m", labels))

    def running_on(app: str) -> list[str]:
        return sorted(n or "" for n in placed(core, namespace, app).values())

    wait_for("big on 2 machines", lambda: running_on("big") == [first, second], TIMEOUT)
    apps.create_namespaced_deployment(namespace, spread(deployment("small", 2, "400m", labels)))
    wait_for("small on both", lambda: running_on("small") == [first, second], TIMEOUT)
    before = set(placed(core, namespace, "small"))

    # Without the big pods both machines are 20 % used: the second one's pod moves to the
    # first, which stays, the pool's min.
    apps.delete_namespaced_deployment("big", namespace)
    wait_for("down to the first machine, both small pods on it",
             lambda: quantity(crs, pid) == 1 and pool_nodes(core, tag) == {first}
             and running_on("small") == [first, first],
             TIMEOUT)  # fmt: skip
    after = set(placed(core, namespace, "small"))
    assert len(before - after) == 1  # the one evicted from the second machine, made again
    down = events(k8s.CoreV1Api(management), cluster, pid.split(":")[1], "ScaleDown")
    assert any(f"{second} (its pods fit elsewhere)" in m for m in down), down


def test_a_mark_without_a_lower_quantity_is_taken_off_and_the_machine_stays(
    cluster: str, template: str, downstream: k8s.ApiClient, crs: k8s.CustomObjectsApi,
    pools: Callable[..., dict[str, Any]],
) -> None:  # fmt: skip
    """What an operator stopped between marking a machine and lowering the quantity leaves."""
    core = k8s.CoreV1Api(downstream)
    tag = secrets.token_hex(3)
    labels = {"autoscale": tag}
    pid = pools(clusterId=cluster, hostnamePrefix=f"mk{tag}-", quantity=1,
                nodeTemplateName=template, nodeLabels=labels)["id"]  # fmt: skip
    set_bounds(crs, pid, autoscalingMinSize=1, autoscalingMaxSize=2)
    wait_for("the pool's node", lambda: pool_nodes(core, tag) == {f"mk{tag}-1"}, TIMEOUT)
    records = [r for r in crs.list_namespaced_custom_object(GROUP, VERSION, cluster,
                                                            "nodes")["items"]
               if r["spec"].get("nodePoolName") == pid]  # fmt: skip
    record = records[0]["metadata"]["name"]
    mark = {"metadata": {"annotations": {names.ANNOTATION_DELETE_MACHINE: "2026-01-01T00:00:00Z"}}}
    crs.patch_namespaced_custom_object(GROUP, VERSION, cluster, "nodes", record, mark)

    def unmarked() -> bool:
        found = crs.get_namespaced_custom_object(GROUP, VERSION, cluster, "nodes", record)
        return names.ANNOTATION_DELETE_MACHINE not in (found["metadata"].get("annotations") or {})

    wait_for("the mark taken off", unmarked, TIMEOUT)
    assert pool_nodes(core, tag) == {f"mk{tag}-1"} and quantity(crs, pid) == 1


def refused_by_kube(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(ApiException) as caught:
        call()
    assert caught.value.status == 422 and message in caught.value.body, caught.value.body


def test_the_bounds_rules_hold_for_every_writer(
    api: Api, cluster: str, template: str, crs: k8s.CustomObjectsApi,
    pools: Callable[..., dict[str, Any]],
) -> None:  # fmt: skip
    tag = secrets.token_hex(3)
    pid = pools(clusterId=cluster, hostnamePrefix=f"cel{tag}-", quantity=0,
                nodeTemplateName=template)["id"]  # fmt: skip
    for spec, message in (
        ({"autoscalingMinSize": 0}, "set together"),
        ({"autoscalingMinSize": 3, "autoscalingMaxSize": 2}, "must not exceed"),
        ({"autoscalingMinSize": 1, "autoscalingMaxSize": 2}, "quantity must be within"),
        ({"autoscalingMinSize": 0, "autoscalingMaxSize": 1001}, "1000"),
    ):
        refused_by_kube(lambda s=spec: set_bounds(crs, pid, **s), message)  # type: ignore[misc]
    assert not {"autoscalingMinSize", "autoscalingMaxSize"} & set(stored(crs, pid)["spec"])

    set_bounds(crs, pid, autoscalingMinSize=0, autoscalingMaxSize=2)
    # /v3 shows no bounds (Rancher's v3 pools have none) and keeps them through a PUT ...
    shown = api.get(f"/v3/nodepools/{pid}").body
    assert "autoscalingMinSize" not in shown and "autoscalingMaxSize" not in shown
    assert api.put(f"/v3/nodepools/{pid}", {"nodeLabels": {"a": "b"}}).status == 200
    assert stored(crs, pid)["spec"]["autoscalingMaxSize"] == 2
    # ... and a quantity outside them is refused with the API's error body, nothing changed.
    response = api.put(f"/v3/nodepools/{pid}", {"quantity": 3})
    assert response.status == 422, response.body
    assert response.body["type"] == "error" and response.body["code"] == "InvalidFormat"
    assert response.body["fieldName"] == "quantity"
    assert "quantity must be within" in response.body["message"]
    assert quantity(crs, pid) == 0

    # An etcd or control-plane pool keeps at least one machine.
    etcd = pools(clusterId=cluster, hostnamePrefix=f"etcd{tag}-", quantity=0, etcd=True,
                 nodeTemplateName=template)["id"]  # fmt: skip
    refused_by_kube(lambda: set_bounds(crs, etcd, autoscalingMinSize=0, autoscalingMaxSize=1),
                    "at least 1")  # fmt: skip
