"""Node templates and cloud credentials, their pure rules (docs/api.md "Node templates" and
"Cloud credentials").

A driver's schema (`status.schema` of its NodeDriver) splits its fields in two: a template's
`<driver>Config` holds the plain ones, a cloud credential's `<driver>credentialConfig` the
`secret` ones, which are kept only in a Secret. A credential's Secret holds one key per field,
its value the field's JSON (so an int stays an int on its way to the driver).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from corral.core.auth import ownership
from corral.core.drivers import schema as driver_schema
from corral.core.errors import Invalid

CONFIG_SUFFIX = "Config"
CREDENTIAL_SUFFIX = "credentialConfig"


def config_field(driver: str) -> str:
    return f"{driver}{CONFIG_SUFFIX}"


def credential_field(driver: str) -> str:
    return f"{driver}{CREDENTIAL_SUFFIX}"


def names_config(key: str) -> bool:
    """Whether a body key is a template's `<driver>Config` (the driver is judged later)."""
    return driver_in({key: None}, CONFIG_SUFFIX) is not None


def names_credential(key: str) -> bool:
    """Whether a body key is a credential's `<driver>credentialConfig`."""
    return driver_in({key: None}, CREDENTIAL_SUFFIX) is not None


def driver_in(body: Mapping[str, Any], suffix: str) -> str | None:
    """The driver a body names by its one `<driver><suffix>` key (Rancher's way of naming a
    template's or a credential's driver); None without one, Invalid with several."""
    found = [k[: -len(suffix)] for k in body if k.endswith(suffix) and len(k) > len(suffix)]
    # `credentialConfig` ends with `Config` too: a template's config is never a credential's.
    if suffix == CONFIG_SUFFIX:
        found = [d for d in found if not d.endswith(CREDENTIAL_SUFFIX[: -len(suffix)])]
    if len(found) > 1:
        names = ", ".join(sorted(f + suffix for f in found))
        raise Invalid(
            f"only one driver's configuration may be given, not {names}", found[1] + suffix
        )
    return found[0] if found else None


def _split(schema: Mapping[str, Any], secret: bool) -> dict[str, Any]:
    fields: Mapping[str, Any] = schema.get("fields") or {}
    return {"fields": {n: f for n, f in fields.items() if bool(f.get("secret")) is secret}}


def check_config(schema: Mapping[str, Any], config: Any, field: str) -> dict[str, Any]:
    """A template's `<driver>Config` checked against the driver's plain fields, defaults
    filled; a secret field belongs to a cloud credential and is refused naming itself."""
    secrets = _split(schema, True)["fields"]
    if isinstance(config, Mapping):
        for name in config:
            if name in secrets:
                raise Invalid(f"{field}.{name} is secret: set it in a cloud credential "
                              "(cloudCredentialName)", f"{field}.{name}")  # fmt: skip
    return driver_schema.check_config(_split(schema, False), config, field)


def check_credential(
    schema: Mapping[str, Any], given: Any, field: str, current: Mapping[str, Any]
) -> dict[str, Any]:
    """A credential's fields after `given` is applied to `current`: each given field replaces
    its value, a null one removes it. Only the driver's secret fields, each of its type;
    required ones are checked where a template uses the credential (`missing`)."""
    if not isinstance(given, Mapping):
        raise Invalid(f"{field} must be an object", field)
    secrets: Mapping[str, Any] = _split(schema, True)["fields"]
    merged = dict(current)
    for name, value in given.items():
        if name not in secrets:
            raise Invalid(f"{field}.{name} is not a secret field of this driver",
                          f"{field}.{name}")  # fmt: skip
        if value is None:
            merged.pop(name, None)
            continue
        try:
            merged[name] = driver_schema.typed(name, secrets[name]["type"], value)
        except Invalid as exc:
            raise Invalid(f"{field}.{exc.message}", f"{field}.{name}") from None
    return merged


def missing(schema: Mapping[str, Any], credential_fields: Iterable[str]) -> list[str]:
    """The driver's required secret fields a credential does not set, sorted."""
    have = set(credential_fields)
    fields: Mapping[str, Any] = _split(schema, True)["fields"]
    return sorted(n for n, f in fields.items() if f.get("required") and n not in have)


def encode(values: Mapping[str, Any]) -> dict[str, str]:
    """A credential's fields as a Secret's `data`."""
    return {k: base64.b64encode(json.dumps(v).encode()).decode() for k, v in values.items()}


def decode(data: Mapping[str, str] | None) -> dict[str, Any]:
    """A Secret's `data` back into a credential's fields."""
    return {k: json.loads(base64.b64decode(v)) for k, v in (data or {}).items()}


@dataclass(frozen=True)
class MachineInputs:
    """What a driver is given for every machine of a template (docs/drivers.md): `config`
    and `credential` of its stdin message, and the taints every node of the template gets."""

    driver: str
    config: dict[str, Any]
    credential: dict[str, Any]
    taints: list[dict[str, str]]


def machine_inputs(
    template: Mapping[str, Any],
    credential: Mapping[str, Any] | None,
    secret_data: Mapping[str, str] | None,
) -> MachineInputs:
    """A template's inputs to its driver, with its credential's fields (decoded from the
    credential's Secret). Invalid when the template names a credential that is gone or that
    is of another driver or another owner, which its API refuses but time may bring about."""
    spec = template.get("spec") or {}
    driver, wanted = spec["driver"], spec.get("cloudCredentialName") or ""
    fields: dict[str, Any] = {}
    if wanted:
        if credential is None or secret_data is None:
            raise Invalid(f"cloud credential {wanted} is gone", "cloudCredentialName")
        if (credential.get("spec") or {}).get("driver") != driver:
            raise Invalid(f"cloud credential {wanted} is not of driver {driver}",
                          "cloudCredentialName")  # fmt: skip
        if ownership.owner_of(credential) != ownership.owner_of(template):
            raise Invalid(f"cloud credential {wanted} belongs to another user",
                          "cloudCredentialName")  # fmt: skip
        fields = decode(secret_data)
    return MachineInputs(
        driver=driver,
        config=dict(spec.get("config") or {}),
        credential=fields,
        taints=list(spec.get("nodeTaints") or []),
    )
