"""The executable driver: a verified executable from the driver cache, run once per call with
the command as its only argument and JSON on stdin and stdout (docs/drivers.md).

Secrets (the join token, the cloud credential) travel on stdin only, never on the command line
or in the environment, which other processes on the host can read. Each run gets an empty
environment but PATH, a fresh working directory, a time limit and a bound on what it may print;
a run that overstays or prints too much is killed with its whole process group.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import signal
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corral.core.drivers import schema as driver_schema
from corral.core.errors import Invalid, Unavailable
from corral.operator.drivers.contract import Machine, MachineRequest, Phase

log = logging.getLogger(__name__)

API_VERSION = "drivers.corral.svc.io/v1"
TIMEOUT = 60.0
MAX_OUTPUT = 1024 * 1024
MAX_STDERR = 64 * 1024
MAX_MESSAGE = 1024
# What a driver's exit status means.
EXIT_OK = 0
EXIT_REFUSED = 2  # the input is wrong (a bad config, no quota): asking again will not help
ENVIRONMENT = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


@dataclass(frozen=True)
class Limits:
    timeout: float = TIMEOUT
    max_output: int = MAX_OUTPUT


@dataclass(frozen=True)
class ExecutableDriver:
    """One driver executable, connected to one node template's config and cloud credential:
    an executable keeps no state between calls, so each call carries them."""

    name: str
    path: Path
    config: Mapping[str, Any] = field(default_factory=dict)
    credential: Mapping[str, str] = field(default_factory=dict)
    limits: Limits = Limits()

    async def schema(self) -> dict[str, Any]:
        """The fields of `<name>Config`, checked (`corral.core.drivers.schema.parse`)."""
        answer = await self.run("schema", {})
        try:
            return driver_schema.parse(answer)
        except Invalid as exc:
            raise Unavailable(f"driver {self.name}: {exc.message}") from None

    async def observe(self, name: str) -> Machine | None:
        answer = await self.run("state", self._about(name))
        return _machine(name, answer) if answer.get("exists") is not False else None

    async def create(self, request: MachineRequest) -> Machine:
        message = {
            "machine": {"name": request.name, "cluster": request.cluster,
                        "hostname": request.hostname},
            "config": dict(request.template),
            "credential": dict(request.credential),
            "join": {
                "server": request.join.server,
                "caCert": base64.b64encode(request.join.ca_cert).decode(),
                "token": request.join.token,
                "labels": dict(request.join.labels),
                "taints": [dict(t) for t in request.join.taints],
                "command": request.join.command,
            },
        }  # fmt: skip
        return _machine(request.name, await self.run("create", message))

    async def delete(self, name: str) -> None:
        await self.run("remove", self._about(name))

    def _about(self, name: str) -> dict[str, Any]:
        return {"machine": {"name": name}, "config": dict(self.config),
                "credential": dict(self.credential)}  # fmt: skip

    async def run(self, command: str, message: Mapping[str, Any]) -> dict[str, Any]:
        """Run `<path> <command>` with the message on stdin; its JSON answer. Exit status 2 is
        Invalid (the driver refused the input), any other failure Unavailable."""
        stdin = json.dumps({"apiVersion": API_VERSION, "command": command, **message}).encode()
        with tempfile.TemporaryDirectory(prefix=f"driver-{self.name}-") as workdir:
            code, out, err = await self._exec(command, stdin, workdir)
        answer = _json(out)
        if code == EXIT_OK:
            if answer is None:
                raise Unavailable(f"driver {self.name} {command}: its answer is not a JSON object")
            return answer
        said = _message(answer, err) or f"exit status {code}"
        log.warning("driver %s %s failed (exit %s): %s", self.name, command, code, said)
        if code == EXIT_REFUSED:
            raise Invalid(f"driver {self.name} {command}: {said}")
        raise Unavailable(f"driver {self.name} {command}: {said}")

    async def _exec(self, command: str, stdin: bytes, workdir: str) -> tuple[int, bytes, bytes]:
        try:
            process = await asyncio.create_subprocess_exec(
                str(self.path), command,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=workdir,
                env={**ENVIRONMENT, "HOME": workdir, "TMPDIR": workdir},
                start_new_session=True,  # its own process group, killed whole
            )  # fmt: skip
        except OSError as exc:
            raise Unavailable(f"driver {self.name}: cannot run it: {exc.strerror}") from None
        assert process.stdin and process.stdout and process.stderr
        feed = asyncio.create_task(_feed(process.stdin, stdin))
        out = asyncio.create_task(_read(process.stdout, self.limits.max_output))
        err = asyncio.create_task(_read(process.stderr, MAX_STDERR, keep_going=True))
        try:
            async with asyncio.timeout(self.limits.timeout):
                await asyncio.gather(feed, out, err)
                code = await process.wait()
        except TimeoutError:
            raise Unavailable(
                f"driver {self.name} {command}: no answer in {self.limits.timeout:g}s"
            ) from None
        except _TooMuch:
            raise Unavailable(
                f"driver {self.name} {command}: printed more than {self.limits.max_output} bytes"
            ) from None
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            for task in (feed, out, err):
                task.cancel()
            await asyncio.gather(feed, out, err, return_exceptions=True)
            # asyncio's `wait` returns only once the pipes are at their end, and a pipe left
            # full (reading stopped at the limit) never gets there: read them out.
            await asyncio.gather(_discard(process.stdout), _discard(process.stderr))
            await process.wait()
        return code, out.result(), err.result()


class _TooMuch(Exception):
    pass


async def _feed(pipe: asyncio.StreamWriter, data: bytes) -> None:
    # A driver that exits without reading its input is answered by its exit status.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        pipe.write(data)
        await pipe.drain()
        pipe.close()
        await pipe.wait_closed()


async def _read(pipe: asyncio.StreamReader, limit: int, keep_going: bool = False) -> bytes:
    """Up to `limit` bytes; more is _TooMuch, or dropped when `keep_going` (stderr is only
    for the message, and must be drained so the driver does not block on it)."""
    kept = bytearray()
    while chunk := await pipe.read(64 * 1024):
        if len(kept) + len(chunk) > limit:
            if not keep_going:
                raise _TooMuch
            chunk = chunk[: max(limit - len(kept), 0)]
        kept += chunk
    return bytes(kept)


async def _discard(pipe: asyncio.StreamReader) -> None:
    while await pipe.read(64 * 1024):
        pass


def _json(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _message(answer: dict[str, Any] | None, stderr: bytes) -> str:
    """Why a run failed: the answer's `message`, else the last line of stderr."""
    said = (answer or {}).get("message")
    if not isinstance(said, str) or not said:
        lines = stderr.decode(errors="replace").strip().splitlines()
        said = lines[-1] if lines else ""
    return said[:MAX_MESSAGE]


def _machine(name: str, answer: Mapping[str, Any]) -> Machine:
    try:
        phase = Phase(answer.get("phase"))
    except ValueError:
        raise Unavailable(
            f"machine {name}: unknown phase {str(answer.get('phase'))[:64]!r}"
        ) from None
    addresses = answer.get("addresses") or []
    if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
        raise Unavailable(f"machine {name}: addresses must be a list of text")
    return Machine(
        name=name,
        phase=phase,
        message=str(answer.get("message") or "")[:MAX_MESSAGE],
        provider_id=str(answer.get("providerId") or "")[:1024],
        addresses=tuple(a[:256] for a in addresses[:32]),
    )
