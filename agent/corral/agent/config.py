"""The agent's configuration, read once from the environment (docs/design/cluster-agent.md,
section 4). The credential is a secret: never logged, never in a repr."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from corral.core.tunnel import handshake

_CHECKSUM = re.compile(r"[0-9a-f]{64}")


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class AgentConfig:
    url: str  # corral's external URL, https://host[:port]
    cluster: str
    credential: str = field(repr=False)  # the value alone; the cluster is `cluster`
    # sha256 (hex) of corral's CA as /cacerts serves it: fetched and pinned when given.
    ca_checksum: str = ""
    insecure: bool = False  # no verification of corral's certificate (`insecureCommand`)
    image: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> AgentConfig:
        url = env.get("CORRAL_URL", "").rstrip("/")
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname or parts.path:
            raise ConfigError(f"CORRAL_URL must be https://host[:port], not {url!r}")
        cluster = env.get("CORRAL_CLUSTER", "")
        value = env.get("CORRAL_AGENT_CREDENTIAL", "")
        if handshake.presented(f"Bearer {cluster}:{value}") is None:
            raise ConfigError("CORRAL_CLUSTER and CORRAL_AGENT_CREDENTIAL must be a cluster id "
                              "and its agent credential")  # fmt: skip
        checksum = env.get("CORRAL_CA_CHECKSUM", "")
        if checksum and not _CHECKSUM.fullmatch(checksum):
            raise ConfigError("CORRAL_CA_CHECKSUM must be a sha256 in lower-case hex")
        insecure = env.get("CORRAL_INSECURE", "") == "true"
        return cls(url=url, cluster=cluster, credential=value, ca_checksum=checksum,
                   insecure=insecure, image=env.get("CORRAL_AGENT_IMAGE", ""))  # fmt: skip

    def authorization(self) -> str:
        return "Bearer " + handshake.credential(self.cluster, self.credential)
