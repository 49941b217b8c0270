"""Resource names: a type prefix plus random characters, as Rancher-style clients expect."""

from __future__ import annotations

import secrets

# No vowels (no accidental words) and no look-alikes (0/o, 1/l/i).
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def random_suffix(length: int = 5) -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(length))


def generate(prefix: str, length: int = 5) -> str:
    """`generate("token")` -> `token-x7k2p`."""
    return f"{prefix}-{random_suffix(length)}"
