"""Feature flags, from CORRAL_FEATURES (`Name=true,Other=false`)."""

from __future__ import annotations

from corral.core.errors import Invalid

DEFAULTS = {
    # Store new token keys as salted SHA3-512 hashes rather than as the key itself.
    "TokenHashing": True,
}


class FeatureError(Invalid):
    pass


def parse(text: str) -> dict[str, bool]:
    flags = dict(DEFAULTS)
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        if name not in DEFAULTS or value.lower() not in ("true", "false"):
            raise FeatureError(f"unknown feature setting {item!r}; known: {', '.join(DEFAULTS)}")
        flags[name] = value.lower() == "true"
    return flags
