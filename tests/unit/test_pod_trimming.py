"""What corral keeps of a pod does not grow with what the user put into it."""

from __future__ import annotations

import json
from typing import Any

from corral.core.kube.informer import Informer
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


def test_the_operators_copy_keeps_what_scheduling_reads() -> None:
    pod = big_pod()
    kept = pods.for_scheduling(pod)
    assert "managedFields" not in kept["metadata"]
    assert kept["spec"]["tolerations"] == pod["spec"]["tolerations"]
    assert kept["spec"]["initContainers"][0] == {
        "name": "web", "restartPolicy": "Always",
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
    }  # fmt: skip
    assert kept["status"] == pod["status"]


def test_an_informer_keeps_the_cut_copy_of_what_it_is_given() -> None:
    informer = Informer(None, None, name="pods", keep=pods.trimmed)  # type: ignore[arg-type]
    informer.put(big_pod())
    assert informer.get("ns/web-1") == pods.trimmed(big_pod())
