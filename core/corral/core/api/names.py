"""corral's API group and kinds, the label and annotation names on its objects, and the
names it gives the objects it keeps for others."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

GROUP = "management.svc.io"
VERSION = "v3"
API_VERSION = f"{GROUP}/{VERSION}"


@dataclass(frozen=True)
class Kind:
    """A custom resource kind of `GROUP`/`VERSION`."""

    kind: str
    plural: str


TOKEN = Kind("Token", "tokens")
USER = Kind("User", "users")
GLOBAL_ROLE_BINDING = Kind("GlobalRoleBinding", "globalrolebindings")
SETTING = Kind("Setting", "settings")
CLUSTER = Kind("Cluster", "clusters")
NODE = Kind("Node", "nodes")
PROJECT = Kind("Project", "projects")
PROJECT_ROLE_TEMPLATE_BINDING = Kind("ProjectRoleTemplateBinding", "projectroletemplatebindings")
CLUSTER_ROLE_TEMPLATE_BINDING = Kind("ClusterRoleTemplateBinding", "clusterroletemplatebindings")
NODE_DRIVER = Kind("NodeDriver", "nodedrivers")
NODE_TEMPLATE = Kind("NodeTemplate", "nodetemplates")
CLOUD_CREDENTIAL = Kind("CloudCredential", "cloudcredentials")
NODE_POOL = Kind("NodePool", "nodepools")
AUTH_CONFIG = Kind("AuthConfig", "authconfigs")
USER_ATTRIBUTE = Kind("UserAttribute", "userattributes")
ETCD_BACKUP = Kind("EtcdBackup", "etcdbackups")
CLUSTER_REGISTRATION_TOKEN = Kind("ClusterRegistrationToken", "clusterregistrationtokens")

# The builtin driver whose machines are simulated (kwok) nodes.
KWOK_DRIVER = "kwok"
# On a downstream node a kwok machine made: the name of its Node CR (the machine's key).
LABEL_MACHINE = "management.svc.io/machine"
# On a downstream node a node pool made: the pool's name (its machines outlive a deleted pool
# until the pool reconciler removes them).
LABEL_NODE_POOL = "management.svc.io/node-pool"
# The annotation the downstream kwok manages nodes by (tools/devenv starts it so).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE = "fake"

# The management cluster itself, registered at start-up.
LOCAL_CLUSTER = "local"
LABEL_CLUSTER_CREDENTIAL = "management.svc.io/cluster-credential"
# The digest of a cluster agent's credential: a Secret in SYSTEM_NAMESPACE labelled with its
# cluster (docs/design/cluster-agent.md, section 3).
LABEL_AGENT_CREDENTIAL = "management.svc.io/agent-credential"
# Where a cluster's agent tunnel is held: a Lease in SYSTEM_NAMESPACE labelled with its cluster,
# renewed by the API server replica holding it, with where others reach it and what the agent
# said of itself.
LABEL_TUNNEL = "management.svc.io/tunnel"
ANNOTATION_TUNNEL_RELAY = "management.svc.io/tunnel-relay"
ANNOTATION_AGENT_VERSION = "management.svc.io/agent-version"
ANNOTATION_AGENT_IMAGE = "management.svc.io/agent-image"
# The Leases operator replicas share the clusters by (docs/design/operator-sharding.md), in
# SYSTEM_NAMESPACE: one per replica (`member`), one per shard (`shard`).
LABEL_OPERATOR_LEASE = "management.svc.io/operator-lease"
OPERATOR_LEASE_MEMBER = "member"
OPERATOR_LEASE_SHARD = "shard"
# The key every corral process presents to another's tunnel proxy (a Secret in
# SYSTEM_NAMESPACE, made by the first process that needs it).
TUNNEL_RELAY_SECRET = "corral-tunnel-relay"

# The namespace where corral keeps its own secrets in the management cluster.
SYSTEM_NAMESPACE = "svc-system"

LABEL_TOKEN_USER = "authn.management.svc.io/token-userId"
LABEL_TOKEN_KIND = "authn.management.svc.io/kind"
LABEL_KUBECONFIG_ID = "authn.management.svc.io/kubeconfig-id"
# The index authentication looks a presented key up in first (spec 2.1), and the label that
# puts a hashed token in it: a digest of the key that needs no salt to compute
# (`hashing.index_digest`).
INDEX_TOKEN_KEY = "authn.management.svc.io/token-key-index"
ANNOTATION_TOKEN_HASHED = "authn.management.svc.io/token-hashed"
# When the token was last used, as far as any API server replica has written down.
ANNOTATION_LAST_ACTIVITY = "authn.management.svc.io/last-activity"

# Project membership of a downstream namespace: the annotation holds `<cluster>:<project>`
# (the interface's contract); the label holds `<project>` so that selectors can find members.
ANNOTATION_PROJECT = "field.svc.io/projectId"
LABEL_PROJECT = "field.svc.io/projectId"
# Who created a project: made its owner by the operator.
ANNOTATION_CREATOR = "field.svc.io/creatorId"
# Marks the namespaces corral keeps in the management cluster: per cluster, per project.
LABEL_CLUSTER = "management.svc.io/cluster"
LABEL_BACKING_PROJECT = "management.svc.io/project"
# Who made a Node CR: the node mirror labels the records it creates, and removes only those
# once their downstream node is gone; a record without it (a node pool's machine) is not its own.
LABEL_NODE_SOURCE = "management.svc.io/node-source"
NODE_SOURCE_MIRROR = "mirror"
# A machine that registered itself with the node command (no pool made it).
NODE_SOURCE_CUSTOM = "custom"
# The Secret in SYSTEM_NAMESPACE holding a cluster registration token's value, labelled with
# the token's name (and its cluster, LABEL_CLUSTER).
LABEL_REGISTRATION_TOKEN = "management.svc.io/registration-token"
# A machine added over SSH (`customConfig`): the operator installs it, and uninstalls it when
# its record is deleted.
NODE_SOURCE_SSH = "ssh"
# On such a record: the machine's SSH host key (OpenSSH's one-line form) as first seen, which
# every later connection must present, and when the node command last succeeded there.
ANNOTATION_SSH_HOST_KEY = "management.svc.io/ssh-host-key"
ANNOTATION_SSH_INSTALLED = "management.svc.io/ssh-installed"
# The Secret in SYSTEM_NAMESPACE holding such a machine's SSH key, labelled with its cluster
# (LABEL_CLUSTER) and its record's name.
LABEL_SSH_KEY = "management.svc.io/ssh-key"
SSH_KEY_FIELD = "sshKey"
# The record of a machine's creation on its Node CR (docs/drivers.md, "Creating a machine"):
# when `create` was about to be asked of the driver, and when it answered. Pending without
# succeeded means an operator stopped in between: the next pass asks `state` before anything.
ANNOTATION_CREATE_PENDING = "management.svc.io/create-pending"
ANNOTATION_CREATE_SUCCEEDED = "management.svc.io/create-succeeded"
# Held by a node pool while it has machines, and by each machine's Node CR while its machine
# exists: deleting either removes the machines first (docs/operator.md, "Node pools").
FINALIZER_NODE_POOL = "management.svc.io/node-pool-machines"
FINALIZER_MACHINE = "management.svc.io/machine"
# The operator's (kopf's) finalizer: its deletion handlers run only on objects that carry it.
# A Project is created with it, so one deleted before the operator first saw it still has its
# namespaces removed.
FINALIZER_OPERATOR = "operator.svc.io/finalizer"
# On a machine's Node CR: the autoscaler chose it to go (upstream's `delete-machine`). The pool
# removes marked machines first, drained, when its quantity is lowered.
ANNOTATION_DELETE_MACHINE = "management.svc.io/delete-machine"
# Every object corral writes into a downstream cluster carries this label.
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "corral"
# A project secret: a Secret in SYSTEM_NAMESPACE, labelled with its cluster (LABEL_CLUSTER) and
# its project, its `/v3` name in an annotation (a name may be longer than a label value); each
# copy downstream is labelled with its project too, and carries the uid and resourceVersion of
# the Secret it was copied from.
LABEL_PROJECT_SECRET = "management.svc.io/project-secret"
ANNOTATION_SECRET_NAME = "management.svc.io/secret-name"
LABEL_SECRET_COPY = "management.svc.io/project-secret-copy"
ANNOTATION_SECRET_SOURCE = "management.svc.io/copied-from"
# The Secret in SYSTEM_NAMESPACE holding a cloud credential's fields, labelled with its name.
LABEL_CLOUD_CREDENTIAL = "management.svc.io/cloud-credential"
# A `/v3` description kept on an object that has no field for it (a Secret).
ANNOTATION_DESCRIPTION = "field.svc.io/description"

# The values of LABEL_TOKEN_KIND: what a Token was issued for.
KIND_SESSION = "session"
KIND_KUBECONFIG = "kubeconfig"
KIND_SYSTEM = "system"

# The fixed names of system tokens (spec 2.1), one per kind of corral component that could
# call the `/v3` API on its own behalf. A token is a system token by its name alone, so no
# label written on another token makes it one: the API never issues these names (its own are
# `token-…` and `kubeconfig-…`); an administrator creates them with kubectl. None is held by
# corral's processes today: the operator and the API server reach Kubernetes with their
# ServiceAccounts, and cluster agents with ServiceAccount tokens in their own clusters.
SYSTEM_TOKEN_NAMES = frozenset({"system-operator", "system-apiserver", "system-cluster-agent"})

# How kubeconfig tokens are named (spec 2.1): `kubeconfig-<username>.<cluster_id>`.
KUBECONFIG_TOKEN_PREFIX = "kubeconfig-"


# The Secret whose key seals the sign-in state of every API server replica.
OIDC_STATE_KEY = "oidc-login-state-key"
# On a User made by a provider's login (and on its provider Secret): which provider.
LABEL_AUTH_PROVIDER = "authn.management.svc.io/provider"


def provider_secret_name(user_id: str) -> str:
    """Spec 2.2: the user's refresh or access tokens, one entry per provider id."""
    return f"{user_id}-secret"


def client_secret_name(provider: str) -> str:
    """The Secret holding a sign-in provider's client secret (`oidcconfig-clientsecret`)."""
    return f"{provider}config-clientsecret"


def password_secret_name(user_id: str) -> str:
    return f"{user_id}-password"


def node_cr_name(node_name: str) -> str:
    """The Node CR of a downstream node: stable, DNS-safe, `m-` like Rancher's machine ids. The
    node mirror names its records so, and a pool names a machine's record after the hostname it
    asks for, so the mirror finds that record once the node registers."""
    return "m-" + hashlib.sha256(node_name.encode()).hexdigest()[:10]


def ssh_key_secret_name(cluster_id: str, record: str) -> str:
    """Record names are unique in their cluster only; the Secret's namespace is shared."""
    return f"{cluster_id}-{record}-ssh-key"


def credential_secret_name(cluster_id: str) -> str:
    return f"{cluster_id}-credential"


def agent_credential_secret_name(cluster_id: str) -> str:
    return f"{cluster_id}-agent-credential"


def tunnel_lease_name(cluster_id: str) -> str:
    return f"tunnel-{cluster_id}"


def operator_member_lease_name(identity: str) -> str:
    return f"corral-operator-member-{identity}"


def operator_shard_lease_name(shard: int) -> str:
    return f"corral-operator-shard-{shard}"


def cloud_credential_secret_name(credential: str) -> str:
    return f"{credential}-secret"


def backing_namespace(cluster_id: str, project: str) -> str:
    """The management namespace holding a project's role bindings."""
    return f"{cluster_id}-{project}"


def backing_namespace_labels(cluster_id: str, project: str) -> dict[str, str]:
    return {LABEL_CLUSTER: cluster_id, LABEL_BACKING_PROJECT: project}
