"""Resource names: a type prefix plus random characters, as Rancher-style clients expect, or
characters derived from what the object stands for, where only one such object may exist."""

from __future__ import annotations

import hashlib
import secrets

# No vowels (no accidental words) and no look-alikes (0/o, 1/l/i).
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


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
