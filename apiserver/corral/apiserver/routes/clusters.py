"""`/v3/clusters` (spec 4.2): import, list, get, update, delete, and the cluster actions.

Importing happens synchronously (`services.importing`), so that a bad kubeconfig or an
unreachable server is answered at once and nothing is stored.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from aiohttp import web
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.types import PatchType

from corral.apiserver.auth.authn import principal
from corral.apiserver.auth.authz import require_admin
from corral.apiserver.deps import DEPS, access, base_url, caller, deps
from corral.apiserver.http import envelope
from corral.apiserver.http.body import (
    AUTH_LIMIT,
    description_text,
    flag,
    name_text,
    or_empty,
    read_json,
    text,
)
from corral.apiserver.http.errors import ApiError
from corral.apiserver.http.objects import name_of, object_fields, object_stamp
from corral.apiserver.http.query import action, label_selector
from corral.apiserver.http.schemas import Field, Schema, readonly
from corral.apiserver.http.urls import v3
from corral.apiserver.services import clusters, etcdbackups, importing, owned, rotation, tokens
from corral.apiserver.services import upgrade as upgrading
from corral.apiserver.services.visibility import owned_cluster, visible_cluster
from corral.core import errors, kubeconfig
from corral.core.api import ids, names
from corral.core.auth import ttl
from corral.core.clusters.state import state
from corral.core.kube import kinds
from corral.core.kube.client import as_dict
from corral.core.kube.informer import Obj
from corral.core.projects import podsecurity, quota
from corral.core.provisioning import admission, v1
from corral.core.provisioning.flavours import FLAVOURS
from corral.core.workloads.spec import env_var

CONFIG_DRIVERS = {
    "importedConfig": "imported",
    "rke2Config": "rke2",
    "k3sConfig": "k3s",
    "aksConfig": "AKS",
    "eksConfig": "EKS",
    "gkeConfig": "GKE",
}
# The legacy engine (spec 2.3): accepted on stored clusters, marked deprecated, never made.
LEGACY_DRIVER = "svcKubernetesEngine"
DEPRECATED_DRIVER = (
    f"{LEGACY_DRIVER} is the legacy engine, deprecated: clusters are provisioned as rke2 or "
    "k3s (provisioning.svc.io/v1)"
)
DRIVERS = (*CONFIG_DRIVERS.values(), "local", LEGACY_DRIVER)
# Agent customizations (spec 2.3 shows no fields): stored as given, bounded in size.
CUSTOMIZATIONS = ("clusterAgentDeploymentCustomization", "fleetAgentDeploymentCustomization")
MAX_CUSTOMIZATION_BYTES = 64 * 1024
PSA_TEMPLATE = podsecurity.CLUSTER_FIELD
# What a project that sets no quota or container defaults of its own gets in this cluster.
NAMESPACE_QUOTA_DEFAULT = quota.CLUSTER_NAMESPACE_QUOTA
CONTAINER_LIMIT_DEFAULT = quota.CLUSTER_CONTAINER_DEFAULTS
MAX_AGENT_ENV = 64
ACTIONS = ("generateKubeconfig", "backupEtcd", "restoreFromEtcdBackup", "rotateCertificates")
# Fields a PUT may change; everything else is fixed at creation.
UPDATABLE = {"displayName", "description", "enableNetworkPolicy", "localClusterAuthEndpoint",
             "agentEnvVars", "kubernetesVersion", *CUSTOMIZATIONS, PSA_TEMPLATE,
             NAMESPACE_QUOTA_DEFAULT, CONTAINER_LIMIT_DEFAULT}  # fmt: skip
# Shown at the top level of a cluster as well as in its spec.
SPEC_FIELDS = ("kubernetesVersion", "localClusterAuthEndpoint", "agentEnvVars", *CUSTOMIZATIONS,
               PSA_TEMPLATE, NAMESPACE_QUOTA_DEFAULT, CONTAINER_LIMIT_DEFAULT)  # fmt: skip
IMMUTABLE = {"driver", "kubeConfig", *CONFIG_DRIVERS}


def described(driver: str) -> str:
    """What a configuration accepts, in /v3/schemas: said for the flavours corral provisions."""
    if (flavour := FLAVOURS.get(driver)) is None:
        return ""
    return (
        f"Makes a {driver} cluster (docs/provisioning.md). kubernetesVersion: required here or "
        f"at the top level, a version of the setting kubernetes-version-catalog (v1.36.3, "
        f"1.36.3 or {flavour.example_version}). "
        f"networking.plugin: {', '.join(flavour.plugins)} (default {flavour.default_plugin}; "
        f"recorded, no CNI is installed). Other keys are kept as given, at most "
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
            options=DRIVERS,
            deprecated_options={LEGACY_DRIVER: DEPRECATED_DRIVER},
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
            for name, driver in CONFIG_DRIVERS.items()
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
        "rotateCertificates": {"input": "rotateCertificatesInput"},
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

routes = web.RouteTableDef()


def fields(obj: Obj) -> dict[str, Any]:
    """The resource's fields short of the custom resource's metadata, spec and status:
    small, so collections filter and sort by them."""
    meta, spec = obj["metadata"], obj.get("spec") or {}
    current, transitioning, message = state(obj)
    return {
        "id": name_of(obj),
        "name": spec.get("displayName", ""),
        "displayName": spec.get("displayName", ""),
        "description": spec.get("description", ""),
        "driver": spec.get("driver", ""),
        "state": current,
        "transitioning": transitioning,
        "transitioningMessage": message,
        "enableNetworkPolicy": spec.get("enableNetworkPolicy", False),
        "labels": meta.get("labels") or {},
        **object_stamp(obj),
    }


def render(request: web.Request, obj: Obj) -> dict[str, Any]:
    base, cluster_id = base_url(request), name_of(obj)
    spec = obj.get("spec") or {}
    body = {
        **fields(obj),
        **{name: spec[name] for name in SPEC_FIELDS if name in spec},
        **object_fields(
            obj, ("name", "creationTimestamp", "labels", "annotations", "uid", "generation")
        ),
    }
    links = {
        "nodes": f"{base}/v3/clusters/{cluster_id}/nodes",
        "projects": f"{base}/v3/projects?clusterId={cluster_id}",
    }
    rendered = envelope.resource(base, SCHEMA, body, actions=ACTIONS, links=links)
    if cluster_id == names.LOCAL_CLUSTER:
        rendered["links"].pop("remove", None)
    return rendered


@routes.get(v3("clusters"))
async def list_clusters(request: web.Request) -> web.Response:
    who = principal(request)
    objs = request.app[DEPS].stores.clusters.all()
    # Passes over every cluster that cannot leave one out are skipped: a page should cost the
    # page, and administrators see every cluster.
    if not who.is_admin:
        allowed = access(request)
        objs = [c for c in objs if allowed.sees_cluster(c["metadata"]["name"])]
    if selector_text := request.query.get("labelSelector"):
        selector = label_selector(selector_text)
        objs = [c for c in objs if selector(c["metadata"].get("labels") or {})]
    body = envelope.collection(
        base_url(request),
        SCHEMA,
        objs,
        name_of,
        fields,
        lambda o: render(request, o),
        request.query,
        request.path,
        can_create=who.is_admin,
    )
    return web.json_response(body)


@routes.get(v3("clusters", "/{id}"))
async def get_cluster(request: web.Request) -> web.Response:
    return web.json_response(
        render(request, visible_cluster(deps(request), caller(request), request.match_info["id"]))
    )


@routes.post(v3("clusters"))
async def create_cluster(request: web.Request) -> web.Response:
    who = principal(request)
    if "action" in request.query:
        raise ApiError(422, "InvalidAction", "actions act on one cluster: /v3/clusters/{id}")
    require_admin(who, "create clusters")
    body = await read_json(request)
    if body.get("type", "cluster") != "cluster":
        raise errors.invalid("type", "type must be cluster")
    display = name_text(body, "displayName") or name_text(body, "name")
    if not display:
        raise errors.missing("displayName")
    driver = driver_of(body)
    spec: dict[str, Any] = {"displayName": display, "driver": driver}
    spec |= updatable_spec(body)
    if (flavour := FLAVOURS.get(driver)) is not None:
        admitted = admission.admit(
            flavour,
            body.get(flavour.config_field),
            spec.get("kubernetesVersion"),
            request.app[DEPS].stores.catalog(),
        )
        spec["kubernetesVersion"] = admitted.version
        spec[flavour.config_field] = admitted.config
        owned.check_s3_target(deps(request), caller(request), admitted.config, flavour.config_field)
    for config, config_driver in CONFIG_DRIVERS.items():
        # A driver given alone (spec 2.3: every configuration is optional) stores none.
        if config_driver == driver and config not in spec and body.get(config) is not None:
            spec[config] = body[config]
    labels = labels_of(body)
    if driver == "imported" and (kubeconfig := given_kubeconfig(body)) is not None:
        created = await importing.import_cluster(request, kubeconfig, spec, labels)
    else:
        name = ids.generate("c") if driver == "imported" else f"c-m-{ids.random_suffix(8)}"
        meta = ObjectMeta(name=name, labels=labels)
        created = as_dict(
            await request.app[DEPS].kube.create(kinds.Cluster(metadata=meta, spec=spec))
        )
    request.app[DEPS].stores.clusters.put(created)
    return web.json_response(render(request, created), status=201)


def given_kubeconfig(body: dict[str, Any]) -> Any:
    """The kubeconfig of an import, as the body gives it; None when it gives no import."""
    config = body.get("importedConfig")
    if config is None and "kubeConfig" not in body:
        return None
    if config is not None and not isinstance(config, dict):
        raise errors.invalid("importedConfig", "importedConfig must be an object")
    config = or_empty(config, {})
    for where, value in (("importedConfig.kubeConfig", config.get("kubeConfig")),
                         ("kubeConfig", body.get("kubeConfig"))):  # fmt: skip
        if value is not None and not isinstance(value, str):
            raise errors.invalid(where, f"{where} must be text")
    return config.get("kubeConfig") or body.get("kubeConfig") or ""


def driver_of(body: dict[str, Any]) -> str:
    configs = [name for name in CONFIG_DRIVERS if body.get(name) is not None]
    if "kubeConfig" in body and "importedConfig" not in configs:
        configs.append("importedConfig")
    explicit = body.get("driver")
    if explicit is not None and explicit not in DRIVERS:
        raise errors.invalid(
            "driver",
            f"unknown driver {explicit!r}; known: {', '.join(DRIVERS)}",
            code="InvalidOption",
        )
    if explicit == "local":
        raise errors.invalid(
            "driver", "the local cluster is registered by corral itself", code="InvalidOption"
        )
    if explicit == LEGACY_DRIVER:
        raise errors.invalid("driver", DEPRECATED_DRIVER, code="InvalidOption")
    if len(configs) > 1:
        raise errors.invalid(
            configs[1], f"give one cluster configuration, not {', '.join(configs)}"
        )
    if not configs:
        # Every configuration is optional (spec 2.3): a cluster of no configuration waits,
        # Pending, to be imported (PUT importedConfig.kubeConfig), or provisioned.
        return explicit or "imported"
    driver = CONFIG_DRIVERS[configs[0]]
    if explicit is not None and explicit != driver:
        raise errors.invalid("driver", f"{configs[0]} makes a {driver} cluster, not {explicit}")
    for name in configs:
        if body.get(name) is not None and not isinstance(body[name], dict):
            raise errors.invalid(name, f"{name} must be an object")
    return driver


def updatable_spec(body: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if "description" in body:
        spec["description"] = description_text(body)
    if "enableNetworkPolicy" in body:
        spec["enableNetworkPolicy"] = flag(body, "enableNetworkPolicy", False)
    if "kubernetesVersion" in body:
        spec["kubernetesVersion"] = text(body, "kubernetesVersion", max_length=64)
    if "localClusterAuthEndpoint" in body:
        endpoint = or_empty(body["localClusterAuthEndpoint"], {})
        if not isinstance(endpoint, dict):
            raise errors.invalid("localClusterAuthEndpoint", "must be an object")
        spec["localClusterAuthEndpoint"] = {
            "enabled": flag(endpoint, "enabled", False),
            "fqdn": text(endpoint, "fqdn", max_length=253),
            "caCerts": text(endpoint, "caCerts", max_length=65536),
        }
        if (
            spec["localClusterAuthEndpoint"]["enabled"]
            and not spec["localClusterAuthEndpoint"]["fqdn"]
        ):
            raise errors.invalid("localClusterAuthEndpoint", "an enabled endpoint needs an fqdn")
    if "agentEnvVars" in body:
        env = or_empty(body["agentEnvVars"], [])
        if not isinstance(env, list) or len(env) > MAX_AGENT_ENV:
            raise errors.invalid(
                "agentEnvVars", f"agentEnvVars must be a list of at most {MAX_AGENT_ENV}"
            )
        spec["agentEnvVars"] = [env_var(e, f"agentEnvVars[{i}]") for i, e in enumerate(env)]
    for name in CUSTOMIZATIONS:
        if name in body:
            spec[name] = customization(body, name)
    if PSA_TEMPLATE in body:
        spec[PSA_TEMPLATE] = podsecurity.check_template(body[PSA_TEMPLATE], PSA_TEMPLATE)
    if NAMESPACE_QUOTA_DEFAULT in body:
        value = body[NAMESPACE_QUOTA_DEFAULT] or {}
        if not isinstance(value, dict):
            raise errors.invalid(NAMESPACE_QUOTA_DEFAULT, "must be an object with a limit")
        limits = quota.parse_limits(value.get("limit"), f"{NAMESPACE_QUOTA_DEFAULT}.limit")
        spec[NAMESPACE_QUOTA_DEFAULT] = {"limit": limits} if limits else None
    if CONTAINER_LIMIT_DEFAULT in body:
        defaults = quota.parse_limits(
            body[CONTAINER_LIMIT_DEFAULT], CONTAINER_LIMIT_DEFAULT, quota.CONTAINER_DEFAULT_FIELDS
        )
        quota.check_container_defaults(defaults, CONTAINER_LIMIT_DEFAULT)
        spec[CONTAINER_LIMIT_DEFAULT] = defaults or None
    return spec


def customization(body: dict[str, Any], name: str) -> dict[str, Any]:
    """An agent customization: an object, kept as given (the interface shows no fields)."""
    value = or_empty(body[name], {})
    if not isinstance(value, dict):
        raise errors.invalid(name, f"{name} must be an object")
    if len(json.dumps(value)) > MAX_CUSTOMIZATION_BYTES:
        raise errors.invalid(name, f"{name} may be at most {MAX_CUSTOMIZATION_BYTES} bytes")
    return value


def labels_of(body: dict[str, Any], current: dict[str, str] | None = None) -> dict[str, str]:
    """The labels a body gives; those naming the cluster's /v1 view only as `current` has
    them (a client may put back what it read)."""
    labels = or_empty(body.get("labels"), {})
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise errors.invalid("labels", "labels must map text to text")
    v1.check_labels(labels, current or {})
    return labels


@routes.put(v3("clusters", "/{id}"))
async def update_cluster(request: web.Request) -> web.Response:
    obj = owned_cluster(deps(request), caller(request), request.match_info["id"], "change it")
    body = await read_json(request)
    spec = obj.get("spec") or {}
    kubeconfig = given_kubeconfig(body) if awaits_import(request, obj) else None
    if kubeconfig is not None:
        body = {k: v for k, v in body.items() if k not in ("importedConfig", "kubeConfig")}
    for field in sorted(IMMUTABLE & set(body)):
        if field == "driver" and body[field] == spec.get("driver"):
            continue
        raise errors.invalid(
            field, f"{field} cannot be changed after the cluster is created", code="InvalidAction"
        )
    patch = updatable_spec(body)
    template = patch.get(PSA_TEMPLATE, spec.get(PSA_TEMPLATE, ""))
    if template != spec.get(PSA_TEMPLATE, "") and not podsecurity.may_set_template(
        template, principal(request).is_admin
    ):
        raise errors.forbidden(f"only administrators may set {PSA_TEMPLATE} {template}")
    flavour = FLAVOURS.get(spec.get("driver", ""))
    version = patch.pop("kubernetesVersion") if flavour is not None and (
        "kubernetesVersion" in patch) else None  # fmt: skip
    display = name_text(body, "displayName") or name_text(body, "name")
    if display:
        patch["displayName"] = display
    labels = labels_of(body, obj["metadata"].get("labels")) if "labels" in body else None
    # Everything else was checked first: an import or a version change is not half of a
    # refused request.
    if flavour is not None and version is not None:
        obj = await upgrading.change_version(request, obj, flavour, version)
    if kubeconfig is not None:
        obj = await importing.import_into(request, kubeconfig, obj)
        request.app[DEPS].stores.clusters.put(obj)
    merge: dict[str, Any] = {"spec": {**patch}}
    for name in CUSTOMIZATIONS:
        # A customization given replaces the stored one whole, not merged into it.
        if name in patch:
            merge["spec"][name] = replacing(spec.get(name), patch[name])
    if labels is not None:
        merge["metadata"] = {"labels": labels}
    if patch or labels is not None:
        obj = as_dict(
            await request.app[DEPS].kube.patch(
                kinds.Cluster, obj["metadata"]["name"], merge, patch_type=PatchType.MERGE
            )
        )
        request.app[DEPS].stores.clusters.put(obj)
    return web.json_response(render(request, obj))


def replacing(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`: keys of `old` that `new`
    lacks are removed (null), not kept."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        patch[key] = replacing(old.get(key), value)
    return patch


def awaits_import(request: web.Request, obj: Obj) -> bool:
    """An imported cluster corral has no credential for: made with no configuration, it is
    imported by the first PUT that gives a kubeconfig."""
    name = obj["metadata"]["name"]
    return (obj.get("spec") or {}).get("driver") == "imported" and (
        request.app[DEPS].connections.credential(name) is None
    )


@routes.delete(v3("clusters", "/{id}"))
async def delete_cluster(request: web.Request) -> web.Response:
    obj = owned_cluster(deps(request), caller(request), request.match_info["id"], "delete it")
    await clusters.delete(request, obj)
    return web.Response(status=204)


@routes.post(v3("clusters", "/{id}"))
async def cluster_action(request: web.Request) -> web.Response:
    obj = visible_cluster(deps(request), caller(request), request.match_info["id"])
    name = action(request, set(ACTIONS))
    if name is None:
        raise ApiError(405, "MethodNotAllowed", "POST on a cluster needs ?action=<name>")
    if name == "generateKubeconfig":
        return await generate_kubeconfig(request, obj)
    owned_cluster(deps(request), caller(request), obj["metadata"]["name"], name)
    if name == "backupEtcd":
        return await etcdbackups.backup(request, obj)
    if name == "restoreFromEtcdBackup":
        written = await etcdbackups.restore(request, obj, await read_json(request))
        return web.json_response(render(request, written), status=201)
    driver = obj["spec"]["driver"]
    if name == "rotateCertificates" and driver in FLAVOURS:
        return await rotation.rotate(request, obj)
    raise ApiError(
        422,
        "InvalidAction",
        f"{name} needs a cluster that corral provisions (rke2 or k3s); this cluster "
        f"is {driver}, and its etcd and certificates are managed outside corral",
    )


async def generate_kubeconfig(request: web.Request, obj: Obj) -> web.Response:
    """A kubeconfig for kubectl through corral's proxy, with a kubeconfig token for this user
    and cluster; generating again replaces the token. `ttl` (ms, alias `ttlMillis`) chooses
    its lifetime, `kubeconfig-default-token-ttl-minutes` when not given."""
    body = await read_json(request, AUTH_LIMIT)
    given = body.get("ttlMillis", body.get("ttl"))
    cluster_id = obj["metadata"]["name"]
    issued = await tokens.issue_kubeconfig_token(
        deps(request), caller(request), cluster_id, None if given is None else ttl.requested(given)
    )
    config = kubeconfig.build(
        cluster_id,
        f"{base_url(request)}/k8s/clusters/{cluster_id}",
        request.app[DEPS].corral_ca,
        kubeconfig.Credentials(token=issued.value),
    )
    endpoint = (obj.get("spec") or {}).get("localClusterAuthEndpoint") or {}
    if endpoint.get("enabled"):
        direct = f"{cluster_id}-fqdn"
        ca = endpoint.get("caCerts", "").encode() or None
        config["clusters"].append(
            {
                "name": direct,
                "cluster": {
                    "server": f"https://{endpoint['fqdn']}",
                    **({"certificate-authority-data": base64.b64encode(ca).decode()} if ca else {}),
                },
            }
        )
        config["contexts"].append(
            {"name": direct, "context": {"cluster": direct, "user": cluster_id}}
        )
    encoded = base64.b64encode(kubeconfig.dump(config).encode()).decode()
    return web.json_response({"type": "generateKubeconfigOutput", "config": encoded})
