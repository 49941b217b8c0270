"""The settings corral reads, with their defaults and the values each accepts.

Each is a cluster-scoped `Setting` in management.svc.io/v3 whose `value`, when not empty,
overrides its `default`. The operator creates missing ones at start-up.

Most settings are numbers written in plain decimal (`960`, `0.5`): no sign, exponent, `nan`
or `inf`, and within the setting's bounds. A few are documents (the version catalog, JSON),
each checked by its own parser. The API refuses anything else; a bad value stored another way
(kubectl) is read as the default, so one typo cannot lock everyone out.

The catalog stands above the rules whose documents and bounds it names (the version catalog
of `core/provisioning/`, a workload's largest scale), not in the vocabulary, which they use.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from corral.core.errors import Invalid
from corral.core.provisioning import catalog
from corral.core.workloads import spec as workloads

# 100 Julian years: far beyond any useful lifetime or interval, and small enough that
# "now plus this" stays inside what a datetime (year 9999) can hold.
MAX_MINUTES = 100 * 525_960
MAX_RATE_PER_MINUTE = 1_000_000

_DECIMAL = re.compile(r"[0-9]{1,15}(\.[0-9]{1,9})?", re.ASCII)
_WHOLE = re.compile(r"[0-9]{1,15}", re.ASCII)
# The longest value or default a Setting holds (its CRD says the same).
MAX_VALUE = 16 * 1024


# The autoscaler's knobs (docs/provisioning.md "Autoscaling"), upstream's defaults.
SCALE_DOWN_UTILIZATION_SETTING = "autoscaler-scale-down-utilization-threshold"
SCALE_DOWN_UNNEEDED_SETTING = "autoscaler-scale-down-unneeded-seconds"
SCALE_DOWN_DELAY_AFTER_ADD_SETTING = "autoscaler-scale-down-delay-after-add-seconds"
MAX_EMPTY_BULK_DELETE_SETTING = "autoscaler-max-empty-bulk-delete"
# A week: longer waits are a scale-down turned off, which a threshold of 0 says plainly.
MAX_AUTOSCALER_SECONDS = 7 * 24 * 3600
# A pool's largest quantity (the NodePool CRD's bound).
MAX_BULK_DELETE = 1000

WORKLOAD_MAX_SCALE_SETTING = "workload-max-scale"
STORAGE_CLASS_SETTING = "hosted-control-plane-storage-class"
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", re.ASCII)


# Whether S3 endpoints and OpenID Connect issuers may be link-local or metadata addresses
# (core/api/addresses.py): only where such a service really is one, by an administrator's word.
LINK_LOCAL_SETTING = "allow-link-local-endpoints"
_FLAGS = ("true", "false")


def _flag(text: str) -> str:
    if text not in _FLAGS:
        raise Invalid("the value must be true or false", "value")
    return text


def _storage_class(text: str) -> str:
    if text and not _DNS_SUBDOMAIN.fullmatch(text):
        raise Invalid(f"setting {STORAGE_CLASS_SETTING} must name a StorageClass", "value")
    return text


@dataclass(frozen=True)
class SettingDef:
    name: str
    default: str
    description: str
    maximum: float = 0
    minimum: float = 0
    whole: bool = False  # a count: no fraction
    # A document setting: what checks its text (raising Invalid); None for a number.
    parse: Callable[[str], object] | None = None

    def describe_bounds(self) -> str:
        kind = "a whole number" if self.whole else "a decimal number"
        return f"{kind} from {self.minimum:.10g} to {self.maximum:.10g}"


CATALOG: dict[str, SettingDef] = {
    s.name: s
    for s in [
        SettingDef("auth-token-max-ttl-minutes", "0",
                   "Maximum lifetime of session and API tokens; 0 means unlimited.",
                   MAX_MINUTES),
        SettingDef("auth-user-session-ttl-minutes", "960",
                   "Lifetime of a session token created at login.", MAX_MINUTES),
        SettingDef("auth-user-session-idle-ttl-minutes", "0",
                   "A session token unused for this long expires; 0 disables the check.",
                   MAX_MINUTES),
        SettingDef("kubeconfig-default-token-ttl-minutes", "960",
                   "Lifetime of a kubeconfig token unless the request says otherwise.",
                   MAX_MINUTES),
        SettingDef("api-rate-limit-per-minute", "100",
                   "Requests per minute each user may make; 0 disables the limit.",
                   MAX_RATE_PER_MINUTE, whole=True),
        # Not 0: the purge would list every token on each two-second tick.
        SettingDef("token-purge-interval-minutes", "60",
                   "How often the operator deletes expired tokens.", MAX_MINUTES, minimum=0.01),
        # Not 0 either: each pass asks the identity provider once per user it signed in.
        SettingDef("auth-group-sync-interval-minutes", "60",
                   "How often the operator refreshes the groups of users who signed in "
                   "through OpenID Connect.", MAX_MINUTES, minimum=0.01),
        SettingDef(SCALE_DOWN_UTILIZATION_SETTING, "0.5",
                   "The autoscaler removes a node of a pool with bounds only while its pods "
                   "request less than this share of its cpu and of its memory; 0 turns "
                   "scale-down off.", 1),
        SettingDef(SCALE_DOWN_UNNEEDED_SETTING, "600",
                   "How long a node must stay unneeded before the autoscaler removes it.",
                   MAX_AUTOSCALER_SECONDS, whole=True),
        SettingDef(SCALE_DOWN_DELAY_AFTER_ADD_SETTING, "600",
                   "How long after a scale-up the autoscaler removes no node of the cluster.",
                   MAX_AUTOSCALER_SECONDS, whole=True),
        SettingDef(MAX_EMPTY_BULK_DELETE_SETTING, "10",
                   "How many empty nodes the autoscaler removes from a cluster at once (nodes "
                   "with pods to move go one at a time).", MAX_BULK_DELETE, minimum=1,
                   whole=True),
        SettingDef(WORKLOAD_MAX_SCALE_SETTING, "1000",
                   "The largest scale a workload may be given through the API (each replica "
                   "is a pod the cluster stores).", workloads.MAX_SCALE, whole=True),
        SettingDef(catalog.SETTING, catalog.DEFAULT,
                   "The Kubernetes versions rke2 and k3s clusters may run, with the image and "
                   "command of each control-plane component (JSON).", parse=catalog.parse),
        SettingDef(STORAGE_CLASS_SETTING, "",
                   "The StorageClass of hosted control planes' etcd and backup volumes; empty "
                   "means the management cluster's default.", parse=_storage_class),
        SettingDef(LINK_LOCAL_SETTING, "false",
                   "Whether S3 endpoints of etcd backups and OpenID Connect issuers may be "
                   "link-local addresses (169.254.0.0/16, fe80::/10) or cloud metadata "
                   "services (true or false).", parse=_flag),
    ]
}  # fmt: skip


class SettingValueError(Invalid):
    """A value the setting does not accept, given as a Setting's `value`."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "value")


def check(name: str, text: str) -> None:
    """SettingValueError when `text` is not a value the catalog setting `name` accepts."""
    parse = CATALOG[name].parse
    if parse is None:
        as_number(name, text)
        return
    try:
        parse(text)
    except Invalid as exc:
        raise SettingValueError(exc.message) from None


def document(name: str, stored: Mapping[str, Any] | None) -> str:
    """The text in force of a document setting: its stored value when it parses, else its
    default (as for numbers, a bad value written with kubectl never locks anyone out)."""
    definition = CATALOG[name]
    assert definition.parse is not None, f"{name} is a number"
    for text in ((stored or {}).get("value"), definition.default):
        if isinstance(text, str) and text:
            try:
                definition.parse(text)
            except Invalid:
                continue
            return text
    return definition.default


def enabled(name: str, stored: Mapping[str, Any] | None) -> bool:
    """The value in force of a true/false setting; a bad stored value reads as its default."""
    return document(name, stored) == "true"


def as_number(name: str, text: str) -> float:
    """The value of a catalog setting written as `text`; SettingValueError when it is not one
    the setting accepts."""
    definition = CATALOG[name]
    syntax = _WHOLE if definition.whole else _DECIMAL
    # Stored objects reach here untyped (kopf bodies, watch caches): check, never assume.
    number = float(text) if isinstance(text, str) and syntax.fullmatch(text) else math.nan
    if not definition.minimum <= number <= definition.maximum:
        raise SettingValueError(f"setting {name} must be {definition.describe_bounds()}")
    return number


def number(name: str, stored: Mapping[str, Any] | None) -> float:
    """The value in force of a catalog setting, given its stored object (or None): its value,
    else its default, else the catalog's. A bad stored value (written with kubectl) gives the
    catalog's default instead of an error."""
    text = (stored or {}).get("value") or (stored or {}).get("default") or CATALOG[name].default
    try:
        return as_number(name, text)
    except SettingValueError:
        return as_number(name, CATALOG[name].default)
