"""Node drivers: while a driver is active its executable is downloaded, checked against its
checksum, kept in the driver cache by its sha256 digest and asked for its `schema`; the
outcome is the driver's conditions (`corral.core.drivers.status`), written by the field
manager `corral-nodedrivers` alone. A driver that failed any step is not `Ready`, and nothing
makes machines with it. Deactivating leaves the cached file: activating again only re-checks it.

Level-triggered: the same pass runs on create, update, resume and on a timer, which re-checks
the cache and tries failed downloads again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import kopf
from lightkube import ApiError, AsyncClient

from corral.core import conditions
from corral.core.api import condition_types as ct
from corral.core.api import names
from corral.core.drivers import schema as driver_schema
from corral.core.drivers import status as driver_status
from corral.core.drivers.status import Observed, Outcome
from corral.core.errors import Invalid, Unavailable
from corral.core.kube import kinds
from corral.core.kube.status import Clock, StatusWriter
from corral.operator.drivers.cache import Cache
from corral.operator.drivers.download import DownloadFailed, Limits, check_source, fetch
from corral.operator.drivers.executable import ExecutableDriver

log = logging.getLogger(__name__)

FIELD_MANAGER = "corral-nodedrivers"
RECHECK_INTERVAL = 300.0
# What builtin drivers' `<name>Config` holds: declared here, as no executable answers for them.
BUILTIN_SCHEMAS: dict[str, dict[str, Any]] = {names.KWOK_DRIVER: driver_schema.KWOK}


class DriverKeeper:
    def __init__(
        self,
        kube: AsyncClient,
        cache: Cache,
        clock: Clock,
        limits: Limits | None = None,
        files: str | None = None,
    ) -> None:
        self.cache = cache
        self.limits = limits or Limits()
        # The directory file urls may read below (CORRAL_DRIVER_FILE_DIR); None refuses them.
        self.files = files
        self._writer = StatusWriter(kube, FIELD_MANAGER, clock)
        self._locks: dict[str, asyncio.Lock] = {}

    async def reconcile(self, driver: Mapping[str, Any]) -> None:
        """One pass over one driver; passes over the same driver never overlap."""
        name = driver["metadata"]["name"]
        async with self._locks.setdefault(name, asyncio.Lock()):
            observed, fields = await self._observe(name, driver)
            try:
                await self._writer.apply(kinds.NodeDriver, name, seen=dict(driver),
                                         conditions=driver_status.compute(observed),
                                         fields=fields)  # fmt: skip
            except ApiError as exc:
                if exc.status.code != 404:  # deleted meanwhile
                    raise

    async def _observe(
        self, name: str, driver: Mapping[str, Any]
    ) -> tuple[Observed, dict[str, Any]]:
        spec, status = driver.get("spec") or {}, driver.get("status") or {}
        active = spec.get("active") is True
        if spec.get("builtin"):
            known = BUILTIN_SCHEMAS.get(name)
            return Observed(builtin=True, active=active), ({"schema": known} if known else {})
        url, checksum = spec.get("url", ""), spec.get("checksum", "")
        applied = (status.get("appliedURL"), status.get("appliedChecksum")) == (url, checksum)
        digest = str(status.get("digest") or "") if applied else ""
        path = await self.cache.verified(digest) if digest else None
        schema = status.get("schema") if path is not None else None
        if not active:
            # Not fetched nor run while inactive; what is cached and recorded still counts.
            if path is None:
                return Observed(builtin=False, active=False), {}
            return (
                Observed(False, False, _cached(digest), _read(schema) if schema else None),
                _fields(url, checksum, digest, schema),
            )
        download = _cached(digest)
        try:
            # A url refused now is refused with its cached file too (a CR written by kubectl,
            # or a file url from before the operator was given a directory of them).
            check_source(url, checksum, self.files)
            if path is None:
                fetched = await fetch(url, checksum, self.cache, self.limits, self.files)
                path, digest, schema = fetched.path, fetched.digest, None
                download = Outcome(True, ct.REASON_DOWNLOADED, f"sha256 {digest}")
        except DownloadFailed as exc:
            log.warning("node driver %s not downloaded: %s", name, exc.message)
            return Observed(False, True, Outcome(False, exc.reason, exc.message)), {}
        if schema is None or not _was_installed(driver):
            try:
                schema = await ExecutableDriver(name, path).schema()
            except (Invalid, Unavailable) as exc:
                failed = Outcome(False, ct.REASON_SCHEMA_FAILED, exc.message)
                return Observed(False, True, download, failed), _fields(url, checksum, digest)
        fields = _fields(url, checksum, digest, schema)
        return Observed(False, True, download, _read(schema)), fields


def _cached(digest: str) -> Outcome:
    return Outcome(True, ct.REASON_CACHED, f"sha256 {digest}, verified in the cache")


def _read(schema: Mapping[str, Any]) -> Outcome:
    return Outcome(True, ct.REASON_SCHEMA_READ, f"{len(schema.get('fields') or {})} fields")


def _was_installed(driver: Mapping[str, Any]) -> bool:
    found = (driver.get("status") or {}).get("conditions") or []
    return conditions.is_true(found, ct.INSTALLED)


def _fields(
    url: str, checksum: str, digest: str, schema: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    fields: dict[str, Any] = {"appliedURL": url, "appliedChecksum": checksum, "digest": digest}
    if schema is not None:
        fields["schema"] = dict(schema)
    return fields


@kopf.on.resume(names.GROUP, names.VERSION, names.NODE_DRIVER.plural)
@kopf.on.create(names.GROUP, names.VERSION, names.NODE_DRIVER.plural)
@kopf.on.update(names.GROUP, names.VERSION, names.NODE_DRIVER.plural)
async def nodedriver_reconcile(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    keeper: DriverKeeper = memo.drivers
    await keeper.reconcile(body)


@kopf.timer(names.GROUP, names.VERSION, names.NODE_DRIVER.plural,
            interval=RECHECK_INTERVAL, initial_delay=RECHECK_INTERVAL)  # fmt: skip
async def nodedriver_recheck(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    keeper: DriverKeeper = memo.drivers
    await keeper.reconcile(body)
