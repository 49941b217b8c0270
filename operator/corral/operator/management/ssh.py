"""SSH to an existing machine (asyncssh), bounded in time and in what is kept of its output.

The host key is trusted on first use and pinned after: the first connection accepts the key
the machine presents and hands it back to be recorded before anything runs there; every later
connection offers only that key's algorithms and refuses any other key before authenticating,
so a machine that was replaced (or someone in between) never sees a command nor a signature
made with the user's key. Nothing of the user's or the operator's SSH set-up is read: no
`~/.ssh/config`, no known_hosts file, no agent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import asyncssh

from corral.core.api import condition_types as ct
from corral.core.drivers import custom

CONNECT_TIMEOUT = 15.0
CHUNK = 4096


class Failed(Exception):
    """Why a connection or a command did not succeed, as a `Provisioned` reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Result:
    exit_status: int
    output: str  # its last lines (`custom.Tail`)

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class _Pinned(asyncssh.SSHClient):
    """Accepts any host key when none is recorded yet (and keeps it), none that is not the
    recorded one: asyncssh asks only about keys the trusted list does not hold."""

    def __init__(self, recorded: asyncssh.SSHKey | None) -> None:
        self.recorded = recorded
        self.presented: asyncssh.SSHKey | None = None

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        self.presented = key
        return self.recorded is None


def host_key_text(key: asyncssh.SSHKey) -> str:
    """OpenSSH's one-line form, without a comment: what a record keeps."""
    return bytes(key.export_public_key("openssh")).decode().split("\n", 1)[0].strip()


def fingerprint(text: str) -> str:
    return str(asyncssh.import_public_key(text).get_fingerprint("sha256"))


@dataclass
class Session:
    conn: asyncssh.SSHClientConnection
    host_key: str  # the key the machine presented, to record when none was

    async def run(self, command: str, seconds: float) -> Result:
        """`command` to its end or for `seconds`, stderr with stdout, keeping the last lines.
        A command timed out is closed with its channel (the machine's sshd ends it)."""
        tail = custom.Tail()
        try:
            async with asyncio.timeout(seconds):
                process = await self.conn.create_process(
                    command, stderr=asyncssh.STDOUT, encoding="utf-8", errors="replace"
                )
                async with process:
                    while chunk := await process.stdout.read(CHUNK):
                        tail.feed(chunk)
                    completed = await process.wait()
        except TimeoutError:
            output = tail.text()
            return Result(124, f"{output}\ntimed out after {seconds:.0f} s".lstrip())
        except (OSError, asyncssh.Error) as exc:
            raise Failed(ct.REASON_UNREACHABLE, f"the connection was lost: {exc}") from None
        status = completed.exit_status
        return Result(status if status is not None else 255, tail.text())


@asynccontextmanager
async def connect(
    config: custom.CustomConfig,
    private_key: str,
    recorded_host_key: str = "",
    seconds: float = CONNECT_TIMEOUT,
) -> AsyncIterator[Session]:
    """A session as `config.user` with `private_key`; `Failed` with the reason otherwise."""
    try:
        key = asyncssh.import_private_key(private_key)
    except (asyncssh.KeyImportError, ValueError):
        raise Failed(ct.REASON_AUTHENTICATION_FAILED, "the SSH key cannot be read") from None
    recorded = asyncssh.import_public_key(recorded_host_key) if recorded_host_key else None
    client = _Pinned(recorded)
    try:
        conn = await asyncssh.connect(
            config.address,
            port=custom.SSH_PORT,
            username=config.user,
            client_factory=lambda: client,
            client_keys=[key],
            known_hosts=([recorded] if recorded else [], [], []),
            preferred_auth=["publickey"],
            agent_path=None,
            config=None,
            connect_timeout=seconds,
            login_timeout=seconds,
            keepalive_interval=30,
        )
    except asyncssh.HostKeyNotVerifiable:
        presented = client.presented
        seen = f" (it presented {presented.get_fingerprint('sha256')})" if presented else ""
        was = recorded.get_fingerprint("sha256") if recorded else ""
        raise Failed(
            ct.REASON_HOST_KEY_CHANGED,
            f"{config.address} no longer presents the host key recorded at the first "
            f"connection, {was}{seen}: nothing was run. If the machine was reinstalled, "
            "delete this node and add it again",
        ) from None
    except asyncssh.PermissionDenied:
        raise Failed(
            ct.REASON_AUTHENTICATION_FAILED,
            f"{config.address} refused the SSH key for user {config.user}",
        ) from None
    except (OSError, TimeoutError, asyncssh.Error) as exc:
        raise Failed(
            ct.REASON_UNREACHABLE,
            f"no SSH connection to {config.address}:{custom.SSH_PORT}: "
            f"{type(exc).__name__} {exc}".rstrip(),
        ) from None
    try:
        server_key = conn.get_server_host_key()
        host_key = host_key_text(server_key) if server_key else recorded_host_key
        yield Session(conn, host_key)
    finally:
        conn.close()
        await conn.wait_closed()
