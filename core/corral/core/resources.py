"""corral's custom resources as lightkube types, and the label and annotation names on them."""

from __future__ import annotations

from lightkube.generic_resource import create_global_resource, create_namespaced_resource

GROUP = "management.svc.io"
VERSION = "v3"

Token = create_global_resource(GROUP, VERSION, "Token", "tokens")
User = create_global_resource(GROUP, VERSION, "User", "users")
GlobalRoleBinding = create_global_resource(
    GROUP, VERSION, "GlobalRoleBinding", "globalrolebindings"
)
Setting = create_global_resource(GROUP, VERSION, "Setting", "settings")
Cluster = create_global_resource(GROUP, VERSION, "Cluster", "clusters")
Node = create_namespaced_resource(GROUP, VERSION, "Node", "nodes")
Project = create_namespaced_resource(GROUP, VERSION, "Project", "projects")
ProjectRoleTemplateBinding = create_namespaced_resource(
    GROUP, VERSION, "ProjectRoleTemplateBinding", "projectroletemplatebindings"
)
ClusterRoleTemplateBinding = create_namespaced_resource(
    GROUP, VERSION, "ClusterRoleTemplateBinding", "clusterroletemplatebindings"
)

# The management cluster itself, registered at start-up.
LOCAL_CLUSTER = "local"
LABEL_CLUSTER_CREDENTIAL = "management.svc.io/cluster-credential"

# The namespace where corral keeps its own secrets in the management cluster.
SYSTEM_NAMESPACE = "svc-system"

LABEL_TOKEN_USER = "authn.management.svc.io/token-userId"
LABEL_TOKEN_KIND = "authn.management.svc.io/kind"
LABEL_KUBECONFIG_ID = "authn.management.svc.io/kubeconfig-id"
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
# Every object corral writes into a downstream cluster carries this label.
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "corral"

KIND_SESSION = "session"
KIND_KUBECONFIG = "kubeconfig"
KIND_SYSTEM = "system"


def password_secret_name(user_id: str) -> str:
    return f"{user_id}-password"


def credential_secret_name(cluster_id: str) -> str:
    return f"{cluster_id}-credential"


def backing_namespace(cluster_id: str, project: str) -> str:
    """The management namespace holding a project's bindings and secrets."""
    return f"{cluster_id}-{project}"


def backing_namespace_labels(cluster_id: str, project: str) -> dict[str, str]:
    return {LABEL_CLUSTER: cluster_id, LABEL_BACKING_PROJECT: project}
