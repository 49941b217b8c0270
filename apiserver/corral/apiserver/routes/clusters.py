"""`/v3/clusters` (spec 4.2) and `/v3/etcdbackups` (docs/api.md, "etcd backups"): clusters,
their actions, and the etcd backups of provisioned ones. Every write of a cluster goes through
`services.clusters`.

A backup is an EtcdBackup in the namespace named after its cluster; its id is
`<cluster>:<name>`. The cluster's members see its backups; its owners (and administrators)
delete them. `backupEtcd` on the cluster makes one, and answers with it: the two families
live here together, since a route never imports another.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from corral.apiserver.http.body import AUTH_LIMIT, read_input, read_json
from corral.apiserver.http.encoding import json_response
from corral.apiserver.http.objects import name_of, object_fields, object_stamp
from corral.apiserver.http.query import action, label_selector
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.resources import handlers
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.resources.scoped import cluster_link, scoped_id, seen_by_members
from corral.apiserver.resources.subscriptions import Subscribable
from corral.apiserver.services import clusters, etcdbackups, tokens
from corral.apiserver.services import rotation as rotating
from corral.apiserver.services.clusterspec import (
    CONTAINER_LIMIT_DEFAULT,
    CUSTOMIZATIONS,
    NAMESPACE_QUOTA_DEFAULT,
    PSA_TEMPLATE,
)
from corral.apiserver.services.visibility import seen_cluster
from corral.core import errors
from corral.core.api import drivers
from corral.core.auth import ttl
from corral.core.clusters.state import state
from corral.core.kube.informer import Obj
from corral.core.projects import podsecurity
from corral.core.provisioning import admission, backups, rotation
from corral.core.provisioning.flavours import FLAVOURS

ACTIONS = ("generateKubeconfig", "backupEtcd", "restoreFromEtcdBackup", "rotateCertificates")
# Shown at the top level of a cluster as well as in its spec.
SPEC_FIELDS = ("kubernetesVersion", "localClusterAuthEndpoint", "agentEnvVars", *CUSTOMIZATIONS,
               PSA_TEMPLATE, NAMESPACE_QUOTA_DEFAULT, CONTAINER_LIMIT_DEFAULT)  # fmt: skip


def described(driver: str) -> str:
    """What a configuration accepts, in /v3/schemas: said for the flavours corral provisions,
    and for the hosted services it cannot make, that a create giving one is refused."""
    if driver in drivers.NOT_INSTALLED:
        return f"Refused (422 InvalidOption): {drivers.refusal(driver)}"
    if (flavour := FLAVOURS.get(driver)) is None:
        return ""
    return (
        f"Makes a {driver} cluster (docs/provisioning.md). kubernetesVersion: required here or "
        f"at the top level, a version of the setting kubernetes-version-catalog (v1.36.3, "
        f"1.36.3 or {flavour.example_version}). "
        f"networking.plugin: {', '.join(flavour.plugins)} (default {flavour.default_plugin}; "
        f"the pod network corral installs on the cluster's machines). Other keys are kept as "
        f"given, at most "
        f"{admission.MAX_CONFIG_BYTES // 1024} KiB in all. Fixed once created"
    )


SCHEMA = Schema(
    id="cluster",
    plural="clusters",
    fields={
        "name": Field("string", create=True, update=True, description="Display name"),
        "displayName": Field("string", create=True, update=True, required=True),
        "description": Field("string", create=True, update=True),
        "driver": Field(
            "enum",
            options=drivers.ALL,
            deprecated_options={drivers.LEGACY: drivers.DEPRECATED},
            description="Decided by the configuration given; none: imported, once imported",
        ),
        "state": readonly("string"),
        "transitioning": readonly("enum"),
        "transitioningMessage": readonly("string"),
        "enableNetworkPolicy": Field("boolean", create=True, update=True, default=False),
        "localClusterAuthEndpoint": Field("localClusterAuthEndpoint", create=True, update=True),
        "importedConfig": Field("importedConfig", create=True),
        "kubeConfig": Field("string", create=True, write_only=True),
        **{
            name: Field("json", create=True, description=described(driver))
            for name, driver in drivers.CONFIGS.items()
            if name != "importedConfig"
        },
        "kubernetesVersion": Field(
            "string",
            create=True,
            update=True,
            description="rke2 and k3s: a version of the setting kubernetes-version-catalog "
            "(v1.36.3, 1.36.3, or with the flavour's suffix), stored as the catalog's key; a "
            "change rolls the control plane to it, one minor version up at most "
            "(docs/provisioning.md). Other drivers: text, kept as given",
        ),
        "agentEnvVars": Field(
            "array[envVar]",
            create=True,
            update=True,
            description="name and value, or name and valueFrom (one of secretKeyRef, "
            "configMapKeyRef, fieldRef, resourceFieldRef)",
        ),
        **{name: Field("json", create=True, update=True) for name in CUSTOMIZATIONS},
        PSA_TEMPLATE: Field(
            "enum",
            create=True,
            update=True,
            options=("", *podsecurity.TEMPLATES),
            description="The Pod Security level of the cluster's project namespaces (empty: "
            "baseline). Only administrators may set a privileged one",
        ),
        NAMESPACE_QUOTA_DEFAULT: Field(
            "namespaceResourceQuota",
            create=True,
            update=True,
            description="the ResourceQuota of every namespace of a project that sets no "
            "namespaceDefaultResourceQuota of its own",
        ),
        CONTAINER_LIMIT_DEFAULT: Field(
            "containerResourceLimit",
            create=True,
            update=True,
            description="the container defaults of every namespace of a project that sets no "
            "containerDefaultResourceLimit of its own",
        ),
        "labels": Field("map[string]", create=True, update=True),
        "metadata": readonly("json"),
        "spec": readonly("json"),
        "status": readonly("json"),
    },
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
    resource_actions={
        "generateKubeconfig": {
            "input": "generateKubeconfigInput",
            "output": "generateKubeconfigOutput",
        },
        "backupEtcd": {},
        "restoreFromEtcdBackup": {"input": "restoreFromEtcdBackupInput"},
        "rotateCertificates": {"input": "rotateCertificatesInput", "output": rotation.OUTPUT_TYPE},
    },
)

KUBECONFIG_INPUT = Schema(
    id="generateKubeconfigInput",
    plural="generateKubeconfigInputs",
    embedded=True,
    fields={
        "ttl": Field(
            "int",
            create=True,
            description="Lifetime of the kubeconfig token in ms, up to 100 years, clamped by "
            "auth-token-max-ttl-minutes; 0: the maximum; not given: "
            "kubeconfig-default-token-ttl-minutes",
        ),
        "ttlMillis": Field("int", create=True, write_only=True, description="Alias of ttl"),
    },
)
KUBECONFIG_OUTPUT = Schema(
    id="generateKubeconfigOutput",
    plural="generateKubeconfigOutputs",
    embedded=True,
    fields={"config": readonly("string", "The kubeconfig, base64-encoded")},
)

# What `services.rotation` reads of the action's body, and what the action answers.
ROTATE_INPUT = Schema(
    id="rotateCertificatesInput",
    plural="rotateCertificatesInputs",
    embedded=True,
    fields={
        "caCertificates": Field("boolean", create=True, default=False,
                                description="Also new CAs (the cluster's and etcd's)"),
        "services": Field("array[enum]", create=True, options=rotation.SERVICES,
                          description="The services whose certificates rotate; empty: all. "
                          "Rancher's comma-separated text is accepted too"),
    },
)  # fmt: skip
ROTATE_OUTPUT = Schema(
    id=rotation.OUTPUT_TYPE,
    plural=f"{rotation.OUTPUT_TYPE}s",
    embedded=True,
    fields={"message": readonly("string", "What rotates, in Rancher's words")},
)


def fields(ask: Ask, obj: Obj) -> dict[str, Any]:
    """The resource's fields short of the custom resource's metadata, spec and status:
    small, so collections filter and sort by them."""
    meta, spec = obj["metadata"], obj.get("spec") or {}
    return {
        "id": name_of(obj),
        "name": spec.get("displayName", ""),
        "displayName": spec.get("displayName", ""),
        "description": spec.get("description", ""),
        "driver": spec.get("driver", ""),
        "enableNetworkPolicy": spec.get("enableNetworkPolicy", False),
        "labels": meta.get("labels") or {},
        **object_stamp(obj),
    }


def detail(ask: Ask, obj: Obj) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    return {
        **{name: spec[name] for name in SPEC_FIELDS if name in spec},
        **object_fields(
            obj, ("name", "creationTimestamp", "labels", "annotations", "uid", "generation")
        ),
    }


def links(ask: Ask, obj: Obj) -> dict[str, str]:
    cluster_id = name_of(obj)
    return {
        "nodes": f"{ask.base}/v3/clusters/{cluster_id}/nodes",
        "projects": f"{ask.base}/v3/projects?clusterId={cluster_id}",
    }


def listed(ask: Ask) -> list[Obj]:
    objs = ask.deps.stores.clusters.all()
    # Passes over every cluster that cannot leave one out are skipped: a page should cost the
    # page, and administrators see every cluster.
    if not ask.who.is_admin:
        objs = [c for c in objs if ask.who.access.sees_cluster(c["metadata"]["name"])]
    if selector_text := ask.query.get("labelSelector"):
        selector = label_selector(selector_text)
        objs = [c for c in objs if selector(c["metadata"].get("labels") or {})]
    return objs


def before_create(ask: Ask) -> None:
    if ask.writing and "action" in ask.query:
        raise errors.Invalid("actions act on one cluster: /v3/clusters/{id}", code="InvalidAction")
    clusters.may_create(ask.who)


FAMILY = Family[Obj](
    schema=SCHEMA,
    listed=listed,
    find=lambda ask, cluster_id: seen_cluster(ask.deps, ask.who, cluster_id),
    fields=fields,
    ident=name_of,
    state=state,
    detail=detail,
    links=links,
    actions=lambda ask, obj: ACTIONS,
    before_create=before_create,
    before_update=lambda ask, obj: clusters.may_change(ask.who, obj),
    # The local cluster is corral's own: no one removes it.
    before_delete=lambda ask, obj: clusters.may_delete(ask.who, obj),
    before_action=lambda ask, obj, name: clusters.may_act(ask.who, obj, name),
    create=lambda ask, body: clusters.create(ask.deps, ask.who, body),
    update=lambda ask, obj, body: clusters.update(ask.deps, ask.who, obj, body),
    delete=lambda ask, obj: clusters.delete(ask.deps, ask.who, obj),
    body_as_sent=True,
)

# `GET /v3/subscribe`: a cluster's changes go to whoever `find` would show it to.
SUBSCRIBABLE = Subscribable(
    FAMILY, cache="clusters", sees=lambda ask, obj: ask.who.access.sees_cluster(name_of(obj))
)

BACKUP_SCHEMA = Schema(
    id="etcdBackup",
    plural="etcdBackups",
    fields={
        "clusterId": readonly("reference[cluster]"),
        "manual": readonly("boolean"),
        "filename": readonly("string"),
        "location": readonly(
            "string",
            "pvc://<cluster>/etcd-backups/<file>, or "
            "s3://<bucket>/<folder>/<file> for a cluster with an S3 target",
        ),
        "size": readonly("int", "Bytes"),
        "sha256": readonly("string", "The file's SHA-256, of a backup in S3"),
        "s3": readonly(
            "json",
            "The S3 target (no key): endpoint, bucket, folder, region, "
            "endpointCA, skipSSLVerify, cloudCredentialName, and the object's size",
        ),
        "createdAt": readonly("date"),
        "kubernetesVersion": readonly("string"),
        "etcdVersion": readonly("string"),
        "revision": readonly("int"),
        "state": readonly("string", "activating, active or failed"),
        "transitioning": readonly("enum"),
        "transitioningMessage": readonly("string"),
        "metadata": readonly("json"),
        "spec": readonly("json"),
        "status": readonly("json"),
    },
    resource_methods=("GET", "DELETE"),
    collection_methods=("GET",),
)
RESTORE_INPUT = Schema(
    id="restoreFromEtcdBackupInput",
    plural="restoreFromEtcdBackupInputs",
    embedded=True,
    fields={
        "etcdBackupName": Field("string", create=True, description="A backup of this cluster"),
        "etcdBackupId": Field("reference[etcdBackup]", create=True,
                              description="Rancher's form: <cluster>:<name>"),
        "restoreRkeConfig": Field("enum", create=True, options=backups.RESTORE_MODES,
                                  description="\"\": etcd only; kubernetesVersion: and the "
                                  "version; all: and the rke2/k3s configuration"),
    },
)  # fmt: skip


def backup_state(obj: Obj) -> tuple[str, str, str]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == backups.COMPLETED:
            if condition.get("status") == "True":
                return "active", "no", ""
            return "failed", "error", condition.get("message", "")
    return "activating", "yes", "taking the snapshot"


def backup_fields(ask: Ask, obj: Obj) -> dict[str, Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return {
        "id": scoped_id(obj),
        "name": obj["metadata"]["name"],
        "namespaceId": obj["metadata"]["namespace"],
        "clusterId": spec.get("clusterId", ""),
        "manual": spec.get("manual", True),
        **{key: status.get(key, "") for key in (
            "filename", "location", "createdAt", "kubernetesVersion", "etcdVersion", "sha256")},
        **({"s3": status["s3"]} if "s3" in status else {}),
        "size": status.get("size", 0),
        "revision": status.get("revision", 0),
        **object_stamp(obj),
    }  # fmt: skip


def backup_detail(ask: Ask, obj: Obj) -> dict[str, Any]:
    shown = object_fields(obj, ("name", "namespace", "creationTimestamp"))
    # The cluster's spec inside is for restores, not for reading.
    shown["status"] = {k: v for k, v in shown["status"].items() if k != "clusterObject"}
    return shown


BACKUPS = Family[Obj](
    schema=BACKUP_SCHEMA,
    **seen_by_members(lambda stores: stores.etcdbackups),
    fields=backup_fields,
    state=backup_state,
    detail=backup_detail,
    links=cluster_link,
    before_delete=lambda ask, obj: etcdbackups.may_delete(ask.who, obj),
    delete=lambda ask, obj: etcdbackups.delete(ask.deps, ask.who, obj),
    noun="etcd backup",
)

routes = handlers.routes(FAMILY, BACKUPS)


@routes.post(FAMILY.collection_route + "/{id}")
async def cluster_action(request: web.Request) -> web.Response:
    asked, obj = await handlers.found(FAMILY, request)
    name = action(request, set(ACTIONS))
    if name is None:
        raise errors.Unsupported("POST on a cluster needs ?action=<name>")
    clusters.may_act(asked.who, obj, name)
    if name == clusters.GENERATE_KUBECONFIG:
        return await generate_kubeconfig(request, asked, obj)
    if name == "backupEtcd":
        await read_input(request, name)
        created = await etcdbackups.backup(asked.deps, obj)
        return json_response(BACKUPS.render(asked, created), status=201)
    if name == "restoreFromEtcdBackup":
        written = await etcdbackups.restore(
            asked.deps, obj, await read_input(request, RESTORE_INPUT)
        )
        return json_response(FAMILY.render(asked, written), status=201)
    body = await read_json(request)
    rotation.check_input(body)
    wanted = await rotating.rotate(asked.deps, obj, body)
    return json_response({"type": rotation.OUTPUT_TYPE, "message": rotation.message(wanted)})


async def generate_kubeconfig(request: web.Request, asked: Ask, obj: Obj) -> web.Response:
    """A kubeconfig for kubectl through corral's proxy, with a kubeconfig token for this user
    and cluster; generating again replaces the token. `ttl` (ms, alias `ttlMillis`) chooses
    its lifetime, `kubeconfig-default-token-ttl-minutes` when not given."""
    body = await read_input(request, KUBECONFIG_INPUT, AUTH_LIMIT)
    given = body.get("ttlMillis", body.get("ttl"))
    issued = await tokens.issue_kubeconfig_token(
        asked.deps, asked.who, name_of(obj), None if given is None else ttl.requested(given)
    )
    config = clusters.kubeconfig_for(asked.deps, obj, issued.value, asked.base)
    return json_response({"type": "generateKubeconfigOutput", "config": config})
