"""Node pools through /v3 against the real stack: create, read, update and delete; fields
checked before anything is written; only the cluster's owners change pools and only with a
template they may use; a deactivated driver refuses new pools and scale-ups; a template in
use cannot be deleted."""

from __future__ import annotations

import base64
import datetime
import hashlib
import secrets
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from lightkube import Client, KubeConfig
from lightkube.models.core_v1 import Container, PodSpec, Toleration
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Node, Pod

from corral.core.api import names
from corral.core.kube import kinds
from corral.devenv.controlplane import ControlPlane
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from .. import fake_driver
from .api import Api
from .conftest import Person, new_person

GROUP, VERSION = names.GROUP, names.VERSION
READY_TIMEOUT = 30


@pytest.fixture(scope="module")
def cluster(stack: Environment) -> str:
    return stack.cluster_ids[0]


@pytest.fixture
def template(api: Api) -> Iterator[str]:
    made = api.post("/v3/nodetemplates", {"name": "small", "kwokConfig": {"cpu": "2"}})
    assert made.status == 201, made.body
    yield made.body["id"]
    api.delete(f"/v3/nodetemplates/{made.body['id']}")


@pytest.fixture
def pools(api: Api) -> Iterator[Callable[..., dict[str, Any]]]:
    """Creates pools and deletes what is left of them afterwards."""
    created: list[str] = []

    def make(who: Api = api, **fields: Any) -> dict[str, Any]:
        response = who.post("/v3/nodepools", {"type": "nodePool", **fields})
        assert response.status == 201, response.body
        created.append(response.body["id"])
        return dict(response.body)

    yield make
    for pool_id in created:
        assert api.delete(f"/v3/nodepools/{pool_id}").status in (204, 404)


def refused(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status == status, response.body
    body: dict[str, Any] = response.body
    assert body["type"] == "error", body
    if field is not None:
        assert body.get("fieldName") == field, body
    return body


def pool_ids(api: Api) -> set[str]:
    return {p["id"] for p in api.get("/v3/nodepools").body["data"]}


def unique(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(2)}-"


def bind(api: Api, cluster: str, person: Person, role: str) -> None:
    granted = api.post(
        "/v3/clusterroletemplatebindings",
        {"clusterId": cluster, "userId": person.id, "roleTemplateId": role},
    )
    assert granted.status == 201, granted.body


def test_a_pool_has_full_crud_with_its_fields_kept(
    api: Api, cluster: str, template: str, crs: k8s.CustomObjectsApi,
    pools: Callable[..., dict[str, Any]],
) -> None:  # fmt: skip
    taint = {"key": "pool", "value": "db", "effect": "NoSchedule"}
    pool = pools(
        clusterId=cluster, hostnamePrefix=unique("w"), quantity=0, worker=True,
        nodeTemplateName=template, nodeLabels={"tier": "db"}, nodeAnnotations={"a": "b"},
        nodeTaints=[taint], drainBeforeDelete=True, deleteNotReadyAfterSecs=30,
    )  # fmt: skip
    pid = pool["id"]
    assert pid.startswith(f"{cluster}:np-") and pool["type"] == "nodePool"
    assert (pool["quantity"], pool["worker"], pool["etcd"]) == (0, True, False)
    assert pool["nodeTaints"] == [taint] and pool["nodeLabels"] == {"tier": "db"}
    stored = crs.get_namespaced_custom_object(GROUP, VERSION, cluster, "nodepools",
                                              pid.split(":")[1])  # fmt: skip
    assert stored["spec"]["nodeTemplateName"] == template
    assert api.get(f"/v3/nodepools/{pid}").body["hostnamePrefix"] == pool["hostnamePrefix"]
    assert pid in pool_ids(api)
    assert pid in {p["id"] for p in api.get(f"/v3/nodepools?clusterId={cluster}").body["data"]}

    changed = api.put(f"/v3/nodepools/{pid}", {"nodeLabels": {"tier": "web"}, "name": "web"})
    assert changed.status == 200, changed.body
    assert (changed.body["nodeLabels"], changed.body["displayName"]) == ({"tier": "web"}, "web")
    for field, value in (("hostnamePrefix", "other"), ("worker", False), ("clusterId", "local")):
        refused(api.put(f"/v3/nodepools/{pid}", {field: value}), 422, field)
    assert api.get(f"/v3/nodepools/{pid}").body["worker"] is True

    assert api.delete(f"/v3/nodepools/{pid}").status == 204
    wait_for("pool gone", lambda: api.get(f"/v3/nodepools/{pid}").status == 404, READY_TIMEOUT)


def test_bad_fields_are_refused_and_nothing_is_written(
    api: Api, cluster: str, template: str
) -> None:
    before = pool_ids(api)
    good = {"clusterId": cluster, "hostnamePrefix": "w", "nodeTemplateName": template}
    for change, field in (
        ({"hostnamePrefix": "Bad_Prefix"}, "hostnamePrefix"),
        ({"hostnamePrefix": "a" * 59}, "hostnamePrefix"),
        ({"hostnamePrefix": None}, "hostnamePrefix"),
        ({"quantity": 1001}, "quantity"),
        ({"quantity": -1}, "quantity"),
        ({"quantity": "3"}, "quantity"),
        ({"deleteNotReadyAfterSecs": 31540001}, "deleteNotReadyAfterSecs"),
        ({"nodeLabels": {"tier": "no spaces"}}, "nodeLabels"),
        ({"nodeAnnotations": {"management.svc.io/x": "y"}}, "nodeAnnotations"),
        ({"nodeTaints": [{"key": "a b", "effect": "NoSchedule"}]}, "nodeTaints"),
        ({"worker": "yes"}, "worker"),
        ({"nodeTemplateName": None}, "nodeTemplateName"),
        ({"nodeTemplateName": "nt-nothere"}, "nodeTemplateName"),
        ({"clusterId": "c-nothere"}, "clusterId"),
        ({"clusterId": "local"}, "clusterId"),
    ):
        refused(api.post("/v3/nodepools", {**good, **change}), 422, field)
    assert pool_ids(api) == before


def test_only_owners_change_pools_and_only_with_templates_they_may_use(
    api: Api, cluster: str, template: str, pools: Callable[..., dict[str, Any]]
) -> None:
    owner, member, outsider = new_person(api), new_person(api), new_person(api)
    bind(api, cluster, owner, "cluster-owner")
    bind(api, cluster, member, "cluster-member")
    body = {"clusterId": cluster, "hostnamePrefix": unique("o"), "quantity": 0}
    # The admin's template is not the owner's to use: as if it did not exist.
    refused(owner.api.post("/v3/nodepools", {**body, "nodeTemplateName": template}), 422,
            "nodeTemplateName")  # fmt: skip
    mine = owner.api.post("/v3/nodetemplates", {"name": "mine", "kwokConfig": {}})
    assert mine.status == 201, mine.body
    pool = pools(owner.api, **body, nodeTemplateName=mine.body["id"])
    pid = pool["id"]
    refused(owner.api.put(f"/v3/nodepools/{pid}", {"nodeTemplateName": template}), 422,
            "nodeTemplateName")  # fmt: skip

    assert member.api.get(f"/v3/nodepools/{pid}").status == 200
    refused(member.api.put(f"/v3/nodepools/{pid}", {"quantity": 2}), 403)
    refused(member.api.delete(f"/v3/nodepools/{pid}"), 403)
    refused(member.api.post("/v3/nodepools", {**body, "nodeTemplateName": mine.body["id"]}), 403)
    for call in (outsider.api.get, outsider.api.delete):
        refused(call(f"/v3/nodepools/{pid}"), 404)
    assert pid not in pool_ids(outsider.api)

    # In use, the template stays; the pool gone, it goes.
    used = refused(owner.api.delete(f"/v3/nodetemplates/{mine.body['id']}"), 409)
    assert pid in used["message"]
    assert owner.api.delete(f"/v3/nodepools/{pid}").status == 204
    wait_for(
        "template deletable",
        lambda: owner.api.delete(f"/v3/nodetemplates/{mine.body['id']}").status == 204,
        READY_TIMEOUT,
    )


def test_a_deactivated_driver_refuses_new_pools_and_scale_ups(
    api: Api, cluster: str, template: str, pools: Callable[..., dict[str, Any]]
) -> None:
    body = {"clusterId": cluster, "hostnamePrefix": unique("d"), "nodeTemplateName": template}
    pid = pools(**body, quantity=0)["id"]
    assert api.post("/v3/nodedrivers/kwok?action=deactivate").status == 200
    try:
        message = refused(api.post("/v3/nodepools", body), 422, "nodeTemplateName")["message"]
        assert "not active" in message
        refused(api.put(f"/v3/nodepools/{pid}", {"quantity": 1}), 422, "nodeTemplateName")
        # What needs no new machine is still allowed.
        assert api.put(f"/v3/nodepools/{pid}", {"nodeLabels": {"a": "b"}}).status == 200
    finally:
        assert api.post("/v3/nodedrivers/kwok?action=activate").status == 200
        wait_for(
            "kwok active again",
            lambda: api.get("/v3/nodedrivers/kwok").body["state"] == "active",
            READY_TIMEOUT,
        )


# -- machines -----------------------------------------------------------------------------------

SCALE_TIMEOUT = 60
HOLD = "corral.test/hold"


def pool_nodes(downstream: Client, prefix: str) -> dict[str, Node]:
    return {
        n.metadata.name: n
        for n in downstream.list(Node)
        if n.metadata.name.startswith(prefix) and names.LABEL_MACHINE in (n.metadata.labels or {})
    }


def ready_names(downstream: Client, prefix: str) -> set[str]:
    return {
        name
        for name, node in pool_nodes(downstream, prefix).items()
        if any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
    }


def hold_pod(downstream: Client, node: str) -> str:
    """A pod on `node` held by a finalizer: once evicted it stays, deleting, until released."""
    name = f"held-{secrets.token_hex(3)}"
    downstream.create(Pod(
        metadata=ObjectMeta(name=name, namespace="default", finalizers=[HOLD]),
        spec=PodSpec(nodeName=node, tolerations=[Toleration(operator="Exists")],
                     containers=[Container(name="c", image="busybox")]),
    ))  # fmt: skip
    return name


def evicted(downstream: Client, pod: str) -> bool:
    return downstream.get(Pod, pod, namespace="default").metadata.deletionTimestamp is not None


def release(downstream: Client, pod: str) -> None:
    downstream.patch(Pod, pod, {"metadata": {"finalizers": None}}, namespace="default")


@pytest.fixture(scope="module")
def downstream_client(stack: Environment) -> Client:
    return Client(KubeConfig.from_file(stack.downstream_kubeconfigs()[0]))


def test_a_pool_of_three_gives_three_ready_nodes_and_scales_by_its_names(
    api: Api, cluster: str, template: str, downstream_client: Client,
    crs: k8s.CustomObjectsApi, pools: Callable[..., dict[str, Any]],
) -> None:  # fmt: skip
    prefix = unique("p")
    taint = {"key": "pool", "value": "db", "effect": "NoSchedule"}
    pool = pools(
        clusterId=cluster, hostnamePrefix=prefix, quantity=3, worker=True,
        nodeTemplateName=template, nodeLabels={"tier": "db"}, nodeAnnotations={"note": "x"},
        nodeTaints=[taint], drainBeforeDelete=True,
    )  # fmt: skip
    pid = pool["id"]
    expected = {f"{prefix}{i}" for i in (1, 2, 3)}
    wait_for("3 Ready nodes", lambda: ready_names(downstream_client, prefix) == expected,
             SCALE_TIMEOUT)  # fmt: skip
    # Annotations are applied once the node has joined.
    wait_for(
        "the pool's annotation on every node",
        lambda: all((n.metadata.annotations or {}).get("note") == "x"
                    for n in pool_nodes(downstream_client, prefix).values()),
        SCALE_TIMEOUT,
    )  # fmt: skip
    for node in pool_nodes(downstream_client, prefix).values():
        assert node.metadata.labels["tier"] == "db"
        assert ("pool", "db", "NoSchedule") in {(t.key, t.value, t.effect)
                                                for t in node.spec.taints or []}  # fmt: skip
    wait_for(
        "pool active with 3 ready",
        lambda: (
            (p := api.get(f"/v3/nodepools/{pid}").body)["state"] == "active" and p["ready"] == 3
        ),
        SCALE_TIMEOUT,
    )

    def records_ready() -> list[dict[str, Any]] | None:
        # The pool counts its ready machines and each machine's record gets its conditions
        # in passes of their own: the records follow the pool, an instant later at most.
        records = api.get(f"/v3/clusters/{cluster}/nodes").body["data"]
        mine = [r for r in records if r["spec"].get("nodePoolName") == pid]
        walked = ("Initialized", "Provisioned", "Registered", "Ready")
        done = all(
            all(c["status"] == "True" for c in r["status"].get("conditions", [])
                if c["type"] in walked)
            and {c["type"] for c in r["status"].get("conditions", [])} >= set(walked)
            for r in mine
        )  # fmt: skip
        return mine if done else None

    mine = wait_for("the pool's records Ready", records_ready, SCALE_TIMEOUT)
    assert sorted(r["requestedHostname"] for r in mine) == sorted(expected)
    for record in mine:
        assert record["worker"] is True and record["spec"]["nodeTemplateName"] == template

    assert api.put(f"/v3/nodepools/{pid}", {"quantity": 5}).status == 200
    five = expected | {f"{prefix}4", f"{prefix}5"}
    wait_for("5 Ready nodes", lambda: ready_names(downstream_client, prefix) == five,
             SCALE_TIMEOUT)  # fmt: skip

    # A pod on a node that goes, held by a finalizer: evicted (deleting) while its node is
    # still there, and the node goes once the pod has.
    pod_name = hold_pod(downstream_client, f"{prefix}5")
    try:
        assert api.put(f"/v3/nodepools/{pid}", {"quantity": 2}).status == 200
        wait_for("the pod evicted", lambda: evicted(downstream_client, pod_name), SCALE_TIMEOUT)
        assert f"{prefix}5" in pool_nodes(downstream_client, prefix)
        assert pool_nodes(downstream_client, prefix)[f"{prefix}5"].spec.unschedulable
    finally:
        release(downstream_client, pod_name)
    wait_for("2 nodes left", lambda: set(pool_nodes(downstream_client, prefix)) ==
             {f"{prefix}1", f"{prefix}2"}, SCALE_TIMEOUT)  # fmt: skip
    wait_for("pool shows 2", lambda: api.get(f"/v3/nodepools/{pid}").body["requested"] == 2,
             SCALE_TIMEOUT)  # fmt: skip

    # Deleting the pool drains its nodes first: the pool stays, removing, until they are gone.
    pod_name = hold_pod(downstream_client, f"{prefix}1")
    try:
        assert api.delete(f"/v3/nodepools/{pid}").status == 204
        wait_for("the pod evicted", lambda: evicted(downstream_client, pod_name), SCALE_TIMEOUT)
        assert f"{prefix}1" in pool_nodes(downstream_client, prefix)
        # The DELETE answered before /v3's watch cache saw the deletion mark.
        wait_for("the pool removing",
                 lambda: api.get(f"/v3/nodepools/{pid}").body["state"] == "removing",
                 SCALE_TIMEOUT)  # fmt: skip
    finally:
        release(downstream_client, pod_name)
    wait_for("machines removed", lambda: not pool_nodes(downstream_client, prefix), 90)
    wait_for("the pool gone", lambda: api.get(f"/v3/nodepools/{pid}").status == 404, 90)


def test_a_node_unreachable_too_long_is_replaced(
    api: Api, cluster: str, template: str, downstream_client: Client,
    pools: Callable[..., dict[str, Any]],
) -> None:  # fmt: skip
    prefix = unique("r")
    pid = pools(clusterId=cluster, hostnamePrefix=prefix, quantity=2,
                nodeTemplateName=template, deleteNotReadyAfterSecs=5)["id"]  # fmt: skip
    first = {f"{prefix}1", f"{prefix}2"}
    wait_for("2 Ready", lambda: ready_names(downstream_client, prefix) == first, SCALE_TIMEOUT)
    # kwok lets the node go (it keeps renewing its lease, so the node controller would not
    # mark it): the node is marked as the node controller marks an unreachable node, Ready
    # Unknown and the `unreachable` taint; the pool replaces it 5 s later under a new name.
    gone = f"{prefix}2"
    unmanaged = {"metadata": {"annotations": {names.KWOK_NODE_ANNOTATION: None}}}
    downstream_client.patch(Node, gone, unmanaged)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    unknown = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
               "lastHeartbeatTime": now, "lastTransitionTime": now}  # fmt: skip
    downstream_client.patch(Node.Status, gone, {"status": {"conditions": [unknown]}})
    taints = [t.to_dict() for t in downstream_client.get(Node, gone).spec.taints or []]
    unreachable = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                   "timeAdded": now}  # fmt: skip
    downstream_client.patch(Node, gone, {"spec": {"taints": [*taints, unreachable]}})
    replaced = {f"{prefix}1", f"{prefix}3"}
    wait_for("the unreachable node replaced",
             lambda: ready_names(downstream_client, prefix) == replaced
             and set(pool_nodes(downstream_client, prefix)) == replaced, 120)  # fmt: skip
    assert api.get(f"/v3/nodepools/{pid}").body["quantity"] == 2


def test_a_deactivated_driver_leaves_machines_alone_and_makes_no_new_ones(
    api: Api, cluster: str, template: str, downstream_client: Client,
    pools: Callable[..., dict[str, Any]],
) -> None:  # fmt: skip
    prefix = unique("a")
    pid = pools(clusterId=cluster, hostnamePrefix=prefix, quantity=2,
                nodeTemplateName=template)["id"]  # fmt: skip
    both = {f"{prefix}1", f"{prefix}2"}
    wait_for("2 Ready", lambda: ready_names(downstream_client, prefix) == both, SCALE_TIMEOUT)
    before = {n: node.metadata.uid for n, node in pool_nodes(downstream_client, prefix).items()}
    assert api.post("/v3/nodedrivers/kwok?action=deactivate").status == 200
    try:
        refused(api.put(f"/v3/nodepools/{pid}", {"quantity": 3}), 422, "nodeTemplateName")
        # Scaling down needs no driver to be active.
        assert api.put(f"/v3/nodepools/{pid}", {"quantity": 1}).status == 200
        wait_for("1 node left", lambda: set(pool_nodes(downstream_client, prefix)) ==
                 {f"{prefix}1"}, SCALE_TIMEOUT)  # fmt: skip
        after = {n: node.metadata.uid for n, node in pool_nodes(downstream_client, prefix).items()}
        assert after == {f"{prefix}1": before[f"{prefix}1"]}
    finally:
        assert api.post("/v3/nodedrivers/kwok?action=activate").status == 200
        wait_for("kwok active again",
                 lambda: api.get("/v3/nodedrivers/kwok").body["state"] == "active",
                 READY_TIMEOUT)  # fmt: skip


def test_an_operator_killed_while_creating_leaves_exactly_the_requested_machines(
    api: Api, stack: Environment, cluster: str, template: str, downstream_client: Client,
    crs: k8s.CustomObjectsApi, pools: Callable[..., dict[str, Any]],
) -> None:  # fmt: skip
    prefix = unique("k")
    quantity = 100  # a window of seconds between the first machine and the last
    pid = pools(clusterId=cluster, hostnamePrefix=prefix, quantity=quantity,
                nodeTemplateName=template)["id"]  # fmt: skip
    # Killed once it has started on the machines, before it is done with them.
    wait_for("creation under way", lambda: len(pool_nodes(downstream_client, prefix)) > 0,
             SCALE_TIMEOUT)  # fmt: skip
    assert len(pool_nodes(downstream_client, prefix)) < quantity
    stack.crash_operator()
    expected = {f"{prefix}{i}" for i in range(1, quantity + 1)}
    wait_for("all Ready after the restart",
             lambda: ready_names(downstream_client, prefix) == expected, 120)  # fmt: skip
    records = [
        r for r in crs.list_namespaced_custom_object(GROUP, VERSION, cluster, "nodes")["items"]
        if r["spec"].get("nodePoolName") == pid
    ]  # fmt: skip
    assert sorted(r["spec"]["requestedHostname"] for r in records) == sorted(expected)
    assert set(pool_nodes(downstream_client, prefix)) == expected


@dataclass
class ServedDriver:
    name: str
    state: Path  # where the driver keeps its machines, a file each
    template: str

    def machines(self) -> set[str]:
        return {p.stem for p in self.state.glob("m-*.json")}

    def runs(self, command: str) -> int:
        return sum(1 for r in fake_driver.runs(self.state) if r.get("command") == command)


@pytest.fixture
def served(api: Api, stack: Environment, tmp_path: Path) -> Iterator[ServedDriver]:
    """An executable driver (tests/fake_driver.py) whose machines join as kwok nodes, with a
    cloud credential and a template of it; its file is where the stack allows file urls."""
    name = f"exe{secrets.token_hex(3)}"
    state = tmp_path / "state"
    path = fake_driver.write(stack.driver_files / name, state, name)
    checksum = hashlib.sha256(path.read_bytes()).hexdigest()
    body = {"name": name, "active": True, "url": f"file://{path}", "checksum": checksum}
    assert api.post("/v3/nodedrivers", body).status == 201
    wait_for("driver ready", lambda: api.get(f"/v3/nodedrivers/{name}").body["state"]
             == "active", READY_TIMEOUT)  # fmt: skip
    credential = api.post("/v3/cloudcredentials", {f"{name}credentialConfig": {"apiKey": "k1"}})
    assert credential.status == 201, credential.body
    config = {"region": "here", "register": True}
    body = {f"{name}Config": config, "cloudCredentialName": credential.body["id"]}
    made = api.post("/v3/nodetemplates", body)
    assert made.status == 201, made.body
    yield ServedDriver(name, state, made.body["id"])
    wait_for("template free", lambda: api.delete(f"/v3/nodetemplates/{made.body['id']}")
             .status in (204, 404), SCALE_TIMEOUT)  # fmt: skip
    api.delete(f"/v3/cloudcredentials/{credential.body['id']}")
    api.delete(f"/v3/nodedrivers/{name}")


def machine_records(api: Api, cluster: str, pool: str) -> dict[str, dict[str, Any]]:
    records = api.get(f"/v3/clusters/{cluster}/nodes").body["data"]
    return {r["requestedHostname"]: r for r in records if r["spec"].get("nodePoolName") == pool}


def test_a_pool_of_a_served_driver_makes_its_machines_through_it(
    api: Api, cluster: str, served: ServedDriver, downstream_client: Client, stack: Environment,
    pools: Callable[..., dict[str, Any]],
) -> None:  # fmt: skip
    prefix = unique("x")
    pid = pools(clusterId=cluster, hostnamePrefix=prefix, quantity=2, nodeLabels={"by": "exe"},
                nodeTemplateName=served.template)["id"]  # fmt: skip
    both = {f"{prefix}1", f"{prefix}2"}
    wait_for("2 Ready nodes", lambda: ready_names(downstream_client, prefix) == both,
             SCALE_TIMEOUT)  # fmt: skip
    records = machine_records(api, cluster, pid)
    assert served.machines() == {r["id"].split(":")[1] for r in records.values()}
    for hostname, node in pool_nodes(downstream_client, prefix).items():
        assert node.metadata.labels["by"] == "exe"
        assert node.spec.providerID == f"fake://{records[hostname]['id'].split(':')[1]}"

    def provisioned_and_ready() -> bool:
        found = machine_records(api, cluster, pid).values()
        wanted = ("Provisioned", "Registered", "Ready")
        conditions = [c for r in found for c in r["status"]["conditions"] if c["type"] in wanted]
        return len(found) == 2 and all(c["status"] == "True" for c in conditions)

    wait_for("the records Provisioned, Registered and Ready", provisioned_and_ready, SCALE_TIMEOUT)
    assert served.runs("create") == 2

    # Each machine was given the node command of a registration token of its own.
    management = stack.management.client()
    for record in records.values():
        name = record["id"].split(":")[1]
        line = (served.state / f"{name}.join").read_text()
        fetch, install = (shlex.split(part) for part in line.split(" | "))
        assert fetch[:3] == ["curl", "-fsSL", "--pinnedpubkey"]
        assert fetch[-1] == f"{stack.api_url}/v3/connect/install.sh"
        value = install[install.index("--token") + 1]
        token = management.get(kinds.ClusterRegistrationToken, f"machine-{name}",
                               namespace=cluster)  # fmt: skip
        assert token.spec["machine"] == name
        assert token.spec["tokenHash"] == hashlib.sha256(value.encode()).hexdigest()

    # A record deleted through /v3: its machine goes through the driver, and the pool makes
    # another under the next free name (the old one is taken while it goes).
    assert api.delete(f"/v3/clusters/{cluster}/nodes/{records[f'{prefix}1']['id']}").status == 204
    now = {f"{prefix}2", f"{prefix}3"}
    wait_for("the deleted machine replaced", lambda: ready_names(downstream_client, prefix) == now
             and set(pool_nodes(downstream_client, prefix)) == now, SCALE_TIMEOUT)  # fmt: skip
    assert (served.runs("remove"), served.runs("create")) == (1, 3)
    assert len(served.machines()) == 2

    assert api.put(f"/v3/nodepools/{pid}", {"quantity": 1}).status == 200
    wait_for("scaled to 1", lambda: set(pool_nodes(downstream_client, prefix)) == {f"{prefix}2"}
             and len(served.machines()) == 1, SCALE_TIMEOUT)  # fmt: skip

    # Deleting the pool removes its machines through the driver before the pool goes.
    assert api.delete(f"/v3/nodepools/{pid}").status == 204
    wait_for("the pool gone", lambda: api.get(f"/v3/nodepools/{pid}").status == 404,
             SCALE_TIMEOUT)  # fmt: skip
    assert not served.machines() and not pool_nodes(downstream_client, prefix)
    # The records went before the pool, but /v3 watches them apart: either may arrive first.
    wait_for("the records gone from /v3", lambda: not machine_records(api, cluster, pid),
             SCALE_TIMEOUT)  # fmt: skip
    # Their registration tokens went with them.
    left = management.list(kinds.ClusterRegistrationToken, namespace=cluster)
    assert not [
        t
        for t in left
        if t.spec.get("machine") in {r["id"].split(":")[1] for r in records.values()}
    ]


def test_deleting_a_cluster_removes_the_machines_of_its_pools(
    api: Api, template: str, served: ServedDriver, crs: k8s.CustomObjectsApi,
    add_downstream: Callable[..., ControlPlane],
) -> None:  # fmt: skip
    plane = add_downstream("pools-spare", nodes=1)
    imported = {"kubeConfig": base64.b64encode(plane.kubeconfig_path.read_bytes()).decode()}
    created = api.post("/v3/clusters", {"name": "pools-spare", "importedConfig": imported})
    assert created.status == 201, created.body
    cluster = created.body["id"]
    wait_for("spare active", lambda: api.get(f"/v3/clusters/{cluster}").body["state"] == "active",
             SCALE_TIMEOUT)  # fmt: skip
    spare = Client(KubeConfig.from_file(plane.kubeconfig_path))
    kwok, exe = unique("k"), unique("x")
    for prefix, made_from in ((kwok, template), (exe, served.template)):
        fields = {"hostnamePrefix": prefix, "quantity": 2, "nodeTemplateName": made_from}
        response = api.post("/v3/nodepools", {"clusterId": cluster, **fields})
        assert response.status == 201, response.body
    wait_for("4 machines Ready", lambda: len(ready_names(spare, kwok) | ready_names(spare, exe))
             == 4, SCALE_TIMEOUT)  # fmt: skip
    assert len(served.machines()) == 2

    assert api.delete(f"/v3/clusters/{cluster}").status == 204
    wait_for("the cluster gone", lambda: cluster not in {
        c["metadata"]["name"] for c in crs.list_cluster_custom_object(GROUP, VERSION, "clusters")
        ["items"]}, 90)  # fmt: skip
    assert not served.machines()
    assert not pool_nodes(spare, kwok) and not pool_nodes(spare, exe)

    def pools_left() -> list[dict[str, Any]]:
        found = crs.list_cluster_custom_object(GROUP, VERSION, "nodepools")["items"]
        return [p for p in found if p["metadata"]["namespace"] == cluster]

    wait_for("the pools gone with the cluster's namespace", lambda: not pools_left(), 90)
