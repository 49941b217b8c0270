"""What a NodeDriver's conditions say, as pure functions of what one reconcile pass observed
(docs/conditions.md), and the `/v3` state they add up to.

`Downloaded`: the executable is in the cache and matches the checksum. `Installed`: it answered
`schema`. `Ready`: machines may use the driver now: active, downloaded and installed (a builtin
driver needs only to be active).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.core import conditions
from corral.core.api import condition_types as ct
from corral.core.conditions import Condition


@dataclass(frozen=True)
class Outcome:
    """How one step (getting the executable, asking it for its schema) went."""

    ok: bool
    reason: str
    message: str = ""


@dataclass(frozen=True)
class Observed:
    builtin: bool
    active: bool
    # None when the step was not tried: not needed (builtin) or not allowed (inactive).
    download: Outcome | None = None
    install: Outcome | None = None


def downloaded(o: Observed) -> Condition:
    if o.builtin:
        return Condition(ct.DOWNLOADED, "True", ct.REASON_BUILTIN, "built into corral")
    if o.download is None:
        return Condition(ct.DOWNLOADED, "Unknown", ct.REASON_INACTIVE,
                         "a driver is downloaded only while it is active")  # fmt: skip
    return Condition.of(ct.DOWNLOADED, o.download.ok, o.download.reason, o.download.message)


def installed(o: Observed) -> Condition:
    if o.builtin:
        return Condition(ct.INSTALLED, "True", ct.REASON_BUILTIN, "built into corral")
    if o.download is not None and not o.download.ok:
        return Condition(ct.INSTALLED, "False", ct.REASON_NOT_DOWNLOADED,
                         "the executable is not downloaded, so it was not run")  # fmt: skip
    if o.install is None:
        return Condition(ct.INSTALLED, "Unknown", ct.REASON_INACTIVE,
                         "a driver is run only while it is active")  # fmt: skip
    return Condition.of(ct.INSTALLED, o.install.ok, o.install.reason, o.install.message)


def ready(o: Observed, got: Condition, ran: Condition) -> Condition:
    if not o.active:
        return Condition(ct.READY, "False", ct.REASON_INACTIVE,
                         "the driver is deactivated: no new machines")  # fmt: skip
    for step in (got, ran):
        if step.status != "True":
            return Condition(ct.READY, "False" if step.status == "False" else "Unknown",
                             step.reason, step.message)  # fmt: skip
    if o.builtin:
        return Condition(ct.READY, "True", ct.REASON_BUILTIN, "")
    return Condition(ct.READY, "True", ct.REASON_READY, "")


def compute(o: Observed) -> list[Condition]:
    """Every condition type of a NodeDriver, in `ct.NODE_DRIVER_TYPES` order."""
    got, ran = downloaded(o), installed(o)
    return [got, ran, ready(o, got, ran)]


def usable(driver: Mapping[str, Any]) -> bool:
    """Whether machines may be made with this driver now: active, and Ready as observed for
    its current generation (a changed url is not usable until it is downloaded again)."""
    spec, status = driver.get("spec") or {}, driver.get("status") or {}
    ready_now = conditions.find(status.get("conditions") or [], ct.READY) or {}
    return (
        spec.get("active") is True
        and ready_now.get("status") == "True"
        and ready_now.get("observedGeneration") == driver["metadata"].get("generation")
    )


# What everyone but administrators reads instead of why a driver is not ready: how a download
# of an administrator's url failed tells whether something listens there, and the digest of
# a file url is a fingerprint of the file.
WITHHELD = "not ready; administrators see why"


def for_everyone(driver: Mapping[str, Any]) -> dict[str, Any]:
    """The driver as a user who is no administrator sees it: its status holds the schema
    (templates are written from it) and whether it is Ready, nothing of the steps before,
    nor the digest."""
    status = driver.get("status") or {}
    shown: dict[str, Any] = {}
    if "schema" in status:
        shown["schema"] = status["schema"]
    found = conditions.find(status.get("conditions") or [], ct.READY)
    if found is not None:
        ready_now = found.get("status") == "True"
        shown["conditions"] = [{
            **found,
            "reason": found.get("reason") if ready_now else ct.REASON_NOT_READY,
            "message": "" if ready_now else WITHHELD,
        }]  # fmt: skip
    return {**driver, "status": shown}


def state(driver: Mapping[str, Any]) -> tuple[str, str, str]:
    """The `/v3` state, transitioning and transitioningMessage."""
    spec, status = driver.get("spec") or {}, driver.get("status") or {}
    if driver["metadata"].get("deletionTimestamp"):
        return "removing", "yes", ""
    if not spec.get("active"):
        return "inactive", "no", ""
    if usable(driver):
        return "active", "no", ""
    found = conditions.find(status.get("conditions") or [], ct.READY) or {}
    current = found.get("observedGeneration") == driver["metadata"].get("generation")
    if current and found.get("status") == "False":
        return "error", "error", str(found.get("message", ""))
    return "activating", "yes", "downloading and checking the driver"
