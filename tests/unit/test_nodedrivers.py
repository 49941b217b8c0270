"""Node drivers without a cluster: the checksum's algorithm by its length, the url rules, the
conditions as pure functions, the driver schema, the cache, downloads, and the executable
driver adapter run against a real (test) driver executable."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from corral.core.api import condition_types as ct
from corral.core.api import names
from corral.core.conditions import Condition
from corral.core.drivers import machines, schema, source
from corral.core.drivers import status as ds
from corral.core.drivers.status import Observed, Outcome
from corral.core.drivers.templates import MachineInputs
from corral.core.errors import Invalid, Unavailable
from corral.operator.drivers import kwok, registry
from corral.operator.drivers.cache import Cache
from corral.operator.drivers.contract import JoinConfig, MachineRequest, Phase
from corral.operator.drivers.download import DownloadFailed, Limits, fetch
from corral.operator.drivers.executable import ExecutableDriver
from corral.operator.drivers.executable import Limits as RunLimits
from corral.operator.drivers.registry import Drivers

from .. import fake_driver
from .test_errors import kube_error

# -- checksums and urls ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("length", "name"), [(32, "md5"), (40, "sha1"), (64, "sha256"), (128, "sha512")]
)
def test_the_checksums_length_chooses_the_algorithm(length: int, name: str) -> None:
    assert source.algorithm("a" * length) == name
    assert source.algorithm("A" * length) == name
    assert source.hasher("0" * length).name == name  # type: ignore[union-attr]


def test_an_empty_checksum_checks_nothing() -> None:
    assert source.algorithm("") is None and source.hasher("  ") is None


@pytest.mark.parametrize("bad", ["a" * 31, "a" * 33, "a" * 63, "a" * 129, "g" * 64, "ab cd"])
def test_any_other_checksum_is_invalid_naming_the_field(bad: str) -> None:
    with pytest.raises(Invalid) as caught:
        source.algorithm(bad)
    assert caught.value.field == "checksum"


def test_a_digest_matches_its_checksum_in_any_case() -> None:
    digest = hashlib.sha256(b"x").hexdigest()
    assert source.matches(digest.upper() + " ", digest)
    assert not source.matches(digest, hashlib.sha256(b"y").hexdigest())


@pytest.mark.parametrize(
    "url",
    ["https://example.com/d", "http://127.0.0.1:8000/x/driver", "file:///opt/driver",
     "file://localhost/opt/driver", "https://example.com:1/d", "https://example.com:65535/d",
     "http://[::1]:8080/d"],
)  # fmt: skip
def test_https_http_and_file_urls_are_allowed(url: str) -> None:
    assert source.check_url(url) == url


@pytest.mark.parametrize(
    "url",
    ["ftp://example.com/d", "local://", "example.com/driver", "https:///nohost",
     "file://otherhost/opt/driver", "https://example.com/a b", "javascript:alert(1)",
     "https://e.com/" + "a" * 2048, "", "https://user:secret@example.com/d",
     "https://example.com:99999/d", "https://example.com:0/d", "https://example.com:65536/d",
     "http://example.com:port/d", "http://[::1]:70000/d"],
)  # fmt: skip
def test_every_other_url_is_invalid_naming_the_field(url: str) -> None:
    with pytest.raises(Invalid) as caught:
        source.check_url(url)
    assert caught.value.field == "url"


@pytest.mark.parametrize(
    ("url", "directory"),
    [("file:///srv/drivers/d", None), ("file:///srv/drivers/d", ""),
     ("file:///etc/shadow", "/srv/drivers"),
     ("file:///srv/drivers/../../etc/shadow", "/srv/drivers"),
     ("file:///srv/drivers/%2E%2E/x", "/srv/drivers"), ("file:///srv/drivers", "/srv/drivers"),
     ("file:///srv/drivers-other/d", "/srv/drivers"), ("file:///srv/drivers/d", "srv/drivers"),
     ("file:////srv/drivers/d", "/srv/drivers"), ("file:///srv/drivers/d%00x", "/srv/drivers")],
)  # fmt: skip
def test_a_file_url_names_a_file_below_the_configured_directory_or_nothing(
    url: str, directory: str | None
) -> None:
    with pytest.raises(Invalid) as caught:
        source.check_file(source.file_path(url), directory)
    assert caught.value.field == "url"


def test_a_file_below_the_directory_is_allowed() -> None:
    for url in ("file:///srv/drivers/d", "file://localhost/srv/drivers/a/../b/d",
                "file:///srv/drivers/./sub/d"):  # fmt: skip
        path = source.file_path(url)
        assert source.check_file(path, "/srv/drivers/") == path


# -- conditions ------------------------------------------------------------------------------


def kinds(conds: list[Condition]) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in conds}


def test_a_downloaded_and_installed_active_driver_is_ready() -> None:
    observed = Observed(False, True, Outcome(True, ct.REASON_DOWNLOADED, "sha256 x"),
                        Outcome(True, ct.REASON_SCHEMA_READ, "3 fields"))  # fmt: skip
    assert kinds(ds.compute(observed)) == {
        ct.DOWNLOADED: ("True", ct.REASON_DOWNLOADED),
        ct.INSTALLED: ("True", ct.REASON_SCHEMA_READ),
        ct.READY: ("True", ct.REASON_READY),
    }


@pytest.mark.parametrize(
    "reason",
    [ct.REASON_CHECKSUM_MISMATCH, ct.REASON_UNREACHABLE, ct.REASON_HTTP_ERROR,
     ct.REASON_TOO_LARGE, ct.REASON_INVALID_URL],
)  # fmt: skip
def test_a_failed_download_says_why_on_every_condition_and_nothing_runs(reason: str) -> None:
    observed = Observed(False, True, Outcome(False, reason, "what happened"))
    conds = ds.compute(observed)
    assert kinds(conds) == {
        ct.DOWNLOADED: ("False", reason),
        ct.INSTALLED: ("False", ct.REASON_NOT_DOWNLOADED),
        ct.READY: ("False", reason),
    }
    assert conds[2].message == "what happened"


def test_a_driver_that_does_not_answer_schema_is_downloaded_but_not_ready() -> None:
    observed = Observed(False, True, Outcome(True, ct.REASON_CACHED),
                        Outcome(False, ct.REASON_SCHEMA_FAILED, "exit status 1"))  # fmt: skip
    assert kinds(ds.compute(observed))[ct.READY] == ("False", ct.REASON_SCHEMA_FAILED)


def test_an_inactive_driver_is_not_ready_and_not_fetched() -> None:
    assert kinds(ds.compute(Observed(False, False))) == {
        ct.DOWNLOADED: ("Unknown", ct.REASON_INACTIVE),
        ct.INSTALLED: ("Unknown", ct.REASON_INACTIVE),
        ct.READY: ("False", ct.REASON_INACTIVE),
    }


def test_a_builtin_driver_needs_no_download_only_to_be_active() -> None:
    assert kinds(ds.compute(Observed(True, True)))[ct.READY] == ("True", ct.REASON_BUILTIN)
    assert kinds(ds.compute(Observed(True, False)))[ct.READY] == ("False", ct.REASON_INACTIVE)


def driver(active: bool, ready: str, observed: int, generation: int = 2) -> dict[str, Any]:
    return {
        "metadata": {"name": "d", "generation": generation},
        "spec": {"active": active},
        "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "R",
                                   "message": "m", "observedGeneration": observed}]},
    }  # fmt: skip


def test_usable_needs_active_and_ready_for_the_current_generation() -> None:
    assert ds.usable(driver(True, "True", 2))
    assert not ds.usable(driver(False, "True", 2))
    assert not ds.usable(driver(True, "True", 1))  # a new url is not checked yet
    assert not ds.usable(driver(True, "False", 2))


def test_the_v3_state_follows_the_conditions() -> None:
    assert ds.state(driver(True, "True", 2))[0] == "active"
    assert ds.state(driver(False, "True", 2))[0] == "inactive"
    assert ds.state(driver(True, "False", 2)) == ("error", "error", "m")
    assert ds.state(driver(True, "False", 1))[:2] == ("activating", "yes")


# -- the driver's schema ---------------------------------------------------------------------


def test_a_schema_answer_is_checked_and_completed() -> None:
    parsed = schema.parse({"fields": {"region": {"type": "string"},
                                      "size": {"type": "int", "default": 2}}})  # fmt: skip
    assert parsed["fields"]["region"] == {
        "type": "string", "description": "", "required": False, "secret": False
    }  # fmt: skip
    assert parsed["fields"]["size"]["default"] == 2


@pytest.mark.parametrize(
    "answer",
    [[], {"fields": []}, {"fields": {"Bad-Name": {"type": "string"}}},
     {"fields": {"a": {"type": "float"}}}, {"fields": {"a": {"type": "int", "default": "2"}}},
     {"fields": {f"f{i}": {"type": "string"} for i in range(129)}}],
)  # fmt: skip
def test_what_is_not_a_schema_is_invalid(answer: object) -> None:
    with pytest.raises(Invalid):
        schema.parse(answer)


def test_a_template_config_is_checked_against_the_schema_naming_the_field() -> None:
    fields = schema.parse({"fields": {"region": {"type": "string", "required": True},
                                      "size": {"type": "int", "default": 2}}})  # fmt: skip
    assert schema.check_config(fields, {"region": "eu"}, "fooConfig") == {"region": "eu", "size": 2}
    for config, field in [({"region": "eu", "zone": "a"}, "fooConfig.zone"),
                          ({"region": 3}, "fooConfig.region"),
                          ({"region": "eu", "size": True}, "fooConfig.size"),
                          ({}, "fooConfig.region")]:  # fmt: skip
        with pytest.raises(Invalid) as caught:
            schema.check_config(fields, config, "fooConfig")
        assert caught.value.field == field


def test_the_kwok_schema_is_a_schema() -> None:
    assert schema.parse(schema.KWOK) == schema.KWOK


# -- cache and download ----------------------------------------------------------------------


async def test_the_cache_drops_a_file_changed_on_disk(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    fetched = await fetch(f"file://{write_driver(tmp_path)}", "", cache, files=str(tmp_path))
    assert await cache.verified(fetched.digest) == fetched.path
    fetched.path.chmod(0o700)
    fetched.path.write_bytes(b"#!/bin/sh\necho tampered\n")
    assert await cache.verified(fetched.digest) is None
    assert not fetched.path.exists()


def write_driver(tmp_path: Path, variant: str = "") -> Path:
    return fake_driver.write(tmp_path / "corral-driver-fake", tmp_path / "state", variant)


@pytest.mark.parametrize("algorithm", ["md5", "sha1", "sha256", "sha512"])
async def test_a_file_download_is_checked_with_the_checksums_algorithm(
    tmp_path: Path, algorithm: str
) -> None:
    path = write_driver(tmp_path)
    checksum = hashlib.new(algorithm, path.read_bytes()).hexdigest()
    cache = Cache(tmp_path / "cache")
    fetched = await fetch(path.as_uri(), checksum.upper(), cache, files=str(tmp_path))
    assert fetched.digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert fetched.path == tmp_path / "cache" / fetched.digest
    assert fetched.path.read_bytes() == path.read_bytes()
    with pytest.raises(DownloadFailed) as caught:
        await fetch(path.as_uri(), "0" * len(checksum), cache, files=str(tmp_path))
    assert caught.value.reason == ct.REASON_CHECKSUM_MISMATCH
    assert algorithm in caught.value.message and checksum in caught.value.message


async def test_download_failures_say_why_and_leave_nothing_behind(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    cases = [
        ((tmp_path / "missing").as_uri(), ct.REASON_UNREACHABLE),
        ("ftp://example.com/driver", ct.REASON_INVALID_URL),
        ("http://127.0.0.1:9/driver", ct.REASON_UNREACHABLE),  # the discard port: refused
    ]
    for url, reason in cases:
        with pytest.raises(DownloadFailed) as caught:
            await fetch(url, "", cache, files=str(tmp_path))
        assert caught.value.reason == reason, caught.value.message
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(DownloadFailed) as caught:
        await fetch(big.as_uri(), "", cache, Limits(max_bytes=1024), str(tmp_path))
    assert caught.value.reason == ct.REASON_TOO_LARGE
    assert list((tmp_path / "cache").iterdir()) == []
    with pytest.raises(DownloadFailed) as caught:
        # The cache under a file: it cannot be made.
        await fetch(big.as_uri(), "", Cache(big / "drivers"), files=str(tmp_path))
    assert caught.value.reason == ct.REASON_CACHE_FAILED


async def test_a_file_is_read_only_below_the_directory_links_resolved(tmp_path: Path) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    secret = write_driver(outside)
    (allowed / "link").symlink_to(secret)
    (allowed / "dir-link").symlink_to(outside, target_is_directory=True)
    cache = Cache(tmp_path / "cache")
    refused = [
        (secret.as_uri(), str(allowed)),
        (secret.as_uri(), None),  # no directory: every file url
        ((allowed / "link").as_uri(), str(allowed)),
        (f"file://{allowed}/dir-link/{secret.name}", str(allowed)),
        (f"file://{allowed}/../outside/{secret.name}", str(allowed)),
    ]
    for url, files in refused:
        with pytest.raises(DownloadFailed) as caught:
            await fetch(url, "", cache, files=files)
        assert caught.value.reason == ct.REASON_INVALID_URL, url
    assert not (tmp_path / "cache").exists()  # refused before anything was written
    inside = write_driver(allowed)
    assert (await fetch(inside.as_uri(), "", cache, files=str(allowed))).path.exists()


async def test_only_regular_files_are_read(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    os.mkfifo(tmp_path / "fifo")  # opening it to read would wait for a writer
    for name in ("sub", "fifo"):
        with pytest.raises(DownloadFailed) as caught:
            await fetch((tmp_path / name).as_uri(), "", Cache(tmp_path / "cache"),
                        files=str(tmp_path))  # fmt: skip
        assert caught.value.reason == ct.REASON_INVALID_URL


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[str]:
    """A small HTTP server: /driver, a 404, a redirect within http and one to another scheme,
    a body larger than it says up front, one that never ends."""
    body = write_driver(tmp_path).read_bytes()

    async def driver(_: web.Request) -> web.StreamResponse:
        return web.Response(body=body)

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        while True:
            await response.write(b"x" * 65536)

    async def moved(_: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/driver")

    async def elsewhere(_: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("file:///etc/passwd")

    app = web.Application()
    app.router.add_get("/driver", driver)
    app.router.add_get("/moved", moved)
    app.router.add_get("/elsewhere", elsewhere)
    app.router.add_get("/endless", endless)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_an_http_download_follows_redirects_within_its_scheme_only(
    server: str, tmp_path: Path
) -> None:
    cache = Cache(tmp_path / "cache")
    expected = hashlib.sha512((tmp_path / "corral-driver-fake").read_bytes()).hexdigest()
    assert (await fetch(f"{server}/moved", expected, cache)).path.exists()
    for path, reason in [("/elsewhere", ct.REASON_HTTP_ERROR), ("/nothing", ct.REASON_HTTP_ERROR)]:
        with pytest.raises(DownloadFailed) as caught:
            await fetch(f"{server}{path}", "", cache)
        assert caught.value.reason == reason
    assert "404" in caught.value.message
    with pytest.raises(DownloadFailed) as caught:
        await fetch(f"{server}/endless", "", cache, Limits(max_bytes=1 << 20))
    assert caught.value.reason == ct.REASON_TOO_LARGE
    with pytest.raises(DownloadFailed) as caught:
        await fetch(f"{server}/endless", "", cache, Limits(max_bytes=1 << 40, timeout=0.5))
    assert caught.value.reason == ct.REASON_UNREACHABLE


# -- the executable driver -------------------------------------------------------------------


def adapter(tmp_path: Path, **config: object) -> ExecutableDriver:
    return ExecutableDriver("fake", write_driver(tmp_path), config, {"apiKey": "s3cr3t-key"},
                            RunLimits(timeout=5))  # fmt: skip


def request(name: str) -> MachineRequest:
    join = JoinConfig("https://10.0.0.1:6443", b"CA", "join-s3cr3t", {"a": "b"},
                      ({"key": "k", "value": "v", "effect": "NoSchedule"},))  # fmt: skip
    return MachineRequest(name, "c-abcde", "pool1", {"region": "eu"}, join,
                          {"apiKey": "s3cr3t-key"})  # fmt: skip


async def test_schema_is_what_templates_will_be_checked_against(tmp_path: Path) -> None:
    answer = await adapter(tmp_path).schema()
    assert answer["fields"]["region"]["required"] is True
    assert answer["fields"]["apiKey"]["secret"] is True
    assert fake_driver.runs(tmp_path / "state")[0]["command"] == "schema"


async def test_create_state_remove_are_idempotent_by_machine_name(tmp_path: Path) -> None:
    driver = adapter(tmp_path)
    assert await driver.observe("m-abcde") is None
    created = await driver.create(request("m-abcde"))
    assert (created.phase, created.provider_id) == (Phase.RUNNING, "fake://m-abcde")
    assert await driver.create(request("m-abcde")) == created
    assert await driver.observe("m-abcde") == created
    await driver.delete("m-abcde")
    await driver.delete("m-abcde")
    assert await driver.observe("m-abcde") is None


async def test_secrets_go_on_stdin_only_and_the_environment_is_empty(tmp_path: Path) -> None:
    await adapter(tmp_path).create(request("m-secret"))
    (run,) = fake_driver.runs(tmp_path / "state")
    shown = json.dumps({"argv": run["argv"], "env": run["env"]})
    assert "s3cr3t" not in shown
    assert run["argv"][1:] == ["create"]
    assert set(run["env"]) <= {"PATH", "LANG", "HOME", "TMPDIR", "LC_CTYPE", "PWD"}
    assert not await asyncio.to_thread(Path(str(run["cwd"])).exists)  # its workdir is gone


@pytest.mark.parametrize(
    ("behave", "error", "said"),
    [("refuse", Invalid, "no such region: eu"), ("crash", Unavailable, "the cloud is down"),
     ("hang", Unavailable, "no answer in 1s"), ("chatter", Unavailable, "printed more than")],
)  # fmt: skip
async def test_failures_become_core_errors_with_the_drivers_reason(
    tmp_path: Path, behave: str, error: type[Exception], said: str
) -> None:
    driver = ExecutableDriver("fake", write_driver(tmp_path), {"behave": behave, "region": "eu"},
                              limits=RunLimits(timeout=1))  # fmt: skip
    with pytest.raises(error) as caught:
        await driver.observe("m-x")
    assert said in str(caught.value)


async def test_a_missing_executable_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(Unavailable):
        await ExecutableDriver("gone", tmp_path / "nothing").schema()


# -- the record of a creation ----------------------------------------------------------------


def test_a_creation_is_recorded_before_it_starts_and_settled_after_a_crash() -> None:
    pending = {names.ANNOTATION_CREATE_PENDING: "2026-11-24T02:00:00Z"}
    succeeded = {**pending, names.ANNOTATION_CREATE_SUCCEEDED: "2026-11-24T02:00:05Z"}
    assert machines.next_call({}) is machines.Call.CREATE
    assert machines.next_call(pending) is machines.Call.SETTLE
    assert machines.next_call(succeeded) is machines.Call.OBSERVE


class DriverObjects:
    """The management cluster's NodeDriver objects, for `Drivers` to read."""

    def __init__(self, *found: dict[str, Any]) -> None:
        self.found = {d["metadata"]["name"]: d for d in found}

    async def get(self, _: Any, name: str, **__: Any) -> dict[str, Any]:
        if name not in self.found:
            raise kube_error({"kind": "Status", "code": 404, "reason": "NotFound",
                              "message": f"nodedrivers {name} not found"})  # fmt: skip
        return self.found[name]


async def test_a_machine_reaches_its_driver_while_its_file_still_verifies(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    fetched = await fetch(write_driver(tmp_path).as_uri(), "", cache, files=str(tmp_path))
    usable = driver(True, "True", 2)
    usable["status"]["digest"] = fetched.digest
    inactive = {**driver(False, "True", 2), "status": dict(usable["status"])}
    inactive["metadata"] = {"name": "off", "generation": 2}
    drivers = Drivers(DriverObjects(usable, inactive), cache)  # type: ignore[arg-type]
    inputs = MachineInputs("d", {"region": "eu"}, {"apiKey": "k"}, [])
    connected = await drivers.connect(inputs, "c-x", None)
    assert isinstance(connected, ExecutableDriver)
    assert (connected.path, connected.config, connected.credential) == (
        fetched.path, {"region": "eu"}, {"apiKey": "k"})  # fmt: skip
    assert (await connected.schema())["fields"]["region"]["required"] is True
    # New machines only with an active, ready driver; the machines of an inactive one are
    # still reached (to be removed).
    assert await drivers.usable("d") and not await drivers.usable("off")
    assert not await drivers.usable("gone")
    assert await drivers.connect(MachineInputs("off", {}, {}, []), "c-x", None)
    with pytest.raises(Invalid):
        await drivers.connect(MachineInputs("gone", {}, {}, []), "c-x", None)
    with pytest.raises(Unavailable):  # the kwok driver's machines are in the cluster
        await drivers.connect(MachineInputs(names.KWOK_DRIVER, {}, {}, []), "c-x", None)
    fetched.path.chmod(0o700)
    fetched.path.write_bytes(b"changed on disk")
    with pytest.raises(Unavailable):
        await drivers.connect(inputs, "c-x", None)


def test_the_registry_knows_a_kwok_machine_s_node_before_it_is_made() -> None:
    shape = registry.node_shape("kwok", {"cpu": "8"})
    assert shape is not None
    assert shape.capacity == {"cpu": "8", "memory": kwok.DEFAULTS["memory"],
                              "pods": str(kwok.DEFAULTS["pods"])}  # fmt: skip
    assert shape.labels == kwok.LABELS
    # An executable's machines are known only once made: its pools annotate their capacity.
    assert registry.node_shape("d", {"cpu": "8"}) is None
    assert registry.node_shape(None, {}) is None
