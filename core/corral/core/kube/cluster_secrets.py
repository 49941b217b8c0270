"""The Secret that keeps corral's credential for a cluster, in the system namespace and owned
by its Cluster: made once, when corral gets into the cluster (by an import or a
provisioning), and read through the connection registry from then on."""

from __future__ import annotations

from lightkube.models.meta_v1 import ObjectMeta, OwnerReference
from lightkube.resources.core_v1 import Secret

from corral.core.api import names
from corral.core.clusters.credential import Credential
from corral.core.kube.informer import Obj


def owned_secret(cluster: Obj, name: str, label: str, data: dict[str, str]) -> Secret:
    """A Secret of svc-system owned by the Cluster (gone with it), labelled `label` with the
    cluster's name so its informer finds it."""
    meta = cluster["metadata"]
    return Secret(
        metadata=ObjectMeta(
            name=name,
            namespace=names.SYSTEM_NAMESPACE,
            labels={label: meta["name"]},
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
        data=data,
    )


def credential_secret(cluster: Obj, credential: Credential) -> Secret:
    name = cluster["metadata"]["name"]
    return owned_secret(cluster, names.credential_secret_name(name),
                        names.LABEL_CLUSTER_CREDENTIAL, credential.secret_data())  # fmt: skip
