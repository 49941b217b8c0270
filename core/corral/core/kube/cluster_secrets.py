"""The Secret that keeps corral's credential for a cluster, in the system namespace and owned
by its Cluster: made once, when corral gets into the cluster (by an import or a
provisioning), and read through the connection registry from then on."""

from __future__ import annotations

from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.core_v1 import Secret

from corral.core.api import names
from corral.core.clusters.credential import Credential
from corral.core.kube.informer import Obj


def credential_secret(cluster: Obj, credential: Credential) -> Secret:
    meta = cluster["metadata"]
    return Secret(
        metadata=ObjectMeta(
            name=names.credential_secret_name(meta["name"]),
            namespace=names.SYSTEM_NAMESPACE,
            labels={names.LABEL_CLUSTER_CREDENTIAL: meta["name"]},
            ownerReferences=[
                OwnerReference(
                    apiVersion=names.API_VERSION,
                    kind=names.CLUSTER.kind,
                    name=meta["name"],
                    uid=meta["uid"],
                )
            ],
        ),
        type="Opaque",
        data=credential.secret_data(),
    )
