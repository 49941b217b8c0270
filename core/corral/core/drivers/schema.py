"""What a driver says its `<driver>Config` holds: its answer to `schema` (docs/drivers.md),
checked and bounded before the operator records it in the NodeDriver's status, and the check
of a node template's config against it.

A schema is `{"fields": {<name>: {"type", "description", "default", "required", "secret"}}}`
with the types `string`, `int`, `boolean`, `array[string]` and `quantity` (an amount of a
resource, held to `corral.core.quantity.amount` as every quantity of the API is); a `secret`
field is write-only (it goes to the driver, never back to a client).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from corral.core import quantity
from corral.core.errors import Invalid, unknown

TYPES = ("string", "int", "boolean", "array[string]", "quantity")
MAX_FIELDS = 128
MAX_TEXT = 4096
MAX_ITEMS = 256
# A field's name is a JSON key in `<driver>Config`, camelCase as the interface's fields are.
FIELD_NAME = re.compile(r"[a-z][A-Za-z0-9]{0,62}")

# The builtin `kwok` driver: a machine is a simulated node with this capacity.
KWOK = {
    "fields": {
        "cpu": {"type": "quantity", "description": "CPU capacity",
                "default": "4", "required": False, "secret": False},
        "memory": {"type": "quantity", "description": "Memory capacity",
                   "default": "8Gi", "required": False, "secret": False},
        "pods": {"type": "quantity", "description": "How many pods the node takes",
                 "default": 110, "required": False, "secret": False},
    }
}  # fmt: skip


def parse(answer: Any) -> dict[str, Any]:
    """A driver's `schema` answer as stored: every field with all five keys. Invalid when the
    answer is not a schema (the driver is then not installed)."""
    if not isinstance(answer, Mapping) or not isinstance(answer.get("fields"), Mapping):
        raise Invalid("the schema answer must be an object with an object `fields`")
    fields = answer["fields"]
    if len(fields) > MAX_FIELDS:
        raise Invalid(f"the schema has {len(fields)} fields; at most {MAX_FIELDS}")
    parsed: dict[str, Any] = {}
    for name, spec in fields.items():
        if not isinstance(name, str) or not FIELD_NAME.fullmatch(name):
            raise Invalid(f"schema field {str(name)[:64]!r} is not a camelCase name")
        if not isinstance(spec, Mapping) or spec.get("type") not in TYPES:
            raise Invalid(f"schema field {name} needs a type, one of {', '.join(TYPES)}")
        description = spec.get("description", "")
        if not isinstance(description, str) or len(description) > MAX_TEXT:
            raise Invalid(f"schema field {name}: description must be text")
        entry: dict[str, Any] = {"type": spec["type"], "description": description,
                                 "required": spec.get("required", False) is True,
                                 "secret": spec.get("secret", False) is True}  # fmt: skip
        if spec.get("default") is not None:
            entry["default"] = typed(name, spec["type"], spec["default"])
        parsed[name] = entry
    return {"fields": parsed}


def typed(name: str, kind: str, value: Any) -> Any:
    """`value` when it is of the field's type and within bounds; Invalid naming the field."""
    if kind == "quantity":
        quantity.amount(value, name)  # kept as given: `pods: 110` reads back as it was sent
        return value
    ok = {
        "string": isinstance(value, str) and len(value) <= MAX_TEXT,
        # bool is an int in Python, never in JSON.
        "int": isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**53,
        "boolean": isinstance(value, bool),
        "array[string]": isinstance(value, list)
        and len(value) <= MAX_ITEMS
        and all(isinstance(v, str) and len(v) <= MAX_TEXT for v in value),
    }[kind]
    if not ok:
        raise Invalid(f"{name} must be of type {kind}", field=name)
    return value


def check_config(schema: Mapping[str, Any], config: Any, field: str) -> dict[str, Any]:
    """A node template's `<driver>Config` (named `field`) checked against the driver's
    schema: unknown or ill-typed fields and missing required ones are Invalid naming the field;
    defaults fill what is not given."""
    if not isinstance(config, Mapping):
        raise Invalid(f"{field} must be an object", field=field)
    fields: Mapping[str, Any] = schema.get("fields") or {}
    for name in config:
        if name not in fields:
            raise unknown(f"{field}.{name}", "this driver")
    checked: dict[str, Any] = {}
    for name, spec in fields.items():
        if config.get(name) is not None:
            try:
                checked[name] = typed(name, spec["type"], config[name])
            except Invalid as exc:
                raise Invalid(f"{field}.{exc.message}", field=f"{field}.{name}") from None
        elif "default" in spec:
            checked[name] = spec["default"]
        elif spec.get("required"):
            raise Invalid(f"{field}.{name} is required", field=f"{field}.{name}",
                          code="MissingRequired")  # fmt: skip
    return checked
