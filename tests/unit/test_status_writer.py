"""The status writer: what each controller applies to the status subresource, and when it
skips the write, with a fixed clock."""

from __future__ import annotations

import datetime
from typing import Any

from lightkube.types import PatchType

from corral.core.conditions import Condition
from corral.core.kube import kinds
from corral.core.kube.status import StatusWriter, holds, owned_status

EARLIER = "2026-01-01T00:00:00Z"
NOW = datetime.datetime(2026, 2, 3, 4, 5, 6, tzinfo=datetime.UTC)
STAMP = "2026-02-03T04:05:06Z"


def node(
    generation: int = 3, conditions: list[dict[str, Any]] | None = None, **status: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": "m-1", "namespace": "c-1", "generation": generation},
        "status": {"conditions": conditions or [], **status},
    }


def condition(type: str, status: str = "True", reason: str = "", **extra: Any) -> dict[str, Any]:
    return {"type": type, "status": status, "reason": reason, "message": "",
            "lastTransitionTime": EARLIER, "lastUpdateTime": EARLIER, **extra}  # fmt: skip


def managed(manager: str, fields: list[str], types: list[str]) -> dict[str, Any]:
    owned: dict[str, Any] = {f"f:{f}": {} for f in fields}
    if types:
        owned["f:conditions"] = {".": {}, **{f'k:{{"type":"{t}"}}': {} for t in types}}
    return {"manager": manager, "operation": "Apply", "subresource": "status",
            "fieldsV1": {"f:status": owned}}  # fmt: skip


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    async def patch(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.calls.append((args, kwargs))
        return {"metadata": {"name": args[1]}, "status": args[2]["status"]}


def test_only_the_managers_own_conditions_are_applied_stamped_with_the_generation() -> None:
    seen = node(conditions=[condition("Drained", reason="Done"), condition("Ready")])
    status = owned_status(seen, [Condition.of("Ready", False, "NotReady")], {}, NOW)
    assert status == {
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "NotReady", "message": "",
             "lastTransitionTime": STAMP, "lastUpdateTime": STAMP, "observedGeneration": 3}
        ]
    }  # fmt: skip


def test_a_condition_whose_status_holds_keeps_its_transition_time() -> None:
    seen = node(conditions=[condition("Ready", reason="KubeletReady")])
    status = owned_status(seen, [Condition.of("Ready", True, "KubeletReady")], {}, NOW)
    (ready,) = status["conditions"]
    assert (ready["lastTransitionTime"], ready["lastUpdateTime"]) == (EARLIER, EARLIER)
    moved = owned_status(seen, [Condition.of("Ready", True, "Other")], {}, NOW)["conditions"][0]
    assert (moved["lastTransitionTime"], moved["lastUpdateTime"]) == (EARLIER, STAMP)


def test_fields_are_applied_as_given_and_no_conditions_means_no_condition_list() -> None:
    assert owned_status(node(), [], {"nodeName": "n-1"}, NOW) == {"nodeName": "n-1"}


def test_a_write_is_skipped_only_when_the_manager_already_holds_exactly_that() -> None:
    ready = condition("Ready", reason="KubeletReady", observedGeneration=3)
    seen = node(conditions=[ready, condition("Drained")], nodeName="n-1")
    seen["metadata"]["managedFields"] = [
        managed("corral-drain", [], ["Drained"]),
        managed("corral-node-mirror", ["nodeName"], ["Ready"]),
    ]
    status = owned_status(seen, [Condition.of("Ready", True, "KubeletReady")],
                          {"nodeName": "n-1"}, NOW)  # fmt: skip
    assert holds(seen, "corral-node-mirror", status)
    assert not holds(seen, "corral-drain", status)  # owns other things
    assert not holds(seen, "corral-node-mirror", {**status, "nodeName": "n-2"})
    assert not holds(seen, "corral-node-mirror", {"conditions": status["conditions"]})
    seen["metadata"]["generation"] = 4  # a new generation is observed: written again
    assert not holds(
        seen, "corral-node-mirror",
        owned_status(seen, [Condition.of("Ready", True, "KubeletReady")], {"nodeName": "n-1"},
                     NOW),
    )  # fmt: skip
    del seen["metadata"]["managedFields"]
    assert not holds(seen, "corral-node-mirror", status)


async def test_the_writer_applies_its_part_to_the_status_subresource_with_force() -> None:
    client = Recorder()
    writer = StatusWriter(client, "corral-drain", lambda: NOW)  # type: ignore[arg-type]
    seen = node(conditions=[condition("Ready")])
    written = await writer.apply(
        kinds.Node, "m-1", "c-1", seen=seen,
        conditions=[Condition.of("Drained", True, "Drained")], fields={"drainRequest": "r-1"},
    )  # fmt: skip
    ((args, kwargs),) = client.calls
    assert args[0] is kinds.Node.Status and args[1] == "m-1"
    assert args[2] == {
        "apiVersion": "management.svc.io/v3",
        "kind": "Node",
        "metadata": {"name": "m-1", "namespace": "c-1"},
        "status": {
            "drainRequest": "r-1",
            "conditions": [
                {"type": "Drained", "status": "True", "reason": "Drained", "message": "",
                 "lastTransitionTime": STAMP, "lastUpdateTime": STAMP, "observedGeneration": 3}
            ],
        },
    }  # fmt: skip
    assert kwargs == {"namespace": "c-1", "patch_type": PatchType.APPLY,
                      "field_manager": "corral-drain", "force": True}  # fmt: skip
    assert written is not None and written["status"] == args[2]["status"]


async def test_the_writer_does_not_write_what_is_there_already() -> None:
    client = Recorder()
    writer = StatusWriter(client, "corral-cluster-health", lambda: NOW)  # type: ignore[arg-type]
    seen = {
        "metadata": {"name": "c-1", "generation": 2,
                     "managedFields": [managed("corral-cluster-health", ["nodeCount"], [])]},
        "status": {"nodeCount": 3},
    }  # fmt: skip
    assert await writer.apply(kinds.Cluster, "c-1", seen=seen, fields={"nodeCount": 3}) is None
    assert client.calls == []
    await writer.apply(kinds.Cluster, "c-1", seen=seen, fields={"nodeCount": 4})
    ((args, kwargs),) = client.calls
    assert args[2]["metadata"] == {"name": "c-1"} and kwargs["namespace"] is None
