"""Workloads and pods through /v3 as a client sends them, checked in the downstream cluster
with the official client: every kind with every mapped field, rollouts, revisions, rollback,
pause, redeploy, CronJobs, quotas and container defaults, each role's access, bad input."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .api import Api
from .test_projects import Team, create_namespace, create_project, team, unique

__all__ = ["team"]  # the fixture, shared with test_projects


@pytest.fixture(scope="module")
def cluster(stack: Environment) -> str:
    return stack.cluster_ids[0]


@pytest.fixture(scope="module")
def apps(downstream: k8s.ApiClient) -> k8s.AppsV1Api:
    return k8s.AppsV1Api(downstream)


@pytest.fixture(scope="module")
def batch(downstream: k8s.ApiClient) -> k8s.BatchV1Api:
    return k8s.BatchV1Api(downstream)


@pytest.fixture(scope="module")
def core(downstream: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(downstream)


@pytest.fixture(scope="module")
def place(api: Api, cluster: str) -> tuple[str, str]:
    """A project and one of its namespaces, for the tests that need no roles. Privileged (an
    administrator's choice): the round trip writes a hostPath volume, spec 2.8's example of a
    volume source, which the default level (baseline) refuses."""
    project = create_project(api, cluster, podSecurityLevel="privileged")["id"]
    created = create_namespace(api, cluster, project)
    assert created.status == 201, created.body
    return project, created.body["name"]


def workloads_url(project: str) -> str:
    return f"/v3/projects/{project}/workloads"


CONTAINER = {
    "name": "app",
    "image": "registry.example/app:1.0",
    "imagePullPolicy": "IfNotPresent",
    "ports": [{"containerPort": 8080, "protocol": "TCP", "name": "http"}],
    "resources": {
        "requests": {"cpu": "50m", "memory": "32Mi"},
        "limits": {"cpu": "100m", "memory": "64Mi"},
    },
    "env": [
        {"name": "MODE", "value": "test"},
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "pw"}}},
        {"name": "COLOUR", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "colour"}}},
    ],
    "volumeMounts": [
        {"name": "data", "mountPath": "/data", "readOnly": True},
        {"name": "scratch", "mountPath": "/scratch"},
    ],
    "command": ["/bin/app"],
    "args": ["--port", "8080"],
}
COMMON = {
    "labels": {"team": "blue"},
    "annotations": {"owner": "blue@example.com"},
    "volumes": [
        {"name": "data", "hostPath": {"path": "/srv/data", "type": "DirectoryOrCreate"}},
        {"name": "scratch", "emptyDir": {}},
    ],
    "scheduling": {
        "node": {"nodeSelector": {"kubernetes.io/os": "linux"}},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "blue", "effect": "NoSchedule"}
        ],
        "affinity": {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {
                            "matchExpressions": [
                                {"key": "team", "operator": "In", "values": ["blue"]}
                            ]
                        },
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        },
    },
}
BY_KIND: dict[str, dict[str, Any]] = {
    "deployment": {"scale": 2},
    "statefulSet": {
        "scale": 1,
        "volumeClaimTemplates": [
            {
                "name": "state",
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
        ],
    },
    "daemonSet": {},
    "cronJob": {"schedule": "*/5 * * * *"},
    "job": {},
}


def full_body(kind: str, namespace: str) -> dict[str, Any]:
    return {
        "type": "workload",
        "workloadType": kind,
        "name": unique(kind.lower()[:6]),
        "namespaceId": namespace,
        "containers": [copy.deepcopy(CONTAINER)],
        **copy.deepcopy(COMMON),
        **copy.deepcopy(BY_KIND[kind]),
    }


def stored(apps: k8s.AppsV1Api, batch: k8s.BatchV1Api, kind: str, namespace: str, name: str):
    read = {
        "deployment": apps.read_namespaced_deployment,
        "statefulSet": apps.read_namespaced_stateful_set,
        "daemonSet": apps.read_namespaced_daemon_set,
        "cronJob": batch.read_namespaced_cron_job,
        "job": batch.read_namespaced_job,
    }[kind]
    try:
        return read(name, namespace)
    except k8s.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def pod_spec(kind: str, obj: Any) -> Any:
    if kind == "cronJob":
        return obj.spec.job_template.spec.template.spec
    return obj.spec.template.spec


@pytest.mark.parametrize("kind", list(BY_KIND))
def test_each_kind_round_trips_every_mapped_field(
    api: Api, place: tuple[str, str], apps: k8s.AppsV1Api, batch: k8s.BatchV1Api, kind: str
) -> None:
    project, namespace = place
    body = full_body(kind, namespace)
    created = api.post(workloads_url(project), body)
    assert created.status == 201, created.body
    wid = created.body["id"]
    assert wid == f"{kind}:{namespace}:{body['name']}"

    read = api.get(f"{workloads_url(project)}/{wid}")
    assert read.status == 200, read.body
    for field in (
        "name",
        "namespaceId",
        "workloadType",
        "labels",
        "volumes",
        "scheduling",
        *BY_KIND[kind],
    ):
        assert read.body[field] == body[field], field
    # Controllers add annotations of their own (a Deployment's revision).
    assert read.body["annotations"].items() >= body["annotations"].items()
    assert read.body["containers"] == body["containers"]
    assert read.body["projectId"] == project
    assert set(read.body["links"]) >= {"self", "update", "remove", "revisions"}

    # What landed downstream is the same workload.
    obj = stored(apps, batch, kind, namespace, body["name"])
    container = pod_spec(kind, obj).containers[0]
    assert container.image == CONTAINER["image"]
    assert [e.name for e in container.env] == ["MODE", "PASSWORD", "COLOUR"]
    assert container.env[1].value_from.secret_key_ref.key == "pw"
    assert pod_spec(kind, obj).node_selector == {"kubernetes.io/os": "linux"}
    assert obj.metadata.labels["team"] == "blue"

    if kind == "job":  # Kubernetes never changes a Job's pods
        refused = api.put(
            f"{workloads_url(project)}/{wid}",
            {"containers": [{"name": "app", "image": "registry.example/app:2.0"}]},
        )
        assert refused.status == 422, refused.body
        assert "cannot change" in refused.body["message"]
        assert (
            pod_spec(kind, stored(apps, batch, kind, namespace, body["name"])).containers[0].image
            == CONTAINER["image"]
        )
    else:
        change_image_and_scale(api, project, wid, apps, batch, kind, namespace, body["name"])

    listed = api.get(f"{workloads_url(project)}?namespaceId={namespace}&workloadType={kind}")
    assert wid in [w["id"] for w in listed.body["data"]]
    _delete(api, project, wid, lambda: stored(apps, batch, kind, namespace, body["name"]))


def change_image_and_scale(
    api: Api,
    project: str,
    wid: str,
    apps: k8s.AppsV1Api,
    batch: k8s.BatchV1Api,
    kind: str,
    namespace: str,
    name: str,
) -> None:
    """A PUT with only a new image changes the image and keeps everything else."""
    changed = api.put(
        f"{workloads_url(project)}/{wid}",
        {"containers": [{"name": "app", "image": "registry.example/app:2.0"}]},
    )
    assert changed.status == 200, changed.body
    expected = {**CONTAINER, "image": "registry.example/app:2.0"}
    assert changed.body["containers"] == [expected]
    after = stored(apps, batch, kind, namespace, name)
    assert pod_spec(kind, after).containers[0].image == "registry.example/app:2.0"
    assert pod_spec(kind, after).containers[0].args == ["--port", "8080"]

    if "scale" in BY_KIND[kind]:
        scaled = api.put(f"{workloads_url(project)}/{wid}", {"scale": 3})
        assert scaled.status == 200, scaled.body
        assert scaled.body["scale"] == 3
        assert stored(apps, batch, kind, namespace, name).spec.replicas == 3


def _delete(api: Api, project: str, wid: str, downstream: Callable[[], object]) -> None:
    assert api.delete(f"{workloads_url(project)}/{wid}").status == 204
    assert api.get(f"{workloads_url(project)}/{wid}").status == 404
    wait_for(f"{wid} gone downstream", lambda: downstream() is None, 30)


def test_a_field_corral_does_not_model_survives_a_put(
    api: Api, place: tuple[str, str], apps: k8s.AppsV1Api
) -> None:
    project, namespace = place
    body = {
        "name": unique("keep"),
        "namespaceId": namespace,
        "containers": [{"name": "app", "image": "example/app:1"}],
    }
    wid = api.post(workloads_url(project), body).body["id"]
    patch = {
        "metadata": {"labels": {"patched": "yes"}},
        "spec": {
            "minReadySeconds": 3,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 7},
                        }
                    ]
                }
            },
        },
    }
    apps.patch_namespaced_deployment(body["name"], namespace, patch)
    # The API server reads through its watch: wait until it has seen the hand edit.
    wait_for(
        "the hand edit in /v3",
        lambda: api.get(f"{workloads_url(project)}/{wid}").body["labels"].get("patched"),
        10,
    )
    changed = api.put(
        f"{workloads_url(project)}/{wid}",
        {"scale": 2, "containers": [{"name": "app", "image": "example/app:2"}]},
    )
    assert changed.status == 200, changed.body
    after = apps.read_namespaced_deployment(body["name"], namespace)
    assert after.spec.min_ready_seconds == 3
    assert after.spec.template.spec.containers[0].readiness_probe.period_seconds == 7
    assert after.spec.template.spec.containers[0].image == "example/app:2"
    assert after.spec.replicas == 2


# -- rollouts -----------------------------------------------------------------------------------


def deployment(api: Api, project: str, namespace: str, image: str = "example/web:1") -> str:
    body = {
        "name": unique("web"),
        "namespaceId": namespace,
        "scale": 2,
        "containers": [{"name": "web", "image": image}],
    }
    created = api.post(workloads_url(project), body)
    assert created.status == 201, created.body
    return str(created.body["id"])


def workload(api: Api, project: str, wid: str) -> dict[str, Any]:
    found = api.get(f"{workloads_url(project)}/{wid}")
    assert found.status == 200, found.body
    return dict(found.body)


def in_state(api: Api, project: str, wid: str, state: str) -> bool:
    return workload(api, project, wid)["state"] == state


def revisions(api: Api, project: str, wid: str) -> list[dict[str, Any]]:
    listed = api.get(f"{workloads_url(project)}/{wid}/revisions")
    assert listed.status == 200, listed.body
    return list(listed.body["data"])


def test_an_image_change_rolls_out_and_a_rollback_restores_the_first(
    api: Api, place: tuple[str, str]
) -> None:
    project, namespace = place
    wid = deployment(api, project, namespace)
    wait_for("the first rollout", lambda: in_state(api, project, wid, "active"), 30)
    assert workload(api, project, wid)["status"]["availableReplicas"] == 2

    # Pods no node takes keep the rollout unfinished: updating until it can finish.
    stuck = api.put(
        f"{workloads_url(project)}/{wid}",
        {
            "containers": [{"name": "web", "image": "example/web:2"}],
            "scheduling": {"node": {"nodeSelector": {"no-such": "node"}}},
        },
    )
    assert stuck.status == 200, stuck.body
    wait_for("updating", lambda: in_state(api, project, wid, "updating"), 30)
    freed = api.put(
        f"{workloads_url(project)}/{wid}", {"scheduling": {"node": {"nodeSelector": {}}}}
    )
    assert freed.status == 200, freed.body
    wait_for("the new image rolled out", lambda: in_state(api, project, wid, "active"), 60)

    history = revisions(api, project, wid)
    assert [r["revision"] for r in history] == [3, 2, 1]  # newest first
    assert [r["current"] for r in history] == [True, False, False]
    first = history[-1]
    assert first["containers"] == [{"name": "web", "image": "example/web:1"}]

    rolled = api.post(
        f"{workloads_url(project)}/{wid}?action=rollback", {"replicaSetId": first["id"]}
    )
    assert rolled.status == 200, rolled.body
    assert rolled.body["containers"][0]["image"] == "example/web:1"
    wait_for("the rollback rolled out", lambda: in_state(api, project, wid, "active"), 60)
    assert revisions(api, project, wid)[0]["containers"][0]["image"] == "example/web:1"

    for bad in ("replicaset:other:x", "rs-1", f"replicaset:{namespace}:no-such", 7):
        refused = api.post(f"{workloads_url(project)}/{wid}?action=rollback", {"replicaSetId": bad})
        assert refused.status == 422, (bad, refused.body)


def test_pause_holds_an_update_until_resume(api: Api, place: tuple[str, str]) -> None:
    project, namespace = place
    wid = deployment(api, project, namespace)
    wait_for("the first rollout", lambda: in_state(api, project, wid, "active"), 30)
    paused = api.post(f"{workloads_url(project)}/{wid}?action=pause")
    assert paused.status == 200, paused.body
    assert paused.body["paused"] is True and paused.body["state"] == "paused"
    changed = api.put(
        f"{workloads_url(project)}/{wid}",
        {"containers": [{"name": "web", "image": "example/web:2"}]},
    )
    assert changed.status == 200, changed.body
    # The controller has seen the change (observedGeneration) and made no new ReplicaSet.
    wait_for("the paused change observed", lambda: _observed(api, project, wid), 30)
    assert len(revisions(api, project, wid)) == 1
    assert workload(api, project, wid)["state"] == "paused"

    resumed = api.post(f"{workloads_url(project)}/{wid}?action=resume")
    assert resumed.status == 200, resumed.body
    wait_for("the held update rolled out", lambda: in_state(api, project, wid, "active"), 60)
    assert [r["containers"][0]["image"] for r in revisions(api, project, wid)] == [
        "example/web:2",
        "example/web:1",
    ]


def _observed(api: Api, project: str, wid: str) -> bool:
    cluster, (_, namespace, name) = project.split(":")[0], wid.split(":")
    found = api.get(
        f"/k8s/clusters/{cluster}/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
    )
    meta, status = found.body["metadata"], found.body.get("status") or {}
    return bool(status.get("observedGeneration", 0) >= meta["generation"])


def test_redeploy_makes_a_new_replicaset_of_the_same_pods(api: Api, place: tuple[str, str]) -> None:
    project, namespace = place
    wid = deployment(api, project, namespace)
    wait_for("the first rollout", lambda: in_state(api, project, wid, "active"), 30)
    redeployed = api.post(f"{workloads_url(project)}/{wid}?action=redeploy")
    assert redeployed.status == 200, redeployed.body
    wait_for("a second revision", lambda: len(revisions(api, project, wid)) == 2, 30)
    wait_for("the redeploy rolled out", lambda: in_state(api, project, wid, "active"), 60)
    images = [r["containers"] for r in revisions(api, project, wid)]
    assert images[0] == images[1] == [{"name": "web", "image": "example/web:1"}]


def test_actions_that_do_not_apply_to_the_kind_are_refused(
    api: Api, place: tuple[str, str]
) -> None:
    project, namespace = place
    body = {
        "workloadType": "cronJob",
        "name": unique("cron"),
        "namespaceId": namespace,
        "schedule": "0 0 * * *",
        "containers": [{"name": "c", "image": "example/c:1"}],
    }
    wid = api.post(workloads_url(project), body).body["id"]
    for name in ("pause", "resume", "redeploy", "rollback"):
        refused = api.post(f"{workloads_url(project)}/{wid}?action={name}")
        assert refused.status == 422, (name, refused.body)
        assert refused.body["code"] == "InvalidAction"
    assert api.get(f"{workloads_url(project)}/{wid}/revisions").status == 422
    assert api.post(f"{workloads_url(project)}/{wid}?action=explode").status == 422


def test_a_cronjob_runs_jobs_on_its_schedule_and_its_pods_are_listed(
    api: Api, place: tuple[str, str], batch: k8s.BatchV1Api
) -> None:
    project, namespace = place
    body = {
        "workloadType": "cronJob",
        "name": unique("tick"),
        "namespaceId": namespace,
        "schedule": "* * * * *",
        "containers": [{"name": "c", "image": "example/c:1"}],
    }
    wid = api.post(workloads_url(project), body).body["id"]

    def owned_jobs() -> list[Any]:
        jobs = batch.list_namespaced_job(namespace).items
        return [
            j
            for j in jobs
            if any(o.name == body["name"] for o in j.metadata.owner_references or [])
        ]

    # The schedule is every minute: the first Job starts within one.
    wait_for("a Job of the CronJob", owned_jobs, 75)
    pods = wait_for(
        "its pod in /v3",
        lambda: api.get(f"/v3/projects/{project}/pods?workloadId={wid}").body["data"],
        30,
    )
    assert all(p["workloadId"] == wid and p["namespaceId"] == namespace for p in pods)
    assert api.get(f"/v3/projects/{project}/pods/{pods[0]['id']}").body["workloadId"] == wid


# -- quotas and container defaults ----------------------------------------------------------


QUOTED = {
    "resourceQuota": {"limit": {"requestsCpu": "2", "pods": "40"}},
    "namespaceDefaultResourceQuota": {"limit": {"requestsCpu": "500m", "pods": "20"}},
    "containerDefaultResourceLimit": {"requestsCpu": "100m", "limitsCpu": "200m"},
}


def test_container_defaults_apply_and_the_quota_refuses_what_does_not_fit(
    api: Api, cluster: str, core: k8s.CoreV1Api, apps: k8s.AppsV1Api
) -> None:
    project = create_project(api, cluster, **QUOTED)["id"]
    namespace = create_namespace(api, cluster, project).body["name"]
    wait_for("the namespace quota", lambda: _quota_seen(api, project), 30)
    wait_for(
        "the container defaults",
        lambda: core.read_namespaced_limit_range("corral-container-defaults", namespace),
        30,
    )

    # No requests or limits given: the project's defaults fill them in each pod.
    wid = deployment(api, project, namespace)
    pods = wait_for(
        "its two pods", lambda: len(_pods(api, project, wid)) == 2 and _pods(api, project, wid), 30
    )
    for pod in pods:
        resources = core.read_namespaced_pod(pod["name"], namespace).spec.containers[0].resources
        assert resources.requests == {"cpu": "100m"} and resources.limits == {"cpu": "200m"}
    assert not workload(api, project, wid)["containers"][0].get("resources")

    # Ten more pods of 100m do not fit in 500m: refused with the numbers, nothing made.
    big = {
        "name": unique("big"),
        "namespaceId": namespace,
        "scale": 10,
        "containers": [{"name": "web", "image": "example/web:1"}],
    }
    refused = api.post(workloads_url(project), big)
    assert refused.status == 422, refused.body
    assert refused.body["code"] == "QuotaExceeded"
    assert refused.body["fieldName"] == "requestsCpu"
    assert "10 pods x 100m" in refused.body["message"] and "500m" in refused.body["message"]
    assert big["name"] not in [
        d.metadata.name for d in apps.list_namespaced_deployment(namespace).items
    ]

    # Scaling up past the quota is refused too, and the scale stays.
    scaled = api.put(f"{workloads_url(project)}/{wid}", {"scale": 6})
    assert scaled.status == 422, scaled.body
    assert scaled.body["code"] == "QuotaExceeded"
    assert workload(api, project, wid)["scale"] == 2
    # Within the quota it is fine.
    assert api.put(f"{workloads_url(project)}/{wid}", {"scale": 4}).status == 200

    # One pod that alone asks for more than the namespace has.
    greedy = {
        "name": unique("greedy"),
        "namespaceId": namespace,
        "containers": [
            {
                "name": "web",
                "image": "example/web:1",
                "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}},
            }
        ],
    }
    refused = api.post(workloads_url(project), greedy)
    assert refused.status == 422, refused.body
    assert refused.body["code"] == "QuotaExceeded"


def _quota_seen(api: Api, project: str) -> bool:
    """The API server has the namespace's quota, counted, in its cache: its project shows the
    quota's hard limit in its usage. (Through /k8s the cluster itself answers: that its quota
    is there says nothing of what the API server's check will read.)"""
    usage = api.get(f"/v3/projects/{project}?include=usage").body["usage"]
    return bool(
        usage["hard"].get("pods") == QUOTED["namespaceDefaultResourceQuota"]["limit"]["pods"]
    )


def _pods(api: Api, project: str, wid: str) -> list[dict[str, Any]]:
    return list(api.get(f"/v3/projects/{project}/pods?workloadId={wid}").body["data"])


# -- access ---------------------------------------------------------------------------------


def test_each_role_gets_exactly_what_the_access_rules_say(api: Api, team: Team) -> None:
    project, namespace = team.project, team.namespace
    wid = deployment(team.member.api, project, namespace)
    base = workloads_url(project)
    pods = f"/v3/projects/{project}/pods"

    for person in (team.owner, team.member):
        assert person.api.put(f"{base}/{wid}", {"scale": 1}).status == 200
        assert person.api.post(f"{base}/{wid}?action=redeploy").status == 200
    wait_for("the redeploys rolled out", lambda: in_state(api, project, wid, "active"), 60)
    pod = wait_for("a pod", lambda: _pods(api, project, wid), 30)[0]["id"]

    reader = team.reader.api
    assert wid in [w["id"] for w in reader.get(base).body["data"]]
    shown = reader.get(f"{base}/{wid}")
    assert shown.status == 200 and shown.body["actions"] == {}
    assert "update" not in shown.body["links"]
    assert reader.get(f"{pods}/{pod}").status == 200
    assert reader.get(f"{pods}/{pod}/logs").status == 200
    for method, path, body in (
        (
            "POST",
            base,
            {
                "name": unique("no"),
                "namespaceId": namespace,
                "containers": [{"name": "c", "image": "x"}],
            },
        ),
        ("PUT", f"{base}/{wid}", {"scale": 3}),
        ("POST", f"{base}/{wid}?action=pause", {}),
        ("DELETE", f"{base}/{wid}", None),
        ("POST", f"{pods}/{pod}?action=execute", {"command": ["true"]}),
    ):
        refused = reader.request(method, path, body)
        assert refused.status == 403, (method, path, refused.body)

    outsider = team.outsider.api
    for method, path in (
        ("GET", base),
        ("GET", f"{base}/{wid}"),
        ("PUT", f"{base}/{wid}"),
        ("DELETE", f"{base}/{wid}"),
        ("GET", f"{base}/{wid}/revisions"),
        ("GET", pods),
        ("GET", f"{pods}/{pod}"),
        ("GET", f"{pods}/{pod}/logs"),
        ("POST", f"{pods}/{pod}?action=execute"),
    ):
        assert outsider.request(method, path, {}).status == 404, (method, path)
    assert workload(api, project, wid)["scale"] == 1


# -- bad input --------------------------------------------------------------------------------


def test_bad_input_is_refused_and_changes_nothing(
    api: Api, cluster: str, place: tuple[str, str], apps: k8s.AppsV1Api, batch: k8s.BatchV1Api
) -> None:
    project, namespace = place
    elsewhere = create_namespace(api, cluster, create_project(api, cluster)["id"]).body["name"]
    good = {
        "name": "fine",
        "namespaceId": namespace,
        "containers": [{"name": "c", "image": "example/c:1"}],
    }
    cases: list[tuple[str, dict[str, Any]]] = [
        ("workloadType", {"workloadType": "replicaSet"}),
        ("name", {"name": "Bad_Name"}),
        ("name", {"name": "x" * 64}),
        ("name", {"name": 7}),
        ("namespaceId", {"namespaceId": elsewhere}),
        ("namespaceId", {"namespaceId": None}),
        ("scale", {"scale": -1}),
        ("scale", {"scale": "3"}),
        ("scale", {"scale": 10_001}),
        ("containers", {"containers": None}),
        ("containers", {"containers": []}),
        ("containers", {"containers": "nginx"}),
        ("containers[0].image", {"containers": [{"name": "c"}]}),
        (
            "containers[1].name",
            {"containers": [{"name": "c", "image": "a"}, {"name": "c", "image": "b"}]},
        ),
        (
            "containers[0].ports[0].containerPort",
            {"containers": [{"name": "c", "image": "a", "ports": [{"containerPort": 70000}]}]},
        ),
        (
            "containers[0].env[0]",
            {
                "containers": [
                    {
                        "name": "c",
                        "image": "a",
                        "env": [
                            {
                                "name": "A",
                                "value": "1",
                                "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}},
                            }
                        ],
                    }
                ]
            },
        ),
        (
            "containers[0].resources.requests.cpu",
            {
                "containers": [
                    {"name": "c", "image": "a", "resources": {"requests": {"cpu": "lots"}}}
                ]
            },
        ),
        (
            "containers[0].volumeMounts[0].mountPath",
            {
                "containers": [
                    {"name": "c", "image": "a", "volumeMounts": [{"name": "v", "mountPath": "rel"}]}
                ]
            },
        ),
        ("volumes[0]", {"volumes": [{"name": "v", "gitRepo": {"repository": "x"}}]}),
        ("schedule", {"workloadType": "cronJob"}),
        ("scale", {"workloadType": "daemonSet", "scale": 2}),
        ("volumeClaimTemplates", {"volumeClaimTemplates": []}),
    ]
    for field, change in cases:
        refused = api.post(workloads_url(project), {**good, **change})
        assert refused.status == 422, (field, refused.body)
        assert refused.body["fieldName"] == field, (field, refused.body)
    assert api.post(workloads_url(project), raw=b"{not json").status == 400
    # Nothing of any kind was made by the refused requests.
    made = [
        *apps.list_namespaced_deployment(namespace).items,
        *apps.list_namespaced_daemon_set(namespace).items,
        *apps.list_namespaced_stateful_set(namespace).items,
        *batch.list_namespaced_cron_job(namespace).items,
    ]
    assert [m.metadata.name for m in made if m.metadata.name == "fine"] == []

    created = api.post(workloads_url(project), good)
    assert created.status == 201, created.body
    again = api.post(workloads_url(project), good)
    assert again.status == 409, again.body
    for bad in (
        "deployment:ns",
        "foo:ns:name",
        "deployment:Bad:x",
        f"deployment:{elsewhere}:fine",
        f"deployment:{namespace}:missing",
    ):
        assert api.get(f"{workloads_url(project)}/{bad}").status == 404, bad
    wid = created.body["id"]
    for field, change in (
        ("name", {"name": "other"}),
        ("scale", {"scale": -2}),
        ("workloadType", {"workloadType": "job"}),
    ):
        refused = api.put(f"{workloads_url(project)}/{wid}", change)
        assert refused.status == 422, (field, refused.body)
    assert workload(api, project, wid)["scale"] == 1


# -- pods of simulated nodes ----------------------------------------------------------------


def test_a_simulated_pods_log_is_read_and_commands_are_refused_clearly(
    api: Api, place: tuple[str, str]
) -> None:
    """kwok serves one fixed log for its pods and runs no commands (docs/operations.md); real
    output from a real container is test_pod_streams.py's."""
    project, namespace = place
    wid = deployment(api, project, namespace)
    pod = wait_for(
        "a running pod",
        lambda: [p for p in _pods(api, project, wid) if p["state"] == "running"],
        30,
    )[0]
    logs = f"/v3/projects/{project}/pods/{pod['id']}/logs"
    full = api.get(logs)
    assert full.status == 200, full.body
    assert full.headers["Content-Type"].startswith("text/plain")
    assert "simulated by kwok" in full.body
    last = api.get(f"{logs}?tailLines=1&timestamps=true")
    assert last.body.count("\n") == 1 and last.body.split(" ", 1)[0].endswith("Z")
    for query in (
        "container=nope",
        "tailLines=-1",
        "tailLines=x",
        "sinceSeconds=0",
        "follow=maybe",
        "limitBytes=999999999999",
    ):
        refused = api.get(f"{logs}?{query}")
        assert refused.status == 422, (query, refused.body)

    execute = f"/v3/projects/{project}/pods/{pod['id']}?action=execute"
    refused = api.post(execute, {"command": ["echo", "hi"]})
    assert refused.status == 422, refused.body
    assert refused.body["code"] == "ExecFailed"
    for body in (
        {},
        {"command": []},
        {"command": "echo hi"},
        {"command": ["x"], "timeout": 0},
        {"command": ["x"], "container": "nope"},
    ):
        assert api.post(execute, body).status == 422, body
    assert api.get(f"/v3/projects/{project}/pods/{namespace}:no-such-pod").status == 404


def test_public_endpoints_come_from_the_services_that_select_the_pods(
    api: Api, place: tuple[str, str], core: k8s.CoreV1Api
) -> None:
    project, namespace = place
    wid = deployment(api, project, namespace)
    wait_for("the rollout", lambda: in_state(api, project, wid, "active"), 30)
    assert workload(api, project, wid)["publicEndpoints"] == []
    selector = kwok_selector(api, project, wid)
    service = core.create_namespaced_service(
        namespace,
        k8s.V1Service(
            metadata=k8s.V1ObjectMeta(name=unique("svc")),
            spec=k8s.V1ServiceSpec(
                type="NodePort",
                selector=selector,
                ports=[k8s.V1ServicePort(port=80, target_port=8080)],
            ),
        ),
    )
    node_port = service.spec.ports[0].node_port
    hosts = sorted({p["hostIp"] for p in _pods(api, project, wid)})

    def shown() -> list[dict[str, Any]]:
        return list(workload(api, project, wid)["publicEndpoints"])

    [endpoint] = wait_for("the endpoint", shown, 10)
    assert endpoint["kind"] == "NodePort" and endpoint["port"] == node_port
    assert endpoint["addresses"] == hosts and endpoint["protocol"] == "TCP"
    assert endpoint["serviceId"] == f"{namespace}:{service.metadata.name}"


def kwok_selector(api: Api, project: str, wid: str) -> dict[str, str]:
    """The label corral selects the workload's pods by, read from one of them."""
    pod = wait_for("a pod", lambda: _pods(api, project, wid), 30)[0]
    return {k: v for k, v in pod["labels"].items() if k == "workload.svc.io/workloadselector"}
