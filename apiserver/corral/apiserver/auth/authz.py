"""What a caller may do. Admins (global role `admin`) may do everything. Other users act on
their own objects, and on clusters and projects as their role bindings say:

- a cluster role binding makes a user `cluster-owner` (administer the cluster, its nodes and
  every project in it) or `cluster-member` (see the cluster and its nodes, create projects);
- a project role binding makes a user `project-owner` (administer the project and its
  bindings), `project-member` (manage its namespaces) or `read-only`;
- anyone bound to a project in a cluster can see that cluster, not its other projects.

An object the caller may not even see is answered 404, never 403, so that its existence does
not leak; 403 is for what they can see but not change.
"""

from __future__ import annotations

from typing import NamedTuple

from corral.apiserver.auth.access import Access
from corral.apiserver.auth.authn import Principal
from corral.core import errors
from corral.core.kube.impersonation import Impersonation


class Caller(NamedTuple):
    """Who calls and what they may reach: what every service is given instead of the request
    (a named tuple: one is made per request)."""

    principal: Principal
    access: Access

    @property
    def user_id(self) -> str:
        return self.principal.user_id

    @property
    def is_admin(self) -> bool:
        return self.principal.is_admin

    @property
    def groups(self) -> tuple[str, ...]:
        return self.principal.groups

    def downstream(self) -> Impersonation:
        return self.principal.downstream()


def require_admin(who: Principal | Caller, what: str) -> None:
    """For objects the caller can see but not change (or collections it cannot write)."""
    if not who.is_admin:
        raise errors.forbidden(f"only administrators may {what}")
