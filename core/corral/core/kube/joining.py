"""The credential a new machine joins its cluster with: issued per machine, expiring, and able
to do nothing but register that machine's node (docs/drivers.md, "Joining").

In the downstream cluster each machine gets a ServiceAccount `machine-<name>` in
JOIN_NAMESPACE, bound to a ClusterRole of its own that allows creating Nodes and reading and
updating one Node, the machine's hostname (RBAC cannot limit `create` to a name: a holder
could register a node of another name, and nothing else), and creating and reading
CertificateSigningRequests, which a kubelet bootstrapping its TLS needs (RBAC cannot limit
those to its own either; corral approves only a request for the machine's own hostname).
The token is a TokenRequest token of JOIN_TOKEN_SECONDS; the account, role and binding are
removed once the node has registered or the machine goes, which revokes the token at once.
corral's own credential for the cluster never leaves the operator (a machine registering with
the node command gets its credential from the API server, the same way). The role and
binding carry the machine's label: the project sync owns every other ClusterRole and
ClusterRoleBinding labelled as corral's, and removes those it does not want.
"""

from __future__ import annotations

from lightkube import AsyncClient
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import PolicyRule, RoleRef, Subject
from lightkube.resources.authorization_v1 import SubjectAccessReview
from lightkube.resources.core_v1 import ServiceAccount, ServiceAccountToken
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding

from corral.core.api import names
from corral.core.errors import Unavailable
from corral.core.kube import access
from corral.core.kube.client import delete_if_present, ensure_namespace

JOIN_NAMESPACE = "corral-machines"
# The shortest lifetime the TokenRequest API accepts.
JOIN_TOKEN_SECONDS = 600
FIELD_MANAGER = "corral-machine-join"
_LABELS = {names.LABEL_MANAGED_BY: names.MANAGED_BY}


def account_name(machine: str) -> str:
    return f"machine-{machine}"


def role_name(machine: str) -> str:
    return f"corral-machine-{machine}"


def labels_of(machine: str) -> dict[str, str]:
    return {**_LABELS, names.LABEL_MACHINE: machine}


def join_rules(hostname: str) -> list[PolicyRule]:
    return [
        PolicyRule(apiGroups=[""], resources=["nodes"], verbs=["create"]),
        PolicyRule(apiGroups=[""], resources=["nodes", "nodes/status"],
                   resourceNames=[hostname], verbs=["get", "patch", "update"]),
        # A kubelet bootstrapping its TLS asks for its certificate and waits for it. Never
        # `certificatesigningrequests/nodeclient`: the controller manager's own approver must
        # not approve these, corral does (docs/design/real-machines.md).
        PolicyRule(apiGroups=["certificates.k8s.io"], resources=["certificatesigningrequests"],
                   verbs=["create", "get", "list", "watch"]),
    ]  # fmt: skip


async def issue(client: AsyncClient, machine: str, hostname: str) -> str:
    """A fresh join token for `machine`, whose node will be named `hostname`; a secret, never
    logged. Applying the account, role and binding again is harmless."""
    await ensure_namespace(client, JOIN_NAMESPACE, dict(_LABELS))
    account = account_name(machine)
    role = role_name(machine)
    labels = labels_of(machine)
    await client.apply(
        ServiceAccount(metadata=ObjectMeta(name=account, namespace=JOIN_NAMESPACE,
                                           labels=labels)),
        field_manager=FIELD_MANAGER, force=True,
    )  # fmt: skip
    await client.apply(
        ClusterRole(metadata=ObjectMeta(name=role, labels=labels), rules=join_rules(hostname)),
        field_manager=FIELD_MANAGER, force=True,
    )  # fmt: skip
    await client.apply(
        ClusterRoleBinding(
            metadata=ObjectMeta(name=role, labels=labels),
            roleRef=RoleRef(apiGroup="rbac.authorization.k8s.io", kind="ClusterRole", name=role),
            subjects=[Subject(kind="ServiceAccount", name=account, namespace=JOIN_NAMESPACE)],
        ),
        field_manager=FIELD_MANAGER, force=True,
    )  # fmt: skip
    request = ServiceAccountToken(
        metadata=ObjectMeta(),
        spec=TokenRequestSpec(audiences=[], expirationSeconds=JOIN_TOKEN_SECONDS),
    )
    answer = await client.create(request, account, namespace=JOIN_NAMESPACE)
    if answer.status is None or not answer.status.token:
        raise Unavailable(f"cluster gave no token for machine {machine}")
    await _until_in_effect(client, machine)
    return answer.status.token


async def _until_in_effect(client: AsyncClient, machine: str) -> None:
    """Until the cluster's authorizer lets the machine register a node: a driver using the
    token at once would be refused."""
    account = f"system:serviceaccount:{JOIN_NAMESPACE}:{account_name(machine)}"
    review = SubjectAccessReview(spec=SubjectAccessReviewSpec(
        user=account,
        groups=["system:serviceaccounts", f"system:serviceaccounts:{JOIN_NAMESPACE}",
                "system:authenticated"],
        resourceAttributes=ResourceAttributes(verb="create", resource="nodes"),
    ))  # fmt: skip
    await access.until_allowed(client, review, f"the join credential of machine {machine}")


async def revoke(client: AsyncClient, machine: str) -> None:
    """Removes the machine's account (its tokens stop working), role and binding; what is
    gone already is fine."""
    role = role_name(machine)
    await delete_if_present(client, ClusterRoleBinding, role)
    await delete_if_present(client, ClusterRole, role)
    await delete_if_present(client, ServiceAccount, account_name(machine), JOIN_NAMESPACE)
