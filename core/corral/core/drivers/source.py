"""Where a node driver's executable comes from and how it is checked: the `url` schemes
allowed and the checksum algorithm, chosen by the checksum's length as Rancher does.

A `file` url reads a file on the operator's host with the operator's rights, so it may name
only a file below the directory the operator is configured with (FILE_DIR_ENV);
without one, file urls are refused.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from corral.core.errors import Invalid

# Downloaded drivers come from these; `local` marks a builtin driver, which is never fetched.
SCHEMES = ("https", "http", "file")
BUILTIN_URL = "local://"
# The environment variable of the API server and the operator naming the directory `file`
# urls may read below; unset or empty, they are refused.
FILE_DIR_ENV = "CORRAL_DRIVER_FILE_DIR"
MAX_URL_LENGTH = 2048

# Hex digits of each algorithm's digest: the checksum's length says which one it is.
ALGORITHMS = {32: "md5", 40: "sha1", 64: "sha256", 128: "sha512"}
_HEX = re.compile(r"[0-9a-fA-F]*")


def algorithm(checksum: str) -> str | None:
    """The hashlib name of the algorithm `checksum` is in; None for the empty checksum (no
    check). Invalid (field `checksum`) for anything but hex of length 32, 40, 64 or 128."""
    value = checksum.strip()
    if not value:
        return None
    if not _HEX.fullmatch(value) or len(value) not in ALGORITHMS:
        lengths = ", ".join(f"{n} ({a})" for n, a in ALGORITHMS.items())
        raise Invalid(
            f"checksum must be empty or hexadecimal of length {lengths}; "
            f"got {len(value)} characters",
            field="checksum",
        )
    return ALGORITHMS[len(value)]


def hasher(checksum: str) -> hashlib._Hash | None:
    """A fresh hash object for `checksum`'s algorithm; None when nothing is checked."""
    name = algorithm(checksum)
    # md5 and sha1 identify a download here, nothing more: they come from the driver's author.
    return None if name is None else hashlib.new(name, usedforsecurity=False)


def matches(checksum: str, digest_hex: str) -> bool:
    """Whether a computed hex digest is the expected checksum (hex compares without case)."""
    return checksum.strip().lower() == digest_hex.lower()


def check_url(url: str) -> str:
    """`url` when a driver may be downloaded from it (https, http or file, with a host for
    http and https and a path for file); Invalid (field `url`) otherwise."""
    if not url:
        raise Invalid("url is required", field="url", code="MissingRequired")
    if len(url) > MAX_URL_LENGTH:
        raise Invalid(f"url must be at most {MAX_URL_LENGTH} characters", field="url")
    if any(c.isspace() or ord(c) < 32 for c in url):
        raise Invalid("url must not contain spaces or control characters", field="url")
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise Invalid(
            f"url must be {', '.join(s + '://' for s in SCHEMES)}; not {parts.scheme or 'none'}",
            field="url",
        )
    if parts.scheme == "file" and (parts.netloc not in ("", "localhost") or not parts.path):
        raise Invalid("a file url names a local path: file:///path/to/driver", field="url")
    if parts.scheme != "file" and not parts.hostname:
        raise Invalid("url has no host", field="url")
    try:
        port = parts.port  # ValueError beyond 65535 or when not a number
    except ValueError:
        port = 0
    if port == 0:
        raise Invalid("url's port must be a number from 1 to 65535", field="url")
    # Everyone may read drivers, urls included: a password in one would be shown to all.
    if "@" in parts.netloc:
        raise Invalid("url must carry no user or password", field="url")
    return url


def file_path(url: str) -> str:
    """The local path a `file` url names, `.` and `..` parts resolved lexically; Invalid
    when it holds a NUL (`%00`), which no path can."""
    path = unquote(urlsplit(url).path)
    if "\x00" in path:
        raise Invalid("a file url's path cannot hold NUL", field="url")
    return posixpath.normpath(path)


def check_file(path: str, directory: str | None) -> str:
    """`path` when it is below `directory` (both absolute, symbolic links already resolved by
    whoever can see the files); Invalid (field `url`) otherwise, and always without one."""
    if not directory:
        raise Invalid("file urls are refused: corral is configured with no directory of "
                      "driver files (CORRAL_DRIVER_FILE_DIR)", field="url")  # fmt: skip
    inside = PurePosixPath(posixpath.normpath(path))
    root = PurePosixPath(posixpath.normpath(directory))
    if not root.is_absolute() or inside == root or not inside.is_relative_to(root):
        raise Invalid(f"a file url must name a file below {directory}", field="url")
    return path
