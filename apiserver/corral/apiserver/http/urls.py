"""The /v3 route patterns."""

from __future__ import annotations


def v3(plural: str, rest: str = "") -> str:
    """A /v3 route whose type name matches in any case (`globalRoleBindings` as well)."""
    return f"/v3/{{type:(?i:{plural})}}{rest}"
