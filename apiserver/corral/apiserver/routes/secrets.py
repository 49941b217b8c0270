"""`/v3/projects/{project_id}/secrets`: a project's secrets, which every namespace of the
project gets a copy of (issue 12).

A project secret is a Secret in `svc-system` of the management cluster, under a name derived
from its cluster, project and name, labelled with its cluster and project, its name in an
annotation (`corral.core.projects.secrets`); its id is `<project>:<name>`
(`p-xxxxx:db-password`), as Rancher names secrets in a project's namespace. The operator
copies it into the project's namespaces (`operator.downstream.projects`), except in the cluster
`local`, whose namespaces are the management cluster's own: there corral holds no Secret rights
outside `svc-system`, so a project of `local` has none. Reads go to the management cluster's
API on each request: no API server keeps secret data in memory between requests
(`services.projectsecrets`). What a response shows is in `services.secrets`: never the data.
"""

from __future__ import annotations

from corral.apiserver.resources import handlers, secretfamilies
from corral.apiserver.services import projectsecrets

FAMILY = secretfamilies.family(projectsecrets, "secrets", namespaced=False)
SCHEMA = FAMILY.schema
routes = handlers.routes(FAMILY)
