"""The builtin kwok driver against a real downstream cluster, reached with corral's own
credential for it: a machine joins as a Ready node with its template's capacity and its
pool's labels and taints, registered with a credential of its own that can do nothing else
and stops working once revoked; `observe` and `delete` follow it; a create asked again after
a crash makes no second node."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import TypeVar

from lightkube import ApiError, AsyncClient, Client, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import RoleRef
from lightkube.resources.core_v1 import Namespace, Node, Pod, Secret
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding

from corral.core.api import names
from corral.core.clusters.credential import Credential
from corral.core.kube import joining
from corral.core.kube.credential import client_for
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for
from corral.operator.drivers.contract import JoinConfig, Machine, MachineRequest, Phase
from corral.operator.drivers.kwok import KwokDriver

READY_TIMEOUT = 30.0
# The operator's project sync lists what it manages again once a minute.
RELIST_TIMEOUT = 90.0
T = TypeVar("T")


def corral_credential(stack: Environment, cluster: str) -> Credential:
    management = Client(KubeConfig.from_file(stack.management_kubeconfig))
    secret = management.get(
        Secret, names.credential_secret_name(cluster), namespace=names.SYSTEM_NAMESPACE
    )
    return Credential.from_secret_data(secret.data or {})


def run(credential: Credential, work: Callable[[AsyncClient], Awaitable[T]]) -> T:
    """`work` with a client made with `credential`, on a loop of its own."""

    async def main() -> T:
        client = client_for(credential)
        try:
            return await work(client)
        finally:
            await client.close()

    return asyncio.run(main())


def status_of(credential: Credential, work: Callable[[AsyncClient], Awaitable[object]]) -> int:
    async def call(client: AsyncClient) -> int:
        try:
            await work(client)
        except ApiError as exc:
            return exc.status.code or 0
        return 200

    return run(credential, call)


async def first(listing: AsyncIterable[object]) -> None:
    async for _ in listing:
        return


def ready(node: Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


def test_a_kwok_machine_joins_with_its_own_narrow_credential(stack: Environment) -> None:
    cluster = stack.cluster_ids[0]
    corral = corral_credential(stack, cluster)
    downstream = Client(KubeConfig.from_file(stack.downstream_kubeconfigs()[0]))
    machine, hostname = f"m-{secrets.token_hex(3)}", f"kw{secrets.token_hex(3)}1"

    def driver_call(call: Callable[[KwokDriver], Awaitable[T]]) -> T:
        return run(corral, lambda client: call(KwokDriver(client, cluster)))

    token = run(corral, lambda client: joining.issue(client, machine, hostname))
    taint = {"key": "pool", "value": "db", "effect": "NoSchedule"}
    join = JoinConfig(corral.server, corral.ca_cert or b"", token, {"tier": "db"}, (taint,))
    request = MachineRequest(machine, cluster, hostname, {"cpu": "3", "pods": 50}, join)
    try:
        assert driver_call(lambda d: d.observe(machine)) is None
        made: Machine = driver_call(lambda d: d.create(request))
        assert made.phase is Phase.RUNNING
        # A create asked again after a crash finds the node it made.
        assert driver_call(lambda d: d.create(request)).provider_id == made.provider_id
        wait_for(f"node {hostname} Ready", lambda: ready(downstream.get(Node, hostname)),
                 READY_TIMEOUT)  # fmt: skip
        node = downstream.get(Node, hostname)
        assert node.status.capacity == {"cpu": "3", "memory": "8Gi", "pods": "50"}
        assert node.metadata.labels["tier"] == "db"
        assert node.metadata.labels[names.LABEL_MACHINE] == machine
        # Beside Kubernetes' own (not-ready until the node controller sees it Ready).
        assert ("pool", "db", "NoSchedule") in {
            (t.key, t.value, t.effect) for t in node.spec.taints
        }
        observed = driver_call(lambda d: d.observe(machine))
        assert observed is not None and observed.phase is Phase.RUNNING

        # The machine's credential reads its own node, and can do nothing else.
        own = Credential(corral.server, corral.ca_cert, token)
        other = next(n.metadata.name for n in downstream.list(Node) if n.metadata.name != hostname)
        assert status_of(own, lambda c: c.get(Node, hostname)) == 200
        for what, call in (
            ("get another node", lambda c: c.get(Node, other)),
            ("label another node",
             lambda c: c.patch(Node, other, {"metadata": {"labels": {"x": "y"}}})),
            ("delete its node", lambda c: c.delete(Node, hostname)),
            ("list nodes", lambda c: first(c.list(Node))),
            ("list pods", lambda c: first(c.list(Pod, namespace="default"))),
            ("create a namespace", lambda c: c.create(
                Namespace(metadata=ObjectMeta(name=f"ns-{secrets.token_hex(3)}")))),
        ):  # fmt: skip
            assert status_of(own, call) == 403, what
        run(corral, lambda client: joining.revoke(client, machine))
        wait_for(
            "the revoked token refused",
            lambda: status_of(own, lambda c: c.get(Node, hostname)) == 401,
            READY_TIMEOUT,
        )

        driver_call(lambda d: d.delete(machine))
        wait_for(
            "machine gone",
            lambda: driver_call(lambda d: d.observe(machine)) is None,
            READY_TIMEOUT,
        )
    finally:
        run(corral, lambda client: joining.revoke(client, machine))
        driver_call(lambda d: d.delete(machine))


def test_the_project_sync_leaves_a_join_credential_alone(stack: Environment) -> None:
    """The project sync removes the ClusterRoleBindings labelled as corral's that it does not
    want; a machine's join credential, issued before and waiting for its node, must outlive
    that."""
    cluster = stack.cluster_ids[0]
    corral = corral_credential(stack, cluster)
    downstream = Client(KubeConfig.from_file(stack.downstream_kubeconfigs()[0]))
    machine = f"m-{secrets.token_hex(3)}"
    role = joining.role_name(machine)
    made: list[str] = []

    def present(name: str) -> bool:
        return any(b.metadata.name == name for b in downstream.list(ClusterRoleBinding))

    def removed_stale_binding() -> None:
        """A binding labelled as corral's that no one wants, made and seen removed."""
        name = f"corral-stale-{secrets.token_hex(3)}"
        made.append(name)
        downstream.create(ClusterRoleBinding(
            metadata=ObjectMeta(name=name, labels={names.LABEL_MANAGED_BY: names.MANAGED_BY}),
            roleRef=RoleRef(apiGroup="rbac.authorization.k8s.io", kind="ClusterRole",
                            name="view"),
        ))  # fmt: skip
        wait_for(f"the project sync to remove {name}", lambda: not present(name), RELIST_TIMEOUT)

    run(corral, lambda client: joining.issue(client, machine, f"kw{secrets.token_hex(3)}1"))
    try:
        removed_stale_binding()
        # Passes run one at a time: a second binding removed by a later pass means every
        # removal of the first pass has finished, so a join credential it removed as well
        # would be gone by now, not merely on its way.
        removed_stale_binding()
        assert downstream.get(ClusterRole, role).metadata.labels[names.LABEL_MACHINE] == machine
        assert downstream.get(ClusterRoleBinding, role).roleRef.name == role
    finally:
        run(corral, lambda client: joining.revoke(client, machine))
        for name in made:
            if present(name):
                downstream.delete(ClusterRoleBinding, name)


def test_join_rules_name_only_the_machines_node() -> None:
    rules = joining.join_rules("kw-x1")
    assert [r.verbs for r in rules] == [
        ["create"],
        ["get", "patch", "update"],
        ["create", "get", "list", "watch"],
    ]
    assert rules[0].resources == ["nodes"] and not rules[0].resourceNames
    assert rules[1].resourceNames == ["kw-x1"]
    # TLS bootstrap: its CSRs, and never the subresource kcm's own approver looks for.
    assert rules[2].resources == ["certificatesigningrequests"]
    assert not any("certificatesigningrequests/nodeclient" in r.resources for r in rules)
