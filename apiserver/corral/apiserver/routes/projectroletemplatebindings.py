"""`/v3/projectroletemplatebindings` (spec 2.10, 4.6): who has which role in a project: a
user (`userId`) or every member of a provider's group (`groupPrincipalId`).

A binding lives in its project's backing namespace; its id is `<namespace>:<name>`, the name
derived from subject and role (`roles.project_binding_name`), so one grant exists only once.
Project owners (and cluster owners, and administrators) grant and revoke; everyone with a role
in the project sees its bindings. The operator turns each into RoleBindings in every namespace
of the project downstream. Bindings are immutable: replace one to change it.
"""

from __future__ import annotations

from corral.apiserver.resources import handlers, rolebindings
from corral.apiserver.services.bindings import PROJECT

FAMILY = rolebindings.family(PROJECT)
SCHEMA = FAMILY.schema
SUBSCRIBABLE = rolebindings.subscribable(FAMILY, PROJECT, cache="project_bindings")
routes = handlers.routes(FAMILY)
