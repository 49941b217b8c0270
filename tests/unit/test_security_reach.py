"""What corral may be made to reach, and what it tells of it, as pure rules: link-local and
metadata hosts, the setting that allows them, the view of a node driver for non-admins and
command words in a log line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from corral.core import logs, settings
from corral.core.api import addresses
from corral.core.api import condition_types as ct
from corral.core.auth import oidc_config
from corral.core.drivers import status as driver_status
from corral.core.errors import Invalid
from corral.core.provisioning import s3

METADATA = [
    "169.254.169.254", "169.254.0.1", "169.254.255.255", "fe80::1", "[fe80::1]", "FE80::abcd",
    "fe80::1%eth0", "::ffff:169.254.169.254", "fd00:ec2::254", "100.100.100.200",
    "metadata.google.internal", "METADATA.GOOGLE.INTERNAL.", "metadata.goog", "metadata",
    "instance-data", "instance-data.ec2.internal",
    # Shorthand IPv4 the resolver reads as 169.254.169.254.
    "2852039166", "0xa9fea9fe", "0251.0376.0251.0376", "169.254.43518", "0xa9.0xfe.0xa9.0xfe",
]  # fmt: skip
ELSEWHERE = [
    "s3.example.com", "127.0.0.1", "10.0.0.1", "169.253.255.255", "169.255.0.1", "::1",
    "fec0::1", "192.168.1.1", "minio", "metadata.example.com", "my-metadata", "1.2.3.4",
    "deadbeef", "0x", "", "100.100.100.201",
]  # fmt: skip


@pytest.mark.parametrize("host", METADATA)
def test_link_local_and_metadata_hosts_are_known(host: str) -> None:
    assert addresses.is_metadata_host(host)


@pytest.mark.parametrize("host", ELSEWHERE)
def test_other_hosts_are_not(host: str) -> None:
    assert not addresses.is_metadata_host(host)


def test_the_setting_is_false_unless_set_to_true() -> None:
    name = settings.LINK_LOCAL_SETTING
    assert settings.CATALOG[name].default == "false"
    assert settings.enabled(name, None) is False
    assert settings.enabled(name, {"value": "true"}) is True
    # A bad value stored with kubectl reads as the default, never as "allowed".
    for bad in ("yes", "True", "1", 1, True):
        assert settings.enabled(name, {"value": bad}) is False
        if isinstance(bad, str):
            with pytest.raises(Invalid):
                settings.check(name, bad)


def _target(endpoint: str) -> s3.Target:
    block = {"endpoint": endpoint, "bucket": "backups", "cloudCredentialName": "cc-x"}
    found = s3.target({"etcd": {"s3": block}}, "rke2Config")
    assert found is not None
    return found


@pytest.mark.parametrize("endpoint", ["169.254.169.254", "169.254.169.254:80",
                                      "metadata.google.internal:443", "2852039166"])  # fmt: skip
def test_an_s3_endpoint_at_a_metadata_address_is_refused_unless_allowed(endpoint: str) -> None:
    with pytest.raises(Invalid) as refused:
        s3.check_endpoint(_target(endpoint), "rke2Config.etcd.s3", False)
    assert refused.value.field == "rke2Config.etcd.s3.endpoint"
    assert settings.LINK_LOCAL_SETTING in refused.value.message
    s3.check_endpoint(_target(endpoint), "rke2Config.etcd.s3", True)


def test_an_s3_endpoint_elsewhere_is_accepted() -> None:
    s3.check_endpoint(_target("s3.example.com:9000"), "rke2Config.etcd.s3", False)


@pytest.mark.parametrize("issuer", ["https://169.254.169.254/", "http://[fe80::1]/realms/a",
                                    "https://metadata.google.internal/x"])  # fmt: skip
def test_an_issuer_at_a_metadata_address_is_refused_unless_allowed(issuer: str) -> None:
    current = oidc_config.OidcConfig()
    with pytest.raises(Invalid) as refused:
        oidc_config.merged(current, {"issuer": issuer})
    assert refused.value.field == "issuer"
    if issuer.startswith("https"):
        assert oidc_config.merged(current, {"issuer": issuer}, True).issuer == issuer


def test_a_stored_issuer_is_not_judged_again_by_other_changes() -> None:
    current = oidc_config.OidcConfig(issuer="https://169.254.169.254/", client_id="c")
    assert oidc_config.merged(current, {"enabled": False}).enabled is False


@pytest.mark.parametrize("issuer", ["https://id.example.com:0/", "https://id.example.com:99999/"])
def test_an_issuers_port_is_1_to_65535(issuer: str) -> None:
    with pytest.raises(Invalid):
        oidc_config.check_issuer(issuer)


def _driver(ready: str, reason: str, message: str) -> dict[str, Any]:
    condition = {"type": ct.READY, "status": ready, "reason": reason, "message": message,
                 "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
    downloaded = {**condition, "type": ct.DOWNLOADED}
    return {
        "metadata": {"name": "d", "generation": 1},
        "spec": {"active": True, "url": "http://127.0.0.1:22/x"},
        "status": {"digest": "ab" * 32, "appliedURL": "http://127.0.0.1:22/x",
                   "schema": {"fields": {}}, "conditions": [downloaded, condition]},
    }  # fmt: skip


def test_others_see_no_digest_and_no_reason_a_step_failed() -> None:
    failed = _driver("False", ct.REASON_UNREACHABLE, "GET http://127.0.0.1:22/x: refused")
    shown = driver_status.for_everyone(failed)
    assert shown["spec"] == failed["spec"]
    assert shown["status"]["schema"] == {"fields": {}}
    assert "digest" not in json.dumps(shown["status"]) and "refused" not in json.dumps(shown)
    (ready,) = shown["status"]["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == (
        ct.READY, "False", ct.REASON_NOT_READY,
    )  # fmt: skip
    assert driver_status.state(shown) == ("error", "error", driver_status.WITHHELD)
    assert "refused" in driver_status.state(failed)[2]  # administrators' view


def test_others_see_a_ready_driver_as_ready() -> None:
    shown = driver_status.for_everyone(_driver("True", ct.REASON_READY, ""))
    assert driver_status.state(shown) == ("active", "no", "")
    assert "digest" not in shown["status"]


def test_command_words_cannot_break_a_log_line() -> None:
    line = logs.words(["sh", "-c", "echo hi\nexec: user admin runs forged", "a\x00b", "é'\""])
    assert "\n" not in line and "\x00" not in line and "\r" not in line
    assert line.isascii() and line.isprintable()
    assert [json.loads(w) for w in line.split(" ")[:2]] == ["sh", "-c"]
