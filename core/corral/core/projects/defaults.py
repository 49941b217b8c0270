"""The two projects every cluster gets once it is Ready, and the namespaces they start with.

Their names are derived from the cluster id, so creating them is idempotent and every replica
of the operator agrees on them without reading anything.
"""

from __future__ import annotations

from corral.core.api import ids

DEFAULT = "Default"
SYSTEM = "System"
LABEL_ROLE = "management.svc.io/project-role"  # "default" or "system"

# The namespaces each starts with, when they exist and belong to no project yet.
STARTING_NAMESPACES = {
    DEFAULT: ("default",),
    SYSTEM: ("kube-system", "kube-public", "kube-node-lease", "svc-system"),
}


def project_name(cluster_id: str, which: str) -> str:
    """`p-` and five characters of the ids alphabet, from a hash of cluster and kind."""
    return ids.derived("p", cluster_id, which)
