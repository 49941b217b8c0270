"""Which characters a `/v3` text may hold (docs/security.md, "Characters").

Three rules, from the widest to the narrowest:

- every string of every body, keys included (`unstorable`): no lone surrogate (U+D800 to U+DFFF,
  which JSON's `\\ud800` escape can spell but UTF-8 cannot encode, so nothing could store it)
  and no NUL (U+0000, which C-based consumers such as terminals and drivers read as the end);
- names and display names (`check_name`): besides, no control character (Unicode's Cc: C0,
  DEL, C1; a name is one line) and no bidirectional formatting character, which make a name
  read differently from what it is (`abc\\u202etxt.exe`);
- descriptions (`check_description`): the same, but tabs and line breaks are text there.

Texts that legitimately hold any character (secret data, annotations, scripts, commands, PEM
blocks) keep the first rule only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from corral.core.errors import Invalid

# Explicit direction marks, embeddings, overrides and isolates (Unicode's Bidi_Control).
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# Cc is U+0000 to U+001F and U+007F to U+009F; U+2028/U+2029 break lines as well.
_NAME_REFUSED = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029{BIDI_CONTROLS}]")
_DESCRIPTION_REFUSED = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{BIDI_CONTROLS}]")


class TextError(Invalid):
    pass


def describe(char: str) -> str:
    """A refused character as a client can recognise it, never the character itself."""
    return f"U+{ord(char):04X}"


def unstorable(value: Any) -> tuple[str, str] | None:
    """The first string in a parsed JSON value holding a lone surrogate or NUL, or the first
    number JSON cannot hold (NaN, an infinity, or a literal too large for a float), as (its
    path, `""` for a key of the top level, and what it holds, described); None when there is
    none. Walked
    without recursion."""
    for path, leaf in _leaves(value, ""):
        if isinstance(leaf, float):
            if not math.isfinite(leaf):
                return path, f"{leaf}, which is no JSON number"
        elif found := _UNSTORABLE.search(leaf):
            return path, f"{describe(found.group())}, which no text of the API may hold"
    return None


def _leaves(value: Any, path: str) -> Iterator[tuple[str, str | float]]:
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str | float):
            yield where, item
        elif isinstance(item, dict):
            for key, child in item.items():
                # A key is named by its parent's path: the key itself may be what is refused.
                yield where, key
                stack.append((child, f"{where}.{key}" if where else key))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(item))


def check_name(value: str, field: str) -> str:
    """A name or display name: one line, no bidirectional formatting."""
    if found := _NAME_REFUSED.search(value):
        raise TextError(
            f"{field} must not hold control or bidirectional formatting characters "
            f"(found {describe(found.group())})",
            field,
        )
    return value


def check_description(value: str, field: str) -> str:
    """A description: text of several lines, without other control or bidirectional
    formatting characters."""
    if found := _DESCRIPTION_REFUSED.search(value):
        raise TextError(
            f"{field} must not hold control characters other than tabs and line breaks, nor "
            f"bidirectional formatting characters (found {describe(found.group())})",
            field,
        )
    return value
