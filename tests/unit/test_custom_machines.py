"""Existing machines over SSH (`customConfig`): what a client may give, and what the operator
runs on the machine (`corral.core.drivers.custom`)."""

from __future__ import annotations

import asyncio
import datetime
import json
import shlex
from types import SimpleNamespace
from typing import Any

import httpx2
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from lightkube import ApiError as KubeApiError

from corral.core.drivers import custom
from corral.core.errors import Invalid
from corral.operator.management import ssh
from corral.operator.management.sshmachines import (
    KEY_GRACE,
    RETRY_MAX,
    KeyNotYet,
    SSHMachines,
    retry_delay,
)


def openssh_key() -> str:
    key = ed25519.Ed25519PrivateKey.generate()
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()


def pem_key(encryption: Any = None) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        encryption or serialization.NoEncryption(),
    ).decode()


def given(**fields: Any) -> dict[str, Any]:
    return {"address": "10.9.0.4", "sshKey": openssh_key(), **fields}


def refused(config: Any) -> Invalid:
    with pytest.raises(Invalid) as caught:
        custom.parse(config)
    return caught.value


def test_a_config_is_its_address_internal_address_user_and_key() -> None:
    key = openssh_key()
    config, got = custom.parse(
        {"address": "node1.example.com", "internalAddress": "10.0.0.7", "user": "ubuntu",
         "sshKey": key}
    )  # fmt: skip
    assert config == custom.CustomConfig("node1.example.com", "10.0.0.7", "ubuntu")
    assert got == key


def test_the_user_is_root_unless_given() -> None:
    assert custom.parse(given())[0].user == "root"
    assert custom.parse(given(user=None))[0].user == "root"


@pytest.mark.parametrize("missing", ["address", "sshKey"])
def test_the_address_and_the_key_are_required(missing: str) -> None:
    config = given()
    del config[missing]
    error = refused(config)
    assert (error.field, error.code) == (f"customConfig.{missing}", "MissingRequired")


def test_a_field_it_does_not_have_is_refused_not_dropped() -> None:
    error = refused(given(port=2222))
    assert error.field == "customConfig.port"


def test_it_is_an_object() -> None:
    assert refused("10.0.0.1").field == "customConfig"


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "::1", "0.0.0.0", "169.254.169.254", "224.0.0.1", "localhost",  # noqa: S104
     "a.localhost", "metadata.google.internal", "not a name", "-bad.example.com",
     "under_score.example.com", "1.2.3", "x" * 254, "ex ample.com"],
)  # fmt: skip
def test_an_address_that_is_no_machine_corral_may_reach_is_refused(address: str) -> None:
    assert refused(given(address=address)).field == "customConfig.address"


@pytest.mark.parametrize("address", ["10.9.0.4", "192.168.1.20", "fd00::12", "worker-3.lan"])
def test_an_ip_address_or_a_dns_name_is_accepted(address: str) -> None:
    assert custom.parse(given(address=address))[0].address == address


@pytest.mark.parametrize("internal", ["node.lan", "127.0.0.1", "10.0.0.300"])
def test_the_internal_address_is_a_machines_ip_address(internal: str) -> None:
    assert refused(given(internalAddress=internal)).field == "customConfig.internalAddress"


@pytest.mark.parametrize("user", ["Root", "1user", "a b", "us;er", "x" * 33, "$(id)", 7])
def test_the_user_is_a_posix_user_name(user: Any) -> None:
    assert refused(given(user=user)).field == "customConfig.user"


def test_a_key_larger_than_any_real_one_is_refused_before_it_is_parsed() -> None:
    error = refused(given(sshKey="x" * (custom.MAX_KEY_CHARS + 1)))
    assert error.field == "customConfig.sshKey"


@pytest.mark.parametrize(
    "key",
    [
        openssh_key(),
        pem_key(),
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
        .decode(),
    ],
    ids=["openssh-ed25519", "pkcs8-ecdsa", "pkcs1-rsa"],
)
def test_private_keys_in_openssh_and_pem_formats_are_accepted(key: str) -> None:
    custom.check_private_key(key)


def test_an_encrypted_key_is_refused_saying_so() -> None:
    key = pem_key(serialization.BestAvailableEncryption(b"secret"))
    with pytest.raises(Invalid, match="encrypted") as caught:
        custom.check_private_key(key)
    assert caught.value.field == "customConfig.sshKey"


@pytest.mark.parametrize(
    "key",
    [
        "not a key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n",
        ed25519.Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode(),
    ],
    ids=["text", "truncated", "public-key"],
)
def test_what_is_not_a_private_key_is_refused(key: str) -> None:
    with pytest.raises(Invalid) as caught:
        custom.check_private_key(key)
    assert caught.value.field == "customConfig.sshKey"
    assert key not in caught.value.message


def test_the_record_keeps_where_the_key_is_and_responses_show_neither() -> None:
    config = custom.CustomConfig("10.9.0.4", "10.0.0.7", "ubuntu")
    stored = config.stored("c-m-1-m-2-ssh-key")
    assert stored == {"address": "10.9.0.4", "internalAddress": "10.0.0.7", "user": "ubuntu",
                      "sshKeySecretName": "c-m-1-m-2-ssh-key"}  # fmt: skip
    assert custom.CustomConfig.of(stored) == config
    assert custom.shown(stored) == {"address": "10.9.0.4", "internalAddress": "10.0.0.7",
                                    "user": "ubuntu"}  # fmt: skip
    assert custom.shown(None) is None


def test_the_hostname_is_requested_hostname_or_hostname_override() -> None:
    assert custom.hostname({"requestedHostname": "worker-1"}) == "worker-1"
    assert custom.hostname({"hostnameOverride": "worker-2"}) == "worker-2"
    with pytest.raises(Invalid) as caught:
        custom.hostname({})
    assert caught.value.code == "MissingRequired"


@pytest.mark.parametrize("name", ["Worker", "a_b", "x" * 64, "-a", "a;b"])
def test_the_hostname_is_a_node_name_a_machine_can_have(name: str) -> None:
    with pytest.raises(Invalid) as caught:
        custom.hostname({"requestedHostname": name})
    assert caught.value.field == "requestedHostname"


def test_root_runs_commands_as_they_are_and_another_user_through_sudo_without_a_prompt() -> None:
    command = "curl -fsSL https://x | sh -s - --token 'a b'"
    assert custom.as_root(command, "root") == command
    wrapped = custom.as_root(command, "ubuntu")
    assert shlex.split(wrapped) == ["sudo", "-n", "sh", "-c", command]


def test_the_installer_is_given_the_machines_name_and_addresses_quoted() -> None:
    node_command = "curl -fsSL https://corral/v3/connect/install.sh | sh -s - --worker"
    config = custom.CustomConfig("10.9.0.4", "10.0.0.7")
    command = custom.install(node_command, "worker-1", config)
    assert command.startswith(node_command + " ")
    assert shlex.split(command)[-6:] == ["--node-name", "worker-1", "--address", "10.9.0.4",
                                         "--internal-address", "10.0.0.7"]  # fmt: skip
    assert "--internal-address" not in custom.install(
        node_command, "w", custom.CustomConfig("10.9.0.4")
    )
    # A node's address is an IP: for a machine reached by name, the installer finds it.
    by_name = custom.install(node_command, "w", custom.CustomConfig("worker.lan"))
    assert shlex.split(by_name)[-2:] == ["--node-name", "w"]


def test_the_tail_keeps_the_last_lines_whatever_is_written() -> None:
    tail = custom.Tail(lines=3, width=10)
    for i in range(1000):
        tail.feed(f"line {i}\n")
    tail.feed("no newline yet")
    assert tail.text().splitlines() == ["line 998", "line 999", "no n…e yet"]


def test_the_tail_of_one_endless_line_is_bounded() -> None:
    tail = custom.Tail(lines=3, width=10)
    for _ in range(1000):
        tail.feed("x" * 1000)
    assert tail.text() == "xxxx…xxxxx"
    tail.feed("\nend\n")
    assert tail.text().splitlines() == ["xxxx…xxxxx", "end"]


def test_a_long_line_keeps_its_start_and_its_end() -> None:
    url = "https://corral.example:8443/v3/nodeassets/" + "a" * 300
    line = f"downloading kube-proxy from {url}: 404 Not Found"
    for chunks in ([line + "\n"], [line[:150], line[150:300], line[300:] + "\n"], [line]):
        tail = custom.Tail()
        for chunk in chunks:
            tail.feed(chunk)
        kept = tail.text()
        assert len(kept) == custom.TAIL_LINE_CHARS, chunks
        assert kept.startswith("downloading kube-proxy from https://") and "…" in kept
        assert kept.endswith(": 404 Not Found")


def test_lines_split_across_chunks_are_kept_whole() -> None:
    tail = custom.Tail()
    for chunk in ("containerd is ", "not running\nsecond", " line\n"):
        tail.feed(chunk)
    assert tail.text() == "containerd is not running\nsecond line"


def test_retries_wait_longer_each_time_up_to_a_bound() -> None:
    delays = [retry_delay(retry) for retry in range(40)]
    assert delays[0] < delays[1] < delays[2]
    assert max(delays) == RETRY_MAX
    assert delays == sorted(delays)


class _NoSecrets:
    """A management cluster in which the key's Secret is not written yet."""

    def __init__(self) -> None:
        self.written: list[Any] = []

    async def get(self, _resource: Any, name: str, namespace: str | None = None) -> Any:
        request = httpx2.Request(
            "GET", f"https://kube/api/v1/namespaces/{namespace}/secrets/{name}"
        )
        status = {"kind": "Status", "code": 404, "reason": "NotFound", "message": "not found"}
        response = httpx2.Response(404, request=request, content=json.dumps(status).encode(),
                                   headers={"Content-Type": "application/json"})  # fmt: skip
        raise KubeApiError(request=request, response=response)

    async def apply(self, obj: Any, **_: Any) -> Any:
        self.written.append(obj)
        return obj

    async def patch(self, *args: Any, **_: Any) -> Any:
        self.written.append(args)
        return args[-1]


def _record(created: datetime.datetime) -> dict[str, Any]:
    return {"metadata": {"name": "m-1", "namespace": "c-1", "annotations": {},
                         "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ")},
            "spec": {"customConfig": {"address": "10.0.0.5", "sshKeySecretName": "k"}}}  # fmt: skip


def test_a_new_record_waits_quietly_for_its_key_then_says_it_is_missing() -> None:
    now = datetime.datetime(2026, 11, 28, 12, 0, tzinfo=datetime.UTC)
    kube = _NoSecrets()
    machines = SSHMachines(SimpleNamespace(kube=kube, clock=lambda: now, corral=None))  # type: ignore[arg-type]
    with pytest.raises(KeyNotYet):
        asyncio.run(machines.provision(_record(now - datetime.timedelta(seconds=KEY_GRACE - 1))))
    assert kube.written == []  # no Provisioned False for a Secret a moment behind its record
    with pytest.raises(ssh.Failed) as failed:
        asyncio.run(machines.provision(_record(now - datetime.timedelta(seconds=KEY_GRACE + 1))))
    assert failed.value.reason == "SSHKeyMissing"
