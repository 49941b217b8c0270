"""What a caller may do. Admins (global role `admin`) may do everything; other users act on
their own objects. An object the caller may not even see is answered 404, never 403, so that
its existence does not leak."""

from __future__ import annotations

from corral.apiserver import errors
from corral.apiserver.authn import Principal


def require_admin(who: Principal, what: str) -> None:
    """For objects the caller can see but not change (or collections it cannot write)."""
    if not who.is_admin:
        raise errors.forbidden(f"only administrators may {what}")
