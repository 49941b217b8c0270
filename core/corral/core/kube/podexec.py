"""Running a command in a pod: its cluster's `pods/exec` subresource over a WebSocket, the
Kubernetes remote-command protocol (`v5.channel.k8s.io`, else `v4.channel.k8s.io`), with no
stdin and no TTY.

Every binary message is one channel byte and data: 1 is stdout, 2 stderr, 3 the final
Status, `Success` or `Failure` with the exit code as the cause `ExitCode`, or with why the
command could not run at all; the server closes the socket after it. Output is kept up to a
limit per stream; the whole call, handshake included, is bounded in time.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from corral.core.errors import CorralError, Forbidden, Invalid, NotFound, Unavailable
from corral.core.kube.connections import Connection
from corral.core.kube.credential import UpgradeRefused
from corral.core.kube.impersonation import Impersonation

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDOUT, STDERR, STATUS = 1, 2, 3
# The Status is a few hundred bytes; more is not a Status.
STATUS_LIMIT = 64 * 1024
EXIT_CODE_MAX = 2**31 - 1


@dataclass(frozen=True)
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int
    truncated: bool


@dataclass
class Output:
    """What arrived on the channels: each output stream up to `limit` bytes (more is counted as
    truncation, not kept), and the Status once it came."""

    limit: int
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    status: bytearray = field(default_factory=bytearray)
    truncated: bool = False

    def add(self, message: bytes) -> None:
        if not message:
            return
        channel, data = message[0], message[1:]
        if channel == STATUS:
            if len(self.status) + len(data) > STATUS_LIMIT:
                raise Unavailable("the cluster answered the command with an oversized status")
            self.status += data
            return
        kept = {STDOUT: self.stdout, STDERR: self.stderr}.get(channel)
        if kept is None:
            return  # stdin's or resize's channel: nothing is sent on them here
        room = self.limit - len(kept)
        if len(data) > room:
            self.truncated = True
        kept += data[: max(room, 0)]

    def result(self) -> ExecResult:
        """The outcome, once the stream has ended."""
        if not self.status:
            raise Unavailable("the command's stream ended before its exit status")
        try:
            status = json.loads(self.status)
        except ValueError:
            raise Unavailable(
                "the cluster answered the command with an unreadable status"
            ) from None
        return ExecResult(
            stdout=self.stdout.decode(errors="replace"),
            stderr=self.stderr.decode(errors="replace"),
            exit_code=exit_code(status),
            truncated=self.truncated,
        )


def exit_code(status: Any) -> int:
    """The command's exit code from the final Status; `Invalid` when it did not run at all
    (no such executable, or a node that runs no commands, as kwok's)."""
    if not isinstance(status, dict):
        raise Unavailable("the cluster answered the command with an unreadable status")
    if status.get("status") == "Success":
        return 0
    details = status.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    for cause in causes if isinstance(causes, list) else []:
        if isinstance(cause, dict) and cause.get("reason") == "ExitCode":
            code = str(cause.get("message", ""))
            if code.isascii() and code.isdigit() and len(code) <= 10 and int(code) <= EXIT_CODE_MAX:
                return int(code)
    message = status.get("message") or "no reason given"
    raise Invalid(f"the command could not run in the pod: {message}", code="ExecFailed")


def refusal_error(status: int, body: bytes) -> CorralError:
    """The error for an exec the cluster refused before it started (its Status, or the text
    it answered)."""
    try:
        answer = json.loads(body)
        message = str(answer.get("message") or "") if isinstance(answer, dict) else ""
    except ValueError:
        message = body[:500].decode(errors="replace").strip()
    message = message or f"HTTP {status}"
    if status == 404 or (status == 400 and "is not valid for pod" in message):
        return NotFound(message)
    if status == 403:
        return Forbidden(message)
    if status == 401 or status >= 500:
        return Unavailable(f"the cluster refused corral's request: {message}")
    return Invalid(f"the command could not run in the pod: {message}", code="ExecFailed")


async def execute(
    connection: Connection,
    namespace: str,
    pod: str,
    container: str | None,
    command: list[str],
    *,
    timeout: float,  # noqa: ASYNC109 - one bound for handshake, command and output together
    limit: int,
    who: Impersonation,
) -> ExecResult:
    """Run `command` in the pod's container (the pod's only or default one when None) and
    wait for its exit, at most `timeout` seconds in all; stdout and stderr are kept up to
    `limit` bytes each (`truncated` when either wrote more). As `who`: a user's command is
    the user's to be allowed."""
    if not command or not all(isinstance(part, str) for part in command):
        raise Invalid("command must be a non-empty list of strings", field="command")
    if timeout <= 0 or limit < 0:
        raise ValueError("timeout must be positive and limit not negative")
    try:
        url = connection.credential.url("api", "v1", "namespaces", namespace, "pods", pod, "exec")
    except ValueError as exc:  # "." or "..": never a name, never forwarded
        raise NotFound(f"pod {namespace}/{pod} not found") from exc
    params = [("command", part) for part in command]
    params += [("stdout", "true"), ("stderr", "true")]
    if container:
        params.append(("container", container))
    output = Output(limit)
    try:
        async with asyncio.timeout(timeout):
            async with connection.session().ws_connect(
                url, protocols=PROTOCOLS, params=params, headers=who.headers()
            ) as socket:
                if socket.protocol not in PROTOCOLS:
                    raise Unavailable("the cluster speaks no remote-command protocol corral knows")
                async for message in socket:
                    if message.type == aiohttp.WSMsgType.BINARY:
                        output.add(message.data)
                    elif message.type == aiohttp.WSMsgType.ERROR:
                        raise Unavailable(f"the command's stream broke: {socket.exception()}")
    except UpgradeRefused as refused:
        raise refusal_error(refused.status, refused.body) from None
    except TimeoutError:
        raise Unavailable(
            f"the command did not finish within {timeout:g} s", code="Timeout"
        ) from None
    except (aiohttp.ClientError, OSError) as exc:
        raise Unavailable(f"cannot reach the cluster: {exc}") from None
    return output.result()
