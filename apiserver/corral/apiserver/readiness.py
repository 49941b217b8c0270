"""Readiness as a set of named gates that must all open before /readyz answers 200."""

from __future__ import annotations


class Readiness:
    def __init__(self) -> None:
        self._pending: set[str] = set()

    def gate(self, name: str) -> None:
        """Declare something that must happen before the server is ready."""
        self._pending.add(name)

    def open(self, name: str) -> None:
        self._pending.discard(name)

    @property
    def pending(self) -> list[str]:
        return sorted(self._pending)

    @property
    def ready(self) -> bool:
        return not self._pending
