"""Logging set-up shared by corral's processes."""

from __future__ import annotations

import json
import logging


def quiet_http_clients() -> None:
    """The Kubernetes client logs every request at INFO; that is debugging detail."""
    for name in ("httpx", "httpx2", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)


def quiet_ssh_client() -> None:
    """asyncssh logs every command it runs at INFO, and the node command a machine runs holds
    a registration token: only its warnings are kept."""
    logging.getLogger("asyncssh").setLevel(logging.WARNING)


def words(command: list[str]) -> str:
    """A command for a log line, each word a JSON string: quotes, backslashes, line breaks,
    NUL and every other control or non-ASCII character escaped, so no word the caller chose
    can end the line or write one that looks like corral's."""
    return " ".join(json.dumps(word) for word in command)
