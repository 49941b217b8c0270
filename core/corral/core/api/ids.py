"""Resource names and ids.

Names: a type prefix plus random characters, as Rancher-style clients expect, or characters
derived from what the object stands for, where only one such object may exist.

Ids: objects that live in a namespace are known to `/v3` as `<namespace>:<name>` — projects
and nodes as `<cluster>:<name>` (their namespace is their cluster's id), role template
bindings as `<namespace>:<name>`. `ScopedId` is the one place such ids are read and written.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.core.errors import Invalid

# No vowels (no accidental words) and no look-alikes (0/o, 1/l/i).
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

# Kubernetes' own rules (k8s.io/apimachinery/pkg/util/validation): a namespace is a DNS-1123
# label, the name of a custom resource a DNS-1123 subdomain.
MAX_LABEL = 63
MAX_SUBDOMAIN = 253
_LABEL_PATTERN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL = re.compile(_LABEL_PATTERN, re.ASCII)
_SUBDOMAIN = re.compile(rf"{_LABEL_PATTERN}(\.{_LABEL_PATTERN})*", re.ASCII)


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(length))


def generate(prefix: str, length: int = 5) -> str:
    """`generate("token")` -> `token-x7k2p`."""
    return f"{prefix}-{random_suffix(length)}"


def derived(prefix: str, *parts: str, length: int = 5) -> str:
    """`prefix-` and `length` characters of the alphabet from a hash of `parts` (which hold
    no `/`): the same parts give the same name, so Kubernetes refuses a second such object
    whoever creates it, where a check before creating could race."""
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    return f"{prefix}-{''.join(ALPHABET[b % len(ALPHABET)] for b in digest[:length])}"


def is_dns_label(text: str) -> bool:
    return len(text) <= MAX_LABEL and _LABEL.fullmatch(text) is not None


def is_dns_subdomain(text: str) -> bool:
    return len(text) <= MAX_SUBDOMAIN and _SUBDOMAIN.fullmatch(text) is not None


@dataclass(frozen=True)
class ScopedId:
    """`<namespace>:<name>`: the `/v3` id of an object that lives in a namespace."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}:{self.name}"

    @property
    def key(self) -> str:
        """`<namespace>/<name>`, as Kubernetes caches key namespaced objects."""
        return f"{self.namespace}/{self.name}"

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ScopedId:
        """The id of a stored object (Kubernetes has checked its names already)."""
        meta = obj["metadata"]
        return cls(meta["namespace"], meta["name"])

    @classmethod
    def parse(cls, text: object, field: str | None = None) -> ScopedId:
        """The id `text` writes; Invalid (naming `field`) when it is not one."""
        what = field or "an id"
        if not isinstance(text, str):
            raise Invalid(f"{what} must be text of the form <namespace>:<name>", field)
        namespace, colon, name = text.partition(":")
        if not colon:
            raise Invalid(f"{what} must be of the form <namespace>:<name>", field)
        if not is_dns_label(namespace):
            raise Invalid(
                f"the part of {what} before ':' must be a DNS label: at most {MAX_LABEL} "
                "lower-case letters, digits or '-', starting and ending with a letter or digit",
                field,
            )
        if not is_dns_subdomain(name):
            raise Invalid(
                f"the part of {what} after ':' must be a DNS subdomain: at most "
                f"{MAX_SUBDOMAIN} lower-case letters, digits, '-' or '.', starting and ending "
                "with a letter or digit",
                field,
            )
        return cls(namespace, name)

    @classmethod
    def parse_or_none(cls, text: object) -> ScopedId | None:
        """The id `text` writes, or None: for looking up, where no such id means no such
        object."""
        try:
            return cls.parse(text)
        except Invalid:
            return None
