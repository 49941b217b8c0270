"""corral's token for a hosted control plane: a token of its service account from the
TokenRequest API (`corral.core.kube.agent`), which the apiserver issues itself as soon as it
serves, instead of the legacy token Secret that the controller manager fills in seconds later.

Such a token expires, so the provisioner asks for a new one, with the control plane's bootstrap
administrator, once less than RENEW_BEFORE of its lifetime is left. It is signed with the
service-account key, which no certificate rotation replaces, and names the service account's
uid, which an etcd restore brings back as it was: neither ends it.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import json

LIFETIME = datetime.timedelta(days=365)
# As the control plane's certificates (`corral.core.provisioning.pki`).
RENEW_BEFORE = datetime.timedelta(days=30)


def expires(token: str) -> datetime.datetime | None:
    """When the token expires, read from its `exp` claim; None when it has none (a legacy
    token, which never expires) or is not a JWT. Read, not verified: it is corral's own token,
    and the apiserver is what verifies it."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return None
    exp = payload.get("exp") if isinstance(payload, dict) else None
    if not isinstance(exp, int) or isinstance(exp, bool):
        return None
    return datetime.datetime.fromtimestamp(exp, datetime.UTC)


def renewal_due(token: str | None, now: datetime.datetime) -> bool:
    """Whether a new token is owed: this one expires within RENEW_BEFORE of `now`."""
    if token is None:
        return False
    expiry = expires(token)
    return expiry is not None and expiry - now < RENEW_BEFORE
