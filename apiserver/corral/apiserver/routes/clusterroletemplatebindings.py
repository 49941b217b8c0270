"""`/v3/clusterroletemplatebindings`: who owns or is a member of a cluster: a user (`userId`)
or every member of a provider's group (`groupPrincipalId`).

A binding lives in the namespace named after its cluster; its id is `<cluster>:<name>`, the
name derived from subject and role (`roles.cluster_binding_name`), so one grant exists only once.
Cluster owners (and administrators) grant and revoke; members of the cluster see its bindings.
The operator turns each into a ClusterRoleBinding downstream (`cluster-admin` for owners,
`corral-cluster-member` for members). Bindings are immutable: replace one to change it.
"""

from __future__ import annotations

from corral.apiserver.resources import handlers, rolebindings
from corral.apiserver.services.bindings import CLUSTER

FAMILY = rolebindings.family(CLUSTER)
SCHEMA = FAMILY.schema
SUBSCRIBABLE = rolebindings.subscribable(FAMILY, CLUSTER, cache="cluster_bindings")
routes = handlers.routes(FAMILY)
