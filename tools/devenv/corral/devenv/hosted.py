"""What the management cluster needs so that hosted control planes can run on its real nodes.

Their pods (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok) run from
the local control-plane image (images.py), and from a slim one of the previous Kubernetes minor
for clusters created there and upgraded, keep etcd's data on volumes that the management
cluster's own kube-controller-manager provisions as host folders, and find both through two
settings that corral reads.
"""

from __future__ import annotations

from pathlib import Path

from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.storage_v1 import StorageClass

from corral.core.provisioning import catalog
from corral.core.settings import STORAGE_CLASS_SETTING
from corral.devenv.images import KWOK_COMMAND, PREVIOUS_COMMANDS, ControlPlaneImage
from corral.devenv.nodeassets import NodeAssets

STORAGE_CLASS = "corral-hostpath"
# Where kube-controller-manager's hostPath provisioner puts each volume (`<dir>/<uuid>`); a
# fixed path in Kubernetes, and its deleter only removes volumes below /tmp.
HOSTPATH_DIR = Path("/tmp/hostpath_pv")  # noqa: S108 - Kubernetes' path, not a temp file of ours


def storage_class() -> StorageClass:
    return StorageClass(
        metadata=ObjectMeta(name=STORAGE_CLASS),
        provisioner="kubernetes.io/host-path",
        reclaimPolicy="Delete",
        volumeBindingMode="Immediate",
    )


def settings(
    image: ControlPlaneImage,
    previous: ControlPlaneImage | None = None,
    node_assets: NodeAssets | None = None,
) -> dict[str, str]:
    """The values of corral's settings that point hosted control planes at `image` and at the
    StorageClass above. With `previous` (the slim image of the Kubernetes minor before), the
    catalog has its version too, so a cluster can be created there and moved to `image`'s:
    its apiserver, controller manager and scheduler come from `previous`, etcd, the etcd tools
    and kwok from `image` (the slim build has none of them). With `node_assets`, `image`'s
    version also has the files real machines download and the pod network's images; the
    previous version has none (its kubelet would be newer than its apiserver), so it
    provisions simulated workers only."""
    components = (*catalog.REQUIRED, *catalog.OPTIONAL)
    releases = {
        image.version: catalog.binaries(dict.fromkeys(components, image.reference), (KWOK_COMMAND,))
    }
    nodes = {}
    if node_assets is not None:
        if node_assets.version != image.version:
            raise ValueError(f"node files of {node_assets.version} for a {image.version} catalog")
        releases[image.version] |= node_assets.components()
        nodes[image.version] = node_assets.node()
    if previous is not None:
        images = dict.fromkeys(components, image.reference) | dict.fromkeys(
            PREVIOUS_COMMANDS, previous.reference
        )
        releases[previous.version] = catalog.binaries(images, (KWOK_COMMAND,))
    return {
        catalog.SETTING: catalog.document(releases, nodes),
        STORAGE_CLASS_SETTING: STORAGE_CLASS,
    }
