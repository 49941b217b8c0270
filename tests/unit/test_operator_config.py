from __future__ import annotations

import os
from pathlib import Path

import pytest

from corral.core.registration.command import Corral
from corral.operator.config import (
    IDENTITY,
    PRIORITY_RANGE,
    OperatorConfig,
    parse_identity,
    parse_priority,
    parse_shards,
    parse_starts,
)


def test_an_integer_priority_is_kept() -> None:
    assert parse_priority("0") == 0
    assert parse_priority(" 42 ") == 42
    assert parse_priority("-3") == -3


def test_auto_picks_a_priority_of_its_own_for_each_process() -> None:
    picked = {parse_priority("auto") for _ in range(50)}
    assert all(1 <= p < PRIORITY_RANGE for p in picked)
    # Two replicas with one priority both pause: the picks must differ.
    assert len(picked) > 45
    assert 1 <= parse_priority("AUTO") < PRIORITY_RANGE


@pytest.mark.parametrize("text", ["", "high", "1.5", "auto2"])
def test_anything_else_is_refused_with_what_is_accepted(text: str) -> None:
    with pytest.raises(ValueError, match="integer or auto"):
        parse_priority(text)


def test_from_env_reads_the_priority_and_keeps_the_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("CORRAL_OPERATOR_PRIORITY", "CORRAL_OPERATOR_PEERING", "CORRAL_OPERATOR_LIVENESS"):
        monkeypatch.delenv(name, raising=False)
    config = OperatorConfig.from_env()
    assert (config.priority, config.peering_name) == (0, "corral")
    assert config.liveness_endpoint == "http://0.0.0.0:8080/healthz"

    monkeypatch.setenv("CORRAL_OPERATOR_PRIORITY", "auto")
    assert OperatorConfig.from_env().priority >= 1
    monkeypatch.setenv("CORRAL_OPERATOR_PRIORITY", "7")
    assert OperatorConfig.from_env().priority == 7


def test_the_driver_cache_is_under_the_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CORRAL_OPERATOR_DATA_DIR", raising=False)
    assert str(OperatorConfig.from_env().driver_cache) == "/var/lib/corral/drivers"
    monkeypatch.setenv("CORRAL_OPERATOR_DATA_DIR", "/data/op")
    assert str(OperatorConfig.from_env().driver_cache) == "/data/op/drivers"


def test_node_commands_name_the_api_server_as_it_is_configured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("CORRAL_EXTERNAL_URL", "CORRAL_CA_FILE", "CORRAL_TLS_CERT_FILE"):
        monkeypatch.delenv(name, raising=False)
    assert OperatorConfig.from_env().corral is None

    (tmp_path / "ca.crt").write_bytes(b"CA")
    (tmp_path / "tls.crt").write_bytes(b"CERT")
    monkeypatch.setenv("CORRAL_EXTERNAL_URL", "https://corral.example/")
    monkeypatch.setenv("CORRAL_CA_FILE", str(tmp_path / "ca.crt"))
    monkeypatch.setenv("CORRAL_TLS_CERT_FILE", str(tmp_path / "tls.crt"))
    assert OperatorConfig.from_env().corral == Corral("https://corral.example", b"CA", b"CERT")


def test_each_process_is_a_replica_of_its_own_unless_named() -> None:
    assert parse_identity("corral-operator-7d9f-x2k") == "corral-operator-7d9f-x2k"
    made = parse_identity(None)
    assert made.endswith(f"-{os.getpid()}") and IDENTITY.fullmatch(made)
    assert parse_identity("") == made


@pytest.mark.parametrize("text", ["Operator", "a_b", "-a", "a-", "a" * 201, "a/b"])
def test_an_identity_that_cannot_name_a_lease_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="CORRAL_OPERATOR_IDENTITY"):
        parse_identity(text)


def test_the_number_of_shards_is_bounded() -> None:
    assert parse_shards(None) == parse_shards("") == 64
    assert parse_shards("1") == 1 and parse_shards("1024") == 1024
    for text in ["0", "1025", "-1", "many", "2.5"]:
        with pytest.raises(ValueError, match="from 1 to 1024"):
            parse_shards(text)


def test_the_control_planes_started_at_once_are_bounded() -> None:
    assert parse_starts(None) == parse_starts("") == 2
    assert parse_starts("1") == 1 and parse_starts("64") == 64
    for text in ["0", "65", "-1", "many", "2.5"]:
        with pytest.raises(ValueError, match="from 1 to 64"):
            parse_starts(text)
