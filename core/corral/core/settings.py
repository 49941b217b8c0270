"""The settings corral reads, with their defaults.

Each is a cluster-scoped `Setting` in management.svc.io/v3 whose `value`, when not empty,
overrides its `default`. The operator creates missing ones at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class SettingDef:
    name: str
    default: str
    description: str


CATALOG: dict[str, SettingDef] = {
    s.name: s
    for s in [
        SettingDef("auth-token-max-ttl-minutes", "0",
                   "Maximum lifetime of session and API tokens; 0 means unlimited."),
        SettingDef("auth-user-session-ttl-minutes", "960",
                   "Lifetime of a session token created at login."),
        SettingDef("auth-user-session-idle-ttl-minutes", "0",
                   "A session token unused for this long expires; 0 disables the check."),
        SettingDef("kubeconfig-default-token-ttl-minutes", "960",
                   "Lifetime of a kubeconfig token unless the request says otherwise."),
        SettingDef("api-rate-limit-per-minute", "100",
                   "Requests per minute each user may make; 0 disables the limit."),
        SettingDef("token-purge-interval-minutes", "60",
                   "How often the operator deletes expired tokens."),
    ]
}  # fmt: skip


class SettingValueError(ValueError):
    pass


def effective(name: str, stored: Mapping[str, Mapping[str, str]]) -> str:
    """The value in force: the Setting's value, else its default, else the catalog's."""
    setting = stored.get(name, {})
    return setting.get("value") or setting.get("default") or CATALOG[name].default


def as_number(name: str, text: str) -> float:
    try:
        number = float(text)
    except ValueError:
        raise SettingValueError(f"setting {name} must be a number, not {text!r}") from None
    if number < 0:
        raise SettingValueError(f"setting {name} must not be negative")
    return number
