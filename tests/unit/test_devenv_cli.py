from __future__ import annotations

from corral.devenv.cli import masked


def test_dev_env_is_printed_without_its_secrets() -> None:
    text = "CORRAL_URL=https://h\nCORRAL_TOKEN=token-abcde:SECRETKEY\nCORRAL_ADMIN_PASSWORD=pw123\n"
    shown = masked(text)
    assert "SECRETKEY" not in shown and "pw123" not in shown
    assert "CORRAL_URL=https://h" in shown and "token-abcde" in shown
