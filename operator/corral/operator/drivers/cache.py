"""The driver cache: verified executables in one directory, each named by its sha256 digest.

A file is only ever put there whole (written beside it, then renamed in), read-only to its
owner, and checked against its name again before each use: a cache entry changed on disk is
dropped, never run.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import tempfile
from pathlib import Path

CHUNK = 1024 * 1024
_DIGEST = re.compile(r"[0-9a-f]{64}")


class Cache:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path_of(self, digest: str) -> Path:
        if not _DIGEST.fullmatch(digest):
            raise ValueError(f"not a sha256 digest: {digest[:80]!r}")
        return self.directory / digest

    def staging(self) -> tuple[int, Path]:
        """A new file to download into, in the cache directory so that `keep` is a rename."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, name = tempfile.mkstemp(prefix=".download-", dir=self.directory)
        return fd, Path(name)

    def keep(self, staged: Path, digest: str) -> Path:
        """Move a downloaded file whose sha256 is `digest` into the cache."""
        target = self.path_of(digest)
        staged.chmod(0o500)
        staged.replace(target)
        return target

    async def verified(self, digest: str) -> Path | None:
        """The cached executable of this digest when it is there and still has it; a file
        that does not is removed. Hashing runs in a thread: a driver may be large."""
        path = self.path_of(digest)
        if not await asyncio.to_thread(_has_digest, path, digest):
            path.unlink(missing_ok=True)
            return None
        return path


def _has_digest(path: Path, digest: str) -> bool:
    try:
        with path.open("rb") as file:
            return hashlib.file_digest(file, "sha256").hexdigest() == digest
    except FileNotFoundError:
        return False
