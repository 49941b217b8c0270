"""The pure rules of workloads: ids, the flat mapping both ways, state, quota arithmetic and
public endpoints."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from lightkube.resources.core_v1 import Pod, Service
from lightkube.resources.networking_v1 import Ingress

from corral.apiserver.routes.workloads import rendering_key
from corral.apiserver.services import trialpods
from corral.apiserver.services.workloads import Neighbours, Scope, Workload, check_passed_through
from corral.core.errors import Invalid
from corral.core.kube.impersonation import Impersonation
from corral.core.kube.informer import Informer
from corral.core.workloads import endpoints, render, spec, state, usage
from corral.core.workloads.kinds import KINDS, SELECTOR_LABEL, WorkloadId, selector_label

DEPLOYMENT, STATEFUL_SET, DAEMON_SET = KINDS["deployment"], KINDS["statefulSet"], KINDS["daemonSet"]
CRON_JOB, JOB = KINDS["cronJob"], KINDS["job"]
APP = {"name": "app", "image": "example/app:1"}


def test_workload_ids_are_read_and_written_one_way() -> None:
    wid = WorkloadId.parse("statefulSet:ns:db")
    assert (wid.kind, wid.namespace, wid.name, str(wid)) == (
        STATEFUL_SET,
        "ns",
        "db",
        "statefulSet:ns:db",
    )
    for bad in (
        "deployment:ns",
        "replicaSet:ns:x",
        "deployment:NS:x",
        "deployment:ns:a:b",
        7,
        f"cronJob:ns:{'x' * 53}",
    ):
        with pytest.raises(Invalid):
            WorkloadId.parse(bad)


def test_selector_labels_fit_a_label_value_and_stay_distinct() -> None:
    short = selector_label(DEPLOYMENT, "ns", "web")[SELECTOR_LABEL]
    assert short == "deployment-ns-web"
    long_a = selector_label(DEPLOYMENT, "n" * 63, "a" * 63)[SELECTOR_LABEL]
    long_b = selector_label(DEPLOYMENT, "n" * 63, "a" * 62 + "b")[SELECTOR_LABEL]
    assert len(long_a) <= 63 and long_a != long_b


@pytest.mark.parametrize("kind", list(KINDS.values()), ids=list(KINDS))
def test_every_kind_maps_its_fields_both_ways(kind: Any) -> None:
    body: dict[str, Any] = {
        "containers": [
            {
                **APP,
                "ports": [{"containerPort": 80, "protocol": "UDP", "name": "dns"}],
                "env": [{"name": "A", "value": "1"}],
                "command": ["run"],
            }
        ],
        "labels": {"a": "b"},
        "volumes": [{"name": "tmp", "emptyDir": {}}],
        "scheduling": {
            "node": {"nodeSelector": {"disk": "ssd"}},
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {}},
        },
    }
    if kind.scalable:
        body["scale"] = 3
    if kind is CRON_JOB:
        body["schedule"] = "@hourly"
    obj = spec.build(kind, "ns", "web", body)
    shown = render.fields(kind, {**obj, "metadata": {**obj["metadata"], "uid": "u"}})
    for field, value in body.items():
        assert shown[field] == value, field
    assert shown["id"] == f"{kind.type}:ns:web"
    template = kind.pod_template(obj)
    assert template["metadata"]["labels"] == selector_label(kind, "ns", "web")
    if kind in (JOB, CRON_JOB):
        assert template["spec"]["restartPolicy"] == "Never"
        assert "selector" not in obj["spec"]


def test_a_put_changes_what_it_gives_and_keeps_what_corral_does_not_model() -> None:
    stored = spec.build(DEPLOYMENT, "ns", "web", {"containers": [APP, {**APP, "name": "side"}]})
    stored["metadata"]["resourceVersion"] = "7"
    container = stored["spec"]["template"]["spec"]["containers"][0]
    container["readinessProbe"] = {"httpGet": {"port": 80}}
    stored["spec"]["strategy"] = {"type": "Recreate"}
    changed = spec.merge(DEPLOYMENT, stored, {"containers": [{"name": "app", "image": "v2"}]})
    [kept] = changed["spec"]["template"]["spec"]["containers"]
    assert kept["image"] == "v2" and kept["readinessProbe"] == {"httpGet": {"port": 80}}
    assert changed["spec"]["strategy"] == {"type": "Recreate"}
    assert stored["spec"]["template"]["spec"]["containers"][0]["image"] == "example/app:1"
    assert spec.merge(DEPLOYMENT, stored, {"scale": 0})["spec"]["replicas"] == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"containers": None}, "containers"),
        ({"containers": [APP] * 33}, "containers"),
        ({"containers": [{"name": "a b", "image": "x"}]}, "containers[0].name"),
        ({"containers": [{"name": "a", "image": "x y"}]}, "containers[0].image"),
        (
            {"containers": [{**APP, "ports": [{"containerPort": 0}]}]},
            "containers[0].ports[0].containerPort",
        ),
        (
            {"containers": [{**APP, "ports": [{"containerPort": 1, "protocol": "ICMP"}]}]},
            "containers[0].ports[0].protocol",
        ),
        (
            {"containers": [{**APP, "resources": {"requests": {"gpu": "1"}}}]},
            "containers[0].resources.requests",
        ),
        (
            {"containers": [{**APP, "resources": {"limits": {"cpu": "-1"}}}]},
            "containers[0].resources.limits.cpu",
        ),
        (
            {"containers": [{**APP, "env": [{"name": "A", "valueFrom": {"secretKeyRef": {}}}]}]},
            "containers[0].env[0].valueFrom.secretKeyRef.name",
        ),
        (
            {
                "containers": [
                    {
                        **APP,
                        "env": [
                            {
                                "name": "A",
                                "valueFrom": {
                                    "secretKeyRef": {"name": "s", "key": "k"},
                                    "fieldRef": {},
                                },
                            }
                        ],
                    }
                ]
            },
            "containers[0].env[0].valueFrom",
        ),
        ({"containers": [{**APP, "command": "sh -c x"}]}, "containers[0].command"),
        ({"containers": [APP], "scale": True}, "scale"),
        ({"containers": [APP], "scale": 10_001}, "scale"),
        ({"containers": [APP], "labels": {"a": 1}}, "labels.a"),
        ({"containers": [APP], "volumes": [{"name": "v"}]}, "volumes[0]"),
        (
            {"containers": [APP], "volumes": [{"name": "v", "emptyDir": {}, "hostPath": {}}]},
            "volumes[0]",
        ),
        (
            {"containers": [APP], "scheduling": {"tolerations": [{"effect": "Sometimes"}]}},
            "scheduling.tolerations[0].effect",
        ),
        ({"containers": [APP], "schedule": "* * * * *"}, "schedule"),
    ],
)
def test_bad_fields_are_refused_naming_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(Invalid) as raised:
        spec.build(DEPLOYMENT, "ns", "web", body)
    assert raised.value.field == field


def test_what_kubernetes_never_changes_is_refused_on_update() -> None:
    job = spec.build(JOB, "ns", "once", {"containers": [APP]})
    job["metadata"]["resourceVersion"] = "1"
    with pytest.raises(Invalid, match="cannot change"):
        spec.merge(JOB, job, {"containers": [APP]})
    claims = [
        {
            "name": "d",
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    ]
    sts = spec.build(
        STATEFUL_SET, "ns", "db", {"containers": [APP], "volumeClaimTemplates": claims}
    )
    sts["metadata"]["resourceVersion"] = "1"
    with pytest.raises(Invalid, match="volumeClaimTemplates"):
        spec.merge(STATEFUL_SET, sts, {"volumeClaimTemplates": claims})
    with pytest.raises(Invalid, match="schedule"):
        spec.build(CRON_JOB, "ns", "c", {"containers": [APP]})


def deployment(wanted: int, generation: int = 2, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "d", "namespace": "n", "generation": generation},
        "spec": {"replicas": wanted},
        "status": {"observedGeneration": 2, **status},
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (deployment(2, replicas=2, updatedReplicas=2, availableReplicas=2), "active"),
        (deployment(2, replicas=2, updatedReplicas=1, availableReplicas=2), "updating"),
        (deployment(2, replicas=3, updatedReplicas=2, availableReplicas=2), "updating"),
        (deployment(2, 3, replicas=2, updatedReplicas=2, availableReplicas=2), "updating"),
        (deployment(0), "stopped"),
        ({**deployment(2), "spec": {"replicas": 2, "paused": True}}, "paused"),
    ],
)
def test_deployment_states(obj: dict[str, Any], expected: str) -> None:
    assert state.state(DEPLOYMENT, obj) == expected


def test_the_other_kinds_states_and_counts() -> None:
    meta = {"name": "x", "namespace": "n", "generation": 1}
    sts = {
        "metadata": meta,
        "spec": {"replicas": 1},
        "status": {
            "observedGeneration": 1,
            "currentRevision": "a",
            "updateRevision": "b",
            "updatedReplicas": 1,
            "availableReplicas": 1,
            "replicas": 1,
            "readyReplicas": 1,
        },
    }
    assert state.state(STATEFUL_SET, sts) == "updating"
    sts["status"]["currentRevision"] = "b"
    assert state.state(STATEFUL_SET, sts) == "active"
    ds = {
        "metadata": meta,
        "spec": {},
        "status": {
            "observedGeneration": 1,
            "desiredNumberScheduled": 3,
            "updatedNumberScheduled": 3,
            "numberAvailable": 2,
            "numberReady": 2,
            "numberUnavailable": 1,
        },
    }
    assert state.state(DAEMON_SET, ds) == "updating"
    assert state.counts(DAEMON_SET, ds) == {
        "replicas": 3,
        "readyReplicas": 2,
        "availableReplicas": 2,
        "unavailableReplicas": 1,
    }
    ds["status"]["desiredNumberScheduled"] = 0
    assert state.state(DAEMON_SET, ds) == "stopped"
    job = {"metadata": meta, "spec": {}, "status": {"active": 2, "ready": 1}}
    assert state.state(JOB, job) == "active"
    assert state.counts(JOB, job)["unavailableReplicas"] == 1
    job["status"]["conditions"] = [{"type": "Complete", "status": "True"}]
    assert state.state(JOB, job) == "stopped"
    cron = {"metadata": meta, "spec": {"suspend": True}, "status": {"active": [{}, {}]}}
    assert state.state(CRON_JOB, cron) == "paused"
    assert state.counts(CRON_JOB, cron)["replicas"] == 2


def test_quota_arithmetic_names_each_resource_with_its_numbers() -> None:
    pod = usage.per_pod(
        {
            "spec": {
                "containers": [
                    {"resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}},
                    {"resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}},
                ]
            }
        }
    )
    assert pod == {
        "pods": 1,
        "requestsCpu": Decimal("0.15"),
        "limitsCpu": Decimal("0.2"),
        "requestsMemory": Decimal(64 * 2**20),
    }
    hard = {"requestsCpu": Decimal("0.5"), "pods": Decimal(10)}
    found = usage.excesses(pod, 3, {}, hard, {"requestsCpu": Decimal("0.1")})
    assert [e.field for e in found] == ["requestsCpu"]
    assert (
        found[0].describe()
        == "requestsCpu: used 100m + 3 pods x 150m = 550m exceeds the limit 500m"
    )
    # What the workload's pods take now is given back first (an update).
    assert (
        usage.excesses(
            pod, 3, {"requestsCpu": Decimal("0.35")}, hard, {"requestsCpu": Decimal("0.4")}
        )
        == []
    )
    assert usage.excesses(pod, 1, {}, {}, {}) == []


def test_pods_wanted_by_kind() -> None:
    assert usage.pods_wanted(DEPLOYMENT, {"spec": {"replicas": 4}}, 9) == 4
    assert usage.pods_wanted(DAEMON_SET, {"spec": {}}, 9) == 9
    assert usage.pods_wanted(JOB, {"spec": {"parallelism": 2}}, 9) == 2
    assert usage.pods_wanted(CRON_JOB, {"spec": {"jobTemplate": {"spec": {}}}}, 9) == 1


def test_public_endpoints_from_services_and_ingresses() -> None:
    labels = {"app": "web"}

    def service(name: str, kind: str, selector: dict[str, str], **extra: Any) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "namespace": "n"},
            "spec": {
                "type": kind,
                "selector": selector,
                "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}],
            },
            **extra,
        }

    services = [
        service("np", "NodePort", labels),
        service(
            "lb",
            "LoadBalancer",
            labels,
            status={"loadBalancer": {"ingress": [{"ip": "203.0.113.5"}]}},
        ),
        service("inner", "ClusterIP", labels),
        service("other", "NodePort", {"app": "db"}),
        service("manual", "NodePort", {}),
    ]
    ingress = {
        "metadata": {"name": "ing", "namespace": "n"},
        "spec": {
            "tls": [{"hosts": ["web.example"]}],
            "rules": [
                {
                    "host": "web.example",
                    "http": {"paths": [{"path": "/", "backend": {"service": {"name": "inner"}}}]},
                }
            ],
        },
        "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example"}]}},
    }
    found = endpoints.public_endpoints(labels, services, [ingress], ["10.0.0.1"])
    assert [(e["kind"], e["addresses"], e["port"]) for e in found] == [
        ("NodePort", ["10.0.0.1"], 30080),
        ("LoadBalancer", ["203.0.113.5"], 80),
        ("Ingress", ["lb.example"], 443),
    ]
    assert found[2]["protocol"] == "HTTPS" and found[2]["hostname"] == "web.example"


POD_FIELDS = {
    "hostNetwork": True,
    "hostPID": True,
    "hostIPC": False,
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "serviceAccountName": "builder",
    "nodeName": "node-1.example",
}


def test_pod_fields_corral_does_not_model_pass_through_and_show_back() -> None:
    container = {**APP, "securityContext": {"privileged": True, "capabilities": {"add": ["ALL"]}}}
    obj = spec.build(DEPLOYMENT, "ns", "web", {"containers": [container], **POD_FIELDS})
    pod = obj["spec"]["template"]["spec"]
    assert {k: pod[k] for k in POD_FIELDS} == POD_FIELDS
    assert pod["containers"][0]["securityContext"] == container["securityContext"]
    shown = render.fields(DEPLOYMENT, obj)
    assert {k: shown[k] for k in POD_FIELDS} == POD_FIELDS
    assert shown["containers"] == [container]
    # A GET's body sent back is accepted and keeps them; an empty name unsets one.
    again = spec.merge(DEPLOYMENT, obj, shown)["spec"]["template"]["spec"]
    assert {k: again[k] for k in POD_FIELDS} == POD_FIELDS
    assert again["containers"] == pod["containers"]
    unset = spec.merge(DEPLOYMENT, obj, {"serviceAccountName": "", "hostNetwork": False})
    assert "serviceAccountName" not in unset["spec"]["template"]["spec"]
    plain = render.fields(DEPLOYMENT, spec.build(DEPLOYMENT, "ns", "web", {"containers": [APP]}))
    assert {k: plain[k] for k in POD_FIELDS} == {
        "hostNetwork": False, "hostPID": False, "hostIPC": False, "securityContext": {},
        "serviceAccountName": "", "nodeName": "",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"hostNetwork": "true"}, "hostNetwork"),
        ({"hostPID": 1}, "hostPID"),
        ({"securityContext": "privileged"}, "securityContext"),
        ({"serviceAccountName": "Not_A_Name"}, "serviceAccountName"),
        ({"nodeName": 7}, "nodeName"),
        ({"containers": [{**APP, "securityContext": True}]}, "containers[0].securityContext"),
        # Fields corral does not write are refused, never dropped.
        ({"privileged": True}, "privileged"),
        ({"hostPort": 80}, "hostPort"),
        ({"containers": [{**APP, "livenessProbe": {}}]}, "containers[0].livenessProbe"),
    ],
)
def test_pod_fields_are_checked_and_unknown_fields_refused(
    change: dict[str, Any], field: str
) -> None:
    with pytest.raises(Invalid) as raised:
        spec.build(DEPLOYMENT, "ns", "web", {"containers": [APP], **change})
    assert raised.value.field == field


def test_a_jobs_pod_fields_cannot_change_once_it_exists() -> None:
    job = spec.build(JOB, "ns", "once", {"containers": [APP]})
    job["metadata"]["resourceVersion"] = "1"
    with pytest.raises(Invalid, match="cannot change"):
        spec.merge(JOB, job, {"hostNetwork": True})


def test_a_trial_pod_of_a_statefulset_has_the_volumes_of_its_claim_templates() -> None:
    claim = {
        "name": "state",
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    mounted = {**APP, "volumeMounts": [{"name": "state", "mountPath": "/state"}]}
    body = {"containers": [mounted], "volumeClaimTemplates": [claim], "hostIPC": True}
    pod = trialpods.trial(STATEFUL_SET, spec.build(STATEFUL_SET, "ns", "db", body))
    assert pod.metadata is not None and pod.spec is not None
    assert (pod.metadata.namespace, pod.metadata.generateName) == ("ns", "db-")
    assert [(v.name, v.persistentVolumeClaim.claimName) for v in pod.spec.volumes or []] == [
        ("state", "state-db-0")
    ]
    assert pod.spec.hostIPC is True


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"containers": [{**APP, "ports": [{"containerPort": 80, "hostPort": 80}]}]},
         "containers[0].ports[0].hostPort"),
        ({"containers": [{**APP, "resources": {"claims": []}}]}, "containers[0].resources.claims"),
        ({"containers": [{**APP, "env": [{"name": "A", "value": "1", "type": "x"}]}]},
         "containers[0].env[0].type"),
        ({"containers": [{**APP, "volumeMounts": [{"name": "v", "mountPath": "/v",
                                                   "mountPropagation": "None"}]}]},
         "containers[0].volumeMounts[0].mountPropagation"),
        ({"scheduling": {"priority": 1}}, "scheduling.priority"),
        ({"scheduling": {"node": {"name": "n1"}}}, "scheduling.node.name"),
        ({"scheduling": {"tolerations": [{"key": "k", "seconds": 1}]}},
         "scheduling.tolerations[0].seconds"),
    ],
)  # fmt: skip
def test_unknown_keys_of_nested_objects_are_refused_naming_their_path(
    change: dict[str, Any], field: str
) -> None:
    with pytest.raises(Invalid) as raised:
        spec.build(DEPLOYMENT, "ns", "web", {"containers": [APP], **change})
    assert (raised.value.field, raised.value.code) == (field, "InvalidBodyContent")


def test_a_claim_templates_unknown_keys_are_refused_at_each_level() -> None:
    claim = {"name": "data", "spec": {"accessModes": ["ReadWriteOnce"],
                                      "resources": {"requests": {"storage": "1Gi"}}}}  # fmt: skip
    assert spec.build(STATEFUL_SET, "ns", "db", {"containers": [APP],
                                                  "volumeClaimTemplates": [claim]})  # fmt: skip
    for change, field in (
        ({**claim, "status": {}}, "volumeClaimTemplates[0].status"),
        ({**claim, "spec": {**claim["spec"], "volumeMode": "Block"}},
         "volumeClaimTemplates[0].spec.volumeMode"),
    ):  # fmt: skip
        with pytest.raises(Invalid) as raised:
            spec.build(STATEFUL_SET, "ns", "db", {"containers": [APP],
                                                   "volumeClaimTemplates": [change]})  # fmt: skip
        assert raised.value.field == field


def test_a_tolerations_seconds_are_written_within_bounds() -> None:
    toleration = {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
    body = {"containers": [APP], "scheduling": {"tolerations": [toleration]}}
    obj = spec.build(DEPLOYMENT, "ns", "web", body)
    assert obj["spec"]["template"]["spec"]["tolerations"] == [toleration]
    with pytest.raises(Invalid) as raised:
        spec.build(DEPLOYMENT, "ns", "web", {"containers": [APP], "scheduling": {
            "tolerations": [{**toleration, "tolerationSeconds": -1}]}})  # fmt: skip
    assert raised.value.field == "scheduling.tolerations[0].tolerationSeconds"


def test_what_passes_through_to_kubernetes_keeps_every_key_it_has() -> None:
    check_passed_through({
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"},
                            "supplementalGroups": [], "seLinuxOptions": {}},
        "containers": [{"name": "a", "securityContext": {
            "capabilities": {"drop": ["ALL"], "add": []}, "allowPrivilegeEscalation": False}}],
        "volumes": [{"name": "v", "emptyDir": {}}, {"name": "w", "projected": {
            "sources": [{"serviceAccountToken": {"path": "t"}}]}}],
        "scheduling": {"affinity": {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": {"topologyKey": "k"}}]}}},
    })  # fmt: skip


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({"securityContext": {"runAsNonRot": True}}, "securityContext.runAsNonRot",
         "InvalidBodyContent"),
        ({"containers": [{"name": "a", "securityContext": {"capabilities": {"dorp": []}}}]},
         "containers[0].securityContext.capabilities.dorp", "InvalidBodyContent"),
        ({"volumes": [{"name": "v", "hostPath": {"path": "/x", "typo": 1}}]},
         "volumes[0].hostPath.typo", "InvalidBodyContent"),
        ({"scheduling": {"affinity": {"nodeAffinity": {"preferred": []}}}},
         "scheduling.affinity.nodeAffinity.preferred", "InvalidBodyContent"),
        ({"volumes": [{"name": "v", "hostPath": {"path": 5}}]}, "volumes[0]", "InvalidFormat"),
    ],
)  # fmt: skip
def test_a_key_kubernetes_would_drop_is_refused_naming_its_path(
    body: dict[str, Any], field: str, code: str
) -> None:
    with pytest.raises(Invalid) as raised:
        check_passed_through(body)
    assert (raised.value.field, raised.value.code or "InvalidFormat") == (field, code)


def test_a_workload_is_rendered_again_when_it_or_what_surrounds_it_changes() -> None:
    """A kept rendering is found by a key that moves with the object's version, the project,
    and when its namespace's Services, Ingresses and pods (its public endpoints) last moved;
    those of another namespace leave it."""
    by_namespace = {"namespace": lambda obj: [obj["metadata"]["namespace"]]}
    near = Neighbours(*(Informer(None, resource, by_namespace, versioned=("namespace",))  # type: ignore[arg-type]
                        for resource in (Service, Ingress, Pod)))  # fmt: skip
    where = Scope("c-1:p-1", "c-1", "project-owner", Impersonation("u-1"))
    obj = {"metadata": {"name": "web", "namespace": "ns", "resourceVersion": "7"}}

    def key(obj: dict[str, Any], where: Scope = where) -> object:
        return rendering_key(None, Workload(where, DEPLOYMENT, obj, near))  # type: ignore[arg-type]

    first = key(obj)
    assert key(obj) == first
    assert key({"metadata": {**obj["metadata"], "resourceVersion": "8"}}) != first
    assert key(obj, Scope("c-1:p-2", "c-1", "project-owner", Impersonation("u-1"))) != first
    assert key({"metadata": {**obj["metadata"], "name": "db"}}) != first
    for cache in (near.services, near.ingresses, near.pods):
        before = key(obj)
        cache.put({"metadata": {"name": "x", "namespace": "elsewhere", "resourceVersion": "1"}})
        assert key(obj) == before, cache.name
        cache.put({"metadata": {"name": "x", "namespace": "ns", "resourceVersion": "1"}})
        assert key(obj) != before, cache.name
