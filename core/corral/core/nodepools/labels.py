"""The labels a node pool's machines carry as nodes: the pool's `nodeLabels` and its name
under `management.svc.io/node-pool`.

Every driver's machine gets them, whoever registers its node: kwok's driver writes them into
the node it makes; a real machine registers with its pool's name (`POST /v3/connect/register`
gives it, as the node command its driver runs names no label) and the pool reconciler puts
them all on its node. The autoscaler's template node of the pool carries them too, so a pod
that selects the pool fits the node the pool would add when it fits the node that joins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.core.api import names


def machine_labels(pool_name: str, spec: Mapping[str, Any]) -> dict[str, str]:
    """The labels of the machines of the pool named `pool_name` whose spec is `spec`."""
    return {**(spec.get("nodeLabels") or {}), names.LABEL_NODE_POOL: pool_name}
