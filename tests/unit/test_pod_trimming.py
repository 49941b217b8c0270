"""What corral keeps of a pod does not grow with what the user put into it."""

from __future__ import annotations

import json
from typing import Any

from corral.core.clusters import observe
from corral.core.kube.informer import Informer
from corral.core.nodepools import autoscaling
from corral.core.workloads import pods, usage


def big_pod(env: int = 256) -> dict[str, Any]:
    container = {
        "name": "web",
        "image": "nginx",
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
        "ports": [{"containerPort": 80}],
        "env": [{"name": f"E{i}", "value": "x" * 512} for i in range(env)],
        "args": ["y" * 1024] * 64,
    }
    return {
        "metadata": {
            "name": "web-1", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
            "labels": {"app": "web", "pod-template-hash": "abc"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-abc", "controller": True,
                                 "apiVersion": "apps/v1", "uid": "r1", "blockOwnerDeletion": True}],
            "managedFields": [{"manager": "kcm", "fieldsV1": {"f:spec": {}}}] * 20,
        },
        "spec": {
            "nodeName": "n1",
            "containers": [container] * 4,
            "initContainers": [{**container, "restartPolicy": "Always"}],
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "volumes": [{"name": "v", "emptyDir": {}}],
        },
        "status": {
            "phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.1.0.1",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "web", "ready": True, "restartCount": 2,
                                   "state": {"running": {}}, "imageID": "sha256:" + "0" * 64,
                                   "lastState": {"terminated": {"message": "z" * 4096}}}],
        },
    }  # fmt: skip


def size(obj: Any) -> int:
    return len(json.dumps(obj))


def test_the_api_servers_copy_keeps_what_it_shows_and_little_else() -> None:
    pod = big_pod()
    kept = pods.trimmed(pod)
    assert size(kept) < 2048 < size(pod)
    assert kept["metadata"]["labels"] == pod["metadata"]["labels"]
    assert kept["metadata"]["ownerReferences"][0]["name"] == "web-abc"
    assert kept["spec"]["nodeName"] == "n1"
    assert kept["spec"]["containers"][0] == {
        "name": "web", "image": "nginx", "ports": [{"containerPort": 80}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
    }  # fmt: skip
    assert kept["status"]["containerStatuses"] == [
        {"name": "web", "ready": True, "restartCount": 2, "state": {"running": {}}}
    ]
    assert usage.per_pod(kept) == usage.per_pod(pod)


def test_the_copy_does_not_grow_with_the_users_environment() -> None:
    assert size(pods.trimmed(big_pod(env=1))) == size(pods.trimmed(big_pod(env=256)))
    scheduling = (pods.for_scheduling(big_pod(env=1)), pods.for_scheduling(big_pod(env=256)))
    assert size(scheduling[0]) == size(scheduling[1])


def unscheduled_pod() -> dict[str, Any]:
    pod = big_pod()
    pod["metadata"]["annotations"] = {autoscaling.SAFE_TO_EVICT: "false", "note": "n" * 4096}
    pod["spec"].pop("nodeName")
    pod["spec"]["nodeSelector"] = {"disk": "ssd"}
    pod["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
    }  # fmt: skip
    pod["spec"]["volumes"] = [{"name": "c", "configMap": {"name": "big", "items": [{}] * 50}}]
    pod["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: " + "m" * 2048},
    ]  # fmt: skip
    return pod


def test_the_operators_copy_answers_as_the_whole_pod_does() -> None:
    shapes = [
        autoscaling.Shape("n", autoscaling.resources({"cpu": "4", "memory": "8Gi", "pods": "10"}),
                          {"disk": "ssd", "zone": z}, ({"key": "k", "effect": "NoSchedule"},))
        for z in ("a", "b")
    ]  # fmt: skip
    for pod in (big_pod(), unscheduled_pod()):
        kept = pods.for_scheduling(pod)
        assert observe.pod_totals([kept]) == observe.pod_totals([pod])
        assert autoscaling.pod_requests(kept) == autoscaling.pod_requests(pod)
        assert autoscaling.unschedulable([kept]) == [kept] * len(autoscaling.unschedulable([pod]))
        assert autoscaling.blocker(kept) == autoscaling.blocker(pod)
        assert autoscaling.must_move(kept) == autoscaling.must_move(pod)
        for shape in shapes:
            assert autoscaling.fits(kept, shape) == autoscaling.fits(pod, shape)
            assert autoscaling.selects(kept, shape) == autoscaling.selects(pod, shape)
            assert autoscaling.tolerates(kept, shape) == autoscaling.tolerates(pod, shape)
    assert autoscaling.unschedulable([unscheduled_pod()])
    assert autoscaling.blocker(big_pod()) == "pod ns/web-1 has local storage (emptyDir)"


def test_the_operators_copy_drops_what_changes_without_mattering() -> None:
    pod = unscheduled_pod()
    kept = pods.for_scheduling(pod)
    assert "managedFields" not in kept["metadata"] and "labels" not in kept["metadata"]
    assert kept["metadata"]["annotations"] == {autoscaling.SAFE_TO_EVICT: "false"}
    assert kept["spec"]["affinity"] == {"nodeAffinity": pod["spec"]["affinity"]["nodeAffinity"]}
    assert kept["spec"]["volumes"] == [{"name": "c"}]
    assert kept["status"] == {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    pod["status"]["containerStatuses"][0]["restartCount"] = 3
    pod["status"]["podIP"] = "10.1.0.2"
    assert pods.for_scheduling(pod) == kept


def test_an_informer_keeps_the_cut_copy_of_what_it_is_given() -> None:
    informer = Informer(None, None, name="pods", keep=pods.trimmed)  # type: ignore[arg-type]
    informer.put(big_pod())
    assert informer.get("ns/web-1") == pods.trimmed(big_pod())
