"""Readiness as a set of named gates that must all open before /readyz answers 200."""

from __future__ import annotations

import asyncio


class Readiness:
    def __init__(self) -> None:
        self._pending: set[str] = set()
        self._ready = asyncio.Event()

    def gate(self, name: str) -> None:
        """Declare something that must happen before the server is ready."""
        self._pending.add(name)
        self._ready.clear()

    def open(self, name: str) -> None:
        self._pending.discard(name)
        if not self._pending:
            self._ready.set()

    async def wait(self) -> None:
        """Until every gate declared is open."""
        await self._ready.wait()

    @property
    def pending(self) -> list[str]:
        return sorted(self._pending)

    @property
    def ready(self) -> bool:
        return not self._pending
