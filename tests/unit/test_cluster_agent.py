"""The cluster agent's own rules: its configuration, its backoff, that its credential shows
nowhere but in the header it sends, and that it stops at SIGTERM as its pod's PID 1."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from corral.agent import dialer
from corral.agent.config import AgentConfig, ConfigError
from corral.core import kubeconfig
from corral.core.clusters.credential import Credential
from corral.core.tunnel import handshake

VALUE = handshake.new_value()
GOOD = {"CORRAL_URL": "https://corral.example:8443", "CORRAL_CLUSTER": "c-abcde",
        "CORRAL_AGENT_CREDENTIAL": VALUE}  # fmt: skip
CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_the_configuration_is_read_and_never_shows_the_credential() -> None:
    config = AgentConfig.from_env({**GOOD, "CORRAL_CA_CHECKSUM": "a" * 64})
    assert config.url == "https://corral.example:8443"
    assert config.authorization() == f"Bearer c-abcde:{VALUE}"
    assert handshake.presented(config.authorization()) == ("c-abcde", VALUE)
    assert VALUE not in repr(config)


@pytest.mark.parametrize(
    "change",
    [
        {"CORRAL_URL": "http://corral.example"},
        {"CORRAL_URL": "https://corral.example/v3"},
        {"CORRAL_URL": ""},
        {"CORRAL_CLUSTER": "local"},
        {"CORRAL_AGENT_CREDENTIAL": "short"},
        {"CORRAL_CA_CHECKSUM": "not-hex"},
    ],
)
def test_a_bad_configuration_is_refused(change: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        AgentConfig.from_env({**GOOD, **change})


def test_the_backoff_doubles_to_its_ceiling_and_starts_afresh_after_a_steady_tunnel() -> None:
    backoff = dialer.Backoff()
    delays = [backoff.after(0) for _ in range(8)]
    assert dialer.FIRST_BACKOFF / 2 <= delays[0] <= dialer.FIRST_BACKOFF
    assert all(delay <= dialer.MAX_BACKOFF for delay in delays)
    assert delays[-1] >= dialer.MAX_BACKOFF / 2
    assert backoff.after(dialer.STEADY_SECONDS) <= dialer.FIRST_BACKOFF


def test_the_upstream_is_the_credentials_server_and_needs_a_token() -> None:
    upstream = dialer.Upstream.of(Credential("https://10.96.0.1", CA, token="sa-token"))
    assert (upstream.host, upstream.port) == ("10.96.0.1", 443)
    assert upstream.params.server == "https://10.96.0.1"
    with pytest.raises(ValueError, match="token"):
        dialer.Upstream.of(Credential("https://10.96.0.1", CA, client_cert=b"c", client_key=b"k"))


def test_a_dial_never_shows_the_credential() -> None:
    dial = dialer.Dial("https://corral", f"Bearer c-abcde:{VALUE}", "0.1.0", "", ssl=False)
    assert VALUE not in repr(dial)


UNSHARE = shutil.which("unshare") or "unshare"


def _can_be_pid_one() -> bool:
    try:
        done = subprocess.run([UNSHARE, "--pid", "--fork", "true"], capture_output=True,
                              timeout=10, check=False)  # fmt: skip
    except FileNotFoundError:
        return False
    return done.returncode == 0


@pytest.mark.skipif(not _can_be_pid_one(), reason="needs unshare --pid (root, util-linux)")
def test_the_agent_stops_on_sigterm_even_as_pid_one(tmp_path: Path) -> None:
    """As its pod's PID 1, the agent gets only the signals it handles: a deleted pod's agent
    must stop at SIGTERM, not hold its tunnel until the kubelet kills it."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: every dial is refused
    server = f"https://127.0.0.1:{closed.getsockname()[1]}"
    config = kubeconfig.build("agent", server, CA, kubeconfig.Credentials(token="sa-token"))
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
    env = {**GOOD, "CORRAL_URL": server, "KUBECONFIG": str(tmp_path / "kubeconfig"),
           "PATH": os.environ["PATH"]}  # fmt: skip
    log = tmp_path / "agent.log"
    with log.open("wb") as out, closed:
        holder = subprocess.Popen(
            [UNSHARE, "--pid", "--fork", "--kill-child", sys.executable, "-m", "corral.agent"],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while "dialling corral again" not in log.read_text():
                assert holder.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
            children = Path(f"/proc/{holder.pid}/task/{holder.pid}/children").read_text()
            (agent,) = map(int, children.split())
            os.kill(agent, signal.SIGTERM)  # from outside its namespace, as the kubelet's is
            assert holder.wait(10) == 0, log.read_text()
        finally:
            holder.kill()
            holder.wait()
    assert "agent stopped" in log.read_text()
