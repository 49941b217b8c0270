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

from aiohttp import web

from corral.apiserver.auth.access import Access
from corral.apiserver.auth.authn import Principal, principal
from corral.apiserver.keys import ACCESS, STORES
from corral.core import errors


def require_admin(who: Principal, what: str) -> None:
    """For objects the caller can see but not change (or collections it cannot write)."""
    if not who.is_admin:
        raise errors.forbidden(f"only administrators may {what}")


def access(request: web.Request) -> Access:
    """The caller's access to clusters and projects."""
    who = principal(request)
    return request.app[ACCESS].get(who.user_id, who.is_admin, request.app[STORES])
