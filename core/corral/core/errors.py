"""What can go wrong, in the terms of the domain. A core module's errors are (subclasses of)
these six kinds, so callers need no per-module translation. (Token authentication keeps its
own outcomes, `auth.tokens.AuthFailure`: the interface fixes a status for each.)

No HTTP here: the API server maps each kind to its `/v3` body in one place
(`corral.apiserver.http.errors`). `field` names the `/v3` field at fault, `code` the `/v3` code
where one more precise than the kind's own applies ("NotUnique", "QuotaExceeded", …).
"""

from __future__ import annotations

# The code of a body field that is no field of what the body is for (docs/api.md, "Request
# bodies"); a value that is not acceptable is `InvalidFormat` or more precise.
UNKNOWN_FIELD = "InvalidBodyContent"


class CorralError(Exception):
    def __init__(self, message: str, field: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.code = code


class Invalid(CorralError, ValueError):
    """The input is not acceptable as given."""


class NotFound(CorralError):
    """What the input names does not exist."""


class Conflict(CorralError):
    """The input is fine but collides with what exists (a name taken, a version moved on)."""


class Forbidden(CorralError):
    """The caller may not do this."""


class Unavailable(CorralError):
    """A downstream cluster or the management cluster did not answer."""


class Unsupported(CorralError):
    """The operation does not apply to this object at all (removing the local cluster)."""


def invalid(field: str, message: str, code: str = "InvalidFormat") -> Invalid:
    """`field` is not acceptable; `code` says how (`InvalidOption`, `InvalidReference`, …)."""
    return Invalid(message, field, code)


def missing(field: str) -> Invalid:
    return Invalid(f"{field} is required", field, "MissingRequired")


def unknown(field: str, where: str) -> Invalid:
    """A body gives `field`, which `where` does not have: refused, never ignored, so that no
    request succeeds while doing less than it asked (a misspelt field, one corral lacks)."""
    return Invalid(f"{field} is not a field of {where}", field, UNKNOWN_FIELD)


def not_found(message: str) -> NotFound:
    return NotFound(message)


def forbidden(message: str) -> Forbidden:
    return Forbidden(message)


def conflict(message: str) -> Conflict:
    return Conflict(message, code="AlreadyExists")
