"""Getting a driver's executable into the cache: from `http`/`https` with aiohttp (bounded in
size and time, redirects followed only within the same scheme) or from a local `file`, checked
against the driver's checksum while it streams in. A failure is a `DownloadFailed` carrying the
reason the driver's `Downloaded` condition shows.

A `file` url is read only when, symbolic links and `..` resolved, it names a regular file below
the directory of driver files the operator is configured with (`CORRAL_DRIVER_FILE_DIR`): the
operator may run as root, and what it reads it caches and runs."""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import aiohttp
from yarl import URL

from corral.core.api import condition_types as ct
from corral.core.drivers import source
from corral.core.errors import Invalid
from corral.operator.drivers.cache import CHUNK, Cache

MAX_BYTES = 256 * 1024 * 1024
TIMEOUT = 120.0
MAX_REDIRECTS = 5


class DownloadFailed(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Fetched:
    path: Path
    digest: str  # sha256, the cache key


@dataclass(frozen=True)
class Limits:
    max_bytes: int = MAX_BYTES
    timeout: float = TIMEOUT


class _Sink:
    """Where the bytes go: the staged file, the sha256 and the checksum's own algorithm."""

    def __init__(self, out: BinaryIO, checksum: str, url: str, max_bytes: int) -> None:
        self.out, self.url, self.max_bytes = out, url, max_bytes
        self.size = 0
        self.sha256 = hashlib.sha256()
        self.check = source.hasher(checksum)

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise self.too_large()
        self.sha256.update(chunk)
        if self.check is not None:
            self.check.update(chunk)
        self.out.write(chunk)

    def too_large(self) -> DownloadFailed:
        return DownloadFailed(
            ct.REASON_TOO_LARGE, f"{self.url} is larger than {self.max_bytes} bytes"
        )


def check_source(url: str, checksum: str, files: str | None) -> None:
    """DownloadFailed unless the driver may be fetched from `url`: its form, its checksum's,
    and for a file url its place, below `files` (None refuses every file url)."""
    try:
        source.check_url(url)
        source.algorithm(checksum)
        if urlsplit(url).scheme == "file":
            resolved(url, files)
    except Invalid as exc:
        raise DownloadFailed(ct.REASON_INVALID_URL, exc.message) from None


def resolved(url: str, files: str | None) -> Path:
    """The file a file url names, symbolic links resolved; Invalid unless below `files`."""
    root = os.path.realpath(files) if files else None
    return Path(source.check_file(os.path.realpath(source.file_path(url)), root))


async def fetch(
    url: str, checksum: str, cache: Cache, limits: Limits = Limits(), files: str | None = None
) -> Fetched:
    """Download `url` into the cache and check it; the cached file, or DownloadFailed. File
    urls are read only below `files`."""
    check_source(url, checksum, files)
    try:
        fd, staged = cache.staging()
    except OSError as exc:
        raise DownloadFailed(
            ct.REASON_CACHE_FAILED, f"cannot write the driver cache {cache.directory}: {exc}"
        ) from None
    try:
        with os.fdopen(fd, "wb") as out:
            sink = _Sink(out, checksum, url, limits.max_bytes)
            try:
                async with asyncio.timeout(limits.timeout):
                    if urlsplit(url).scheme == "file":
                        await asyncio.to_thread(_read_file, url, files, sink)
                    else:
                        await _get(url, sink, limits)
            except TimeoutError:
                raise DownloadFailed(
                    ct.REASON_UNREACHABLE, f"{url}: no complete answer in {limits.timeout:g}s"
                ) from None
        if sink.check is not None and not source.matches(checksum, sink.check.hexdigest()):
            raise DownloadFailed(
                ct.REASON_CHECKSUM_MISMATCH,
                f"{url}: {sink.check.name} is {sink.check.hexdigest()}, "
                f"the checksum says {checksum.strip().lower()}",
            )
        digest = sink.sha256.hexdigest()
        return Fetched(cache.keep(staged, digest), digest)
    finally:
        staged.unlink(missing_ok=True)


async def _get(url: str, sink: _Sink, limits: Limits) -> None:
    timeout = aiohttp.ClientTimeout(total=None, connect=min(limits.timeout, 10))
    target = URL(url)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for _ in range(MAX_REDIRECTS + 1):
            try:
                async with session.get(target, allow_redirects=False) as response:
                    if response.status in (301, 302, 303, 307, 308):
                        location = response.headers.get("Location", "")
                        following = target.join(URL(location))
                        if following.scheme != target.scheme:
                            raise DownloadFailed(ct.REASON_HTTP_ERROR, (
                                f"{url} redirects to {following.scheme or 'no'} scheme; "
                                f"only {target.scheme} redirects are followed"
                            ))  # fmt: skip
                        target = following
                        continue
                    if response.status >= 400:
                        raise DownloadFailed(ct.REASON_HTTP_ERROR,
                                             f"GET {target}: {response.status} "
                                             f"{response.reason or ''}".strip())  # fmt: skip
                    if (response.content_length or 0) > sink.max_bytes:
                        raise sink.too_large()  # said up front: not worth reading
                    async for chunk in response.content.iter_chunked(CHUNK):
                        sink.write(chunk)
                    return
            except aiohttp.ClientError as exc:
                raise DownloadFailed(
                    ct.REASON_UNREACHABLE, f"GET {target}: {exc or type(exc).__name__}"
                ) from None
        raise DownloadFailed(ct.REASON_HTTP_ERROR, f"{url}: more than {MAX_REDIRECTS} redirects")


def _read_file(url: str, files: str | None, sink: _Sink) -> None:
    try:
        # Resolved again here, next to the read: the check before may be a while ago.
        path = resolved(url, files)
    except Invalid as exc:
        raise DownloadFailed(ct.REASON_INVALID_URL, exc.message) from None
    try:
        # Not following a link swapped in since, nor waiting on a FIFO's writer.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise DownloadFailed(ct.REASON_UNREACHABLE, f"{url}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise DownloadFailed(ct.REASON_INVALID_URL, f"{url} is not a regular file")
    with os.fdopen(fd, "rb") as file:
        try:
            while chunk := file.read(CHUNK):
                sink.write(chunk)
        except OSError as exc:
            raise DownloadFailed(ct.REASON_UNREACHABLE, f"{url}: {exc.strerror or exc}") from None
