"""Operator configuration, read once from the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class OperatorConfig:
    liveness_endpoint: str
    peering_name: str
    priority: int

    @classmethod
    def from_env(cls) -> OperatorConfig:
        return cls(
            liveness_endpoint=os.environ.get(
                "CORRAL_OPERATOR_LIVENESS", "http://0.0.0.0:8080/healthz"
            ),
            peering_name=os.environ.get("CORRAL_OPERATOR_PEERING", "corral"),
            priority=int(os.environ.get("CORRAL_OPERATOR_PRIORITY", "0")),
        )
