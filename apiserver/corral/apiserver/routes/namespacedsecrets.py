"""`/v3/projects/{project_id}/namespacedSecrets`: Secrets in one namespace of a project, kept
in the downstream cluster itself (issue 12). The id is `<namespace>:<name>`.

Every Secret of a type a team writes in the project's namespaces is one, whoever made it
(kubectl too), except corral's copies of project secrets (`/secrets` shows those) and what the
cluster or Helm keep there for themselves (service account and bootstrap tokens, Helm
releases). Membership comes from the API server's watch of the cluster's namespaces; the
Secrets themselves are read from the cluster on each request, one listing per namespace of
the project (a few at a time), so no API server holds a cluster's secrets in memory
(`services.namespacedsecrets`).
"""

from __future__ import annotations

from corral.apiserver.resources import handlers, secretfamilies
from corral.apiserver.services import namespacedsecrets

FAMILY = secretfamilies.family(namespacedsecrets, "namespacedSecrets", namespaced=True)
SCHEMA = FAMILY.schema
routes = handlers.routes(FAMILY)
