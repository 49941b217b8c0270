"""Logging set-up shared by corral's processes."""

from __future__ import annotations

import logging


def quiet_http_clients() -> None:
    """The Kubernetes client logs every request at INFO; that is debugging detail."""
    for name in ("httpx", "httpx2", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
