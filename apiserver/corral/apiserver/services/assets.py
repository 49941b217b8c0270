"""The files real machines download from corral itself (`/assets/<file>`, docs/api.md): public
binaries, like Rancher's `/assets`, so nobody is asked who they are."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

from corral.apiserver.deps import Deps
from corral.core.errors import not_found
from corral.core.provisioning import catalog


async def find(held: Deps, name: str) -> Path:
    """The regular file `name` directly in the asset directory (CORRAL_NODE_ASSET_DIR). The
    name is a catalog file name (no `/`, no leading `.`) and a symlink is not followed, so
    nothing outside the directory is ever reached."""
    if held.node_assets is None or catalog.ASSET_FILE.fullmatch(name) is None:
        raise not_found(f"no asset {name!r}")
    path = held.node_assets / name
    try:
        # The directory may be on a slow disk: never stat on the event loop.
        mode = (await asyncio.to_thread(path.lstat)).st_mode
    except OSError:
        raise not_found(f"no asset {name!r}") from None
    if not stat.S_ISREG(mode):
        raise not_found(f"no asset {name!r}")
    return path
