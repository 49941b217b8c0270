"""Read-modify-writes that other writers' changes do not break (docs/api.md, "Concurrent
writes").

A change decided from an object is written as a JSON patch guarded by `test` operations on
the values it was decided from (`jsonpatch.test`), not on the object's resourceVersion: the
operator's status writes, and other fields' updates, move the resourceVersion all the time,
and a write at a resourceVersion would lose to them however often it were retried. When a
guard fails (someone changed what the change depends on), the object is read again and the
change decided again, until it lands or a deadline passes; a change that is refused on the
new object (422, 409 of its own) is refused then, having written nothing.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from lightkube import ApiError, AsyncClient
from lightkube.types import PatchType

from corral.core import jsonpatch
from corral.core.errors import Conflict, NotFound
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj

# How long a change is decided again while what it depends on keeps changing: long enough to
# outlast any burst of other writes, short enough to answer within a client's timeout (30 s is
# common).
DEADLINE = 20.0

# The operations of a change decided from an object: empty when there is nothing to write.
Decide = Callable[[Obj], Awaitable[list[jsonpatch.Operation]]]
GENERATION: jsonpatch.Path = ("metadata", "generation")


async def read(kube: AsyncClient, kind: Any, name: str, namespace: str | None = None) -> Obj:
    """The object as stored now; NotFound when it is gone."""
    try:
        return as_dict(await kube.get(kind, name, namespace=namespace))
    except ApiError as exc:
        if exc.status.code == 404:
            where = f"{namespace}/{name}" if namespace else name
            raise NotFound(f"{kind.__name__.lower()} {where} not found") from None
        raise


async def patch(
    kube: AsyncClient,
    kind: Any,
    name: str,
    decide: Decide,
    reads: Iterable[jsonpatch.Path],
    *,
    namespace: str | None = None,
    current: Obj | None = None,
    deadline: float = DEADLINE,
    field_manager: str | None = None,
) -> Obj:
    """The object with `decide(obj)`'s operations written, on condition that the values at
    `reads` are still `obj`'s; `obj` is `current` (say, from a cache) or read fresh, and read
    again each time a guard fails. The object as written, or as read when there was nothing to
    write. Conflict when what the change depends on kept changing until `deadline` seconds."""
    paths = list(reads)
    obj = current if current is not None else await read(kube, kind, name, namespace)
    ends = time.monotonic() + deadline
    while True:
        operations = await decide(obj)
        if not operations:
            return obj
        guards = jsonpatch.tests(obj, paths)
        try:
            written = await kube.patch(
                kind, name, [*guards, *operations], namespace=namespace,
                patch_type=PatchType.JSON, field_manager=field_manager,
            )  # fmt: skip
        except ApiError as exc:
            if not _not_applied(exc):
                raise
            if time.monotonic() > ends:
                raise Conflict(
                    f"{kind.__name__.lower()} {name} kept changing for {deadline:.0f} s while "
                    "this change was decided on it; try again",
                    code="Conflict",
                ) from None
            obj = await read(kube, kind, name, namespace)
            continue
        return as_dict(written)


def _not_applied(exc: ApiError) -> bool:
    """Whether kube-apiserver refused the patch as one that does not apply to the object as
    stored (a `test` that failed, or an operation on a member gone since the read): a 422
    with no causes. A value the schema refuses is a 422 naming its field, and is the answer.

    Whether a guard failed cannot be told by comparing the guards with a fresh read: the
    object may have changed and changed back (a reservation added and removed, and kopf's
    annotation recording each) between the refusal and the read."""
    status = exc.status
    return status.code == 422 and not (status.details and status.details.causes)
