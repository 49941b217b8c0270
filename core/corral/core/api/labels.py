"""Labels and annotations as Kubernetes takes them (`IsQualifiedName`, `IsValidLabelValue`,
`ValidateAnnotations`), and which keys are corral's own.

What a client gives corral to write onto an object (a secret's labels, a pool's node labels, a
taint's key) is checked here before anything is written, so that no cluster refuses later what
corral accepted. A key under corral's domains (`management.svc.io/`, `field.svc.io/`, …) is
corral's alone: a client may neither set it nor see it. The keys corral writes are in `names`.
"""

from __future__ import annotations

import re
from typing import Any

from corral.core.api.ids import MAX_SUBDOMAIN, is_dns_subdomain
from corral.core.errors import Invalid

# The name part of a key, and a label value.
MAX_NAME = 63
NAME_RULE = (
    f"at most {MAX_NAME} characters: letters, digits, '-', '_' or '.', "
    "starting and ending with a letter or digit"
)
# All annotations of an object together, keys and values.
MAX_ANNOTATIONS_SIZE = 256 * 1024
_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)


def is_name(text: str) -> bool:
    """A key's name part, or a label value that is not empty."""
    return len(text) <= MAX_NAME and _NAME.fullmatch(text) is not None


def key_problem(key: str) -> str | None:
    """Why `key` is not a qualified name, or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "the prefix before '/' must not be empty"
    if prefix and not is_dns_subdomain(prefix):
        return (
            f"the prefix must be a DNS subdomain of at most {MAX_SUBDOMAIN} characters "
            "(lower-case letters, digits, '-' and '.')"
        )
    if not is_name(name):
        return f"the name must be {NAME_RULE}"
    return None


def is_reserved(key: str) -> bool:
    """Keys under corral's domains (`management.svc.io/`, `field.svc.io/`, …)."""
    prefix, slash, _ = key.rpartition("/")
    return bool(slash) and (prefix == "svc.io" or prefix.endswith(".svc.io"))


def string_map(value: Any, what: str) -> dict[str, str]:
    """A map of text to text, as labels, annotations and a Secret's data are; None is empty."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise Invalid(f"{what} must be a map of text to text", what)
    return dict(value)


def user_labels(value: Any) -> dict[str, str]:
    """The labels a client asks for, none of them corral's own."""
    labels = string_map(value, "labels")
    for key, text in labels.items():
        _check_key(key, "labels")
        if text and not is_name(text):
            raise Invalid(
                f"labels: the value of {key} must be empty or at most {MAX_NAME} "
                "letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
                "labels",
            )
    return labels


def user_annotations(value: Any) -> dict[str, str]:
    """The annotations a client asks for, none of them corral's own."""
    annotations = string_map(value, "annotations")
    size = 0
    for key, text in annotations.items():
        _check_key(key, "annotations")
        size += len(key) + len(text)
    if size > MAX_ANNOTATIONS_SIZE:
        raise Invalid(f"annotations are larger than {MAX_ANNOTATIONS_SIZE} bytes", "annotations")
    return annotations


def _check_key(key: str, what: str) -> None:
    if problem := key_problem(key):
        raise Invalid(f"{what}: {key[:64]!r}: {problem}", what)
    if is_reserved(key):
        raise Invalid(f"{what}: {key} is corral's own", what)
