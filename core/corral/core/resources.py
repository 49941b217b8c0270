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

KIND_SESSION = "session"
KIND_KUBECONFIG = "kubeconfig"
KIND_SYSTEM = "system"


def password_secret_name(user_id: str) -> str:
    return f"{user_id}-password"


def credential_secret_name(cluster_id: str) -> str:
    return f"{cluster_id}-credential"
