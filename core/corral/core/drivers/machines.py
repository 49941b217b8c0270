"""What to ask a driver next about one machine, from the record of its creation on its Node CR
(docs/drivers.md, "Creating a machine"). The record is written before `create` is called, so
after a crash at any point the next pass knows whether `create` may have run."""

from __future__ import annotations

import enum
from collections.abc import Mapping

from corral.core.api import names


class Call(enum.Enum):
    CREATE = "create"  # never asked: write create-pending, then call `create`
    SETTLE = "settle"  # asked, answer unknown: `observe`; a machine there is the one asked for,
    # none means `create` never reached the backend, so it is asked again (idempotent by name)
    OBSERVE = "observe"  # created: follow it with `observe`


def next_call(annotations: Mapping[str, str]) -> Call:
    if annotations.get(names.ANNOTATION_CREATE_SUCCEEDED):
        return Call.OBSERVE
    if annotations.get(names.ANNOTATION_CREATE_PENDING):
        return Call.SETTLE
    return Call.CREATE
