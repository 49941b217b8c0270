"""One HTTP session per downstream cluster, kept while its credential stays the same. A
session reaches its cluster's server only and sends the credential per request
(`Credential.session`), so sharing one across callers cannot carry it anywhere else."""

from __future__ import annotations

import aiohttp

from corral.core.clusters.credential import Credential


class SessionPool:
    def __init__(self) -> None:
        self._sessions: dict[str, tuple[Credential, aiohttp.ClientSession]] = {}

    def get(self, cluster: str, credential: Credential) -> aiohttp.ClientSession:
        known = self._sessions.get(cluster)
        if known is not None and known[0] == credential and not known[1].closed:
            return known[1]
        session = credential.session(timeout=None)
        self._sessions[cluster] = (credential, session)
        return session

    async def close(self) -> None:
        for _, session in self._sessions.values():
            await session.close()
        self._sessions.clear()
