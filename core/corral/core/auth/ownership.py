"""Objects that belong to the user who created them (node templates, cloud credentials): the
creator's id is in the annotation projects carry too, and only they and administrators see
the object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.core.api import names


def owner_of(obj: Mapping[str, Any]) -> str:
    annotations = obj["metadata"].get("annotations") or {}
    return str(annotations.get(names.ANNOTATION_CREATOR, ""))


def sees(obj: Mapping[str, Any], user_id: str, is_admin: bool) -> bool:
    return is_admin or (bool(user_id) and owner_of(obj) == user_id)
