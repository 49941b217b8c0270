"""What a `/v3` cluster body asks for: its driver (from the configuration it gives), the
kubeconfig of an import, its labels, and the spec fields a create or an update may set, each
checked before anything is written."""

from __future__ import annotations

import json
from typing import Any

from corral.apiserver.http.body import description_text, flag, or_empty, text
from corral.core import errors
from corral.core.api import drivers
from corral.core.projects import podsecurity, quota
from corral.core.provisioning import v1
from corral.core.tunnel import settings

# The fleet agent's customization (corral runs no fleet agent): stored as given, bounded.
FLEET_CUSTOMIZATION = "fleetAgentDeploymentCustomization"
CUSTOMIZATIONS = (settings.CUSTOMIZATION, FLEET_CUSTOMIZATION)
MAX_CUSTOMIZATION_BYTES = 64 * 1024
PSA_TEMPLATE = podsecurity.CLUSTER_FIELD
# What a project that sets no quota or container defaults of its own gets in this cluster.
NAMESPACE_QUOTA_DEFAULT = quota.CLUSTER_NAMESPACE_QUOTA
CONTAINER_LIMIT_DEFAULT = quota.CLUSTER_CONTAINER_DEFAULTS
# Fixed at creation: an update that gives another value is refused, naming the field.
IMMUTABLE = {"driver", "kubeConfig", *drivers.CONFIGS}


def given_kubeconfig(body: dict[str, Any]) -> Any:
    """The kubeconfig of an import, as the body gives it; None when it gives no import."""
    config = body.get("importedConfig")
    if config is None and "kubeConfig" not in body:
        return None
    if config is not None and not isinstance(config, dict):
        raise errors.invalid("importedConfig", "importedConfig must be an object")
    config = or_empty(config, {})
    for key in config:
        if key != "kubeConfig":
            raise errors.unknown(f"importedConfig.{key}", "importedConfig")
    for where, value in (("importedConfig.kubeConfig", config.get("kubeConfig")),
                         ("kubeConfig", body.get("kubeConfig"))):  # fmt: skip
        if value is not None and not isinstance(value, str):
            raise errors.invalid(where, f"{where} must be text")
    return config.get("kubeConfig") or body.get("kubeConfig") or ""


def driver_of(body: dict[str, Any]) -> str:
    configs = [name for name in drivers.CONFIGS if body.get(name) is not None]
    if "kubeConfig" in body and "importedConfig" not in configs:
        configs.append("importedConfig")
    explicit = body.get("driver")
    for name in configs:
        if drivers.CONFIGS[name] in drivers.NOT_INSTALLED:
            raise errors.invalid(name, drivers.refusal(drivers.CONFIGS[name]), "InvalidOption")
    if isinstance(explicit, str) and (service := drivers.not_installed(explicit)):
        raise errors.invalid("driver", drivers.refusal(service), code="InvalidOption")
    if explicit is not None and explicit not in drivers.ALL:
        raise errors.invalid(
            "driver",
            f"unknown driver {explicit!r}; known: {', '.join(drivers.ALL)}",
            code="InvalidOption",
        )
    if explicit == drivers.LOCAL:
        raise errors.invalid(
            "driver", "the local cluster is registered by corral itself", code="InvalidOption"
        )
    if explicit == drivers.LEGACY:
        raise errors.invalid("driver", drivers.DEPRECATED, code="InvalidOption")
    if len(configs) > 1:
        raise errors.invalid(
            configs[1], f"give one cluster configuration, not {', '.join(configs)}"
        )
    if not configs:
        # Every configuration is optional (spec 2.3): a cluster of no configuration waits,
        # Pending, to be imported (PUT importedConfig.kubeConfig), or provisioned.
        return explicit or drivers.IMPORTED
    driver = drivers.CONFIGS[configs[0]]
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
        for key in endpoint:
            if key not in ("enabled", "fqdn", "caCerts"):
                raise errors.unknown(f"localClusterAuthEndpoint.{key}", "the endpoint")
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
    if settings.AGENT_ENV in body:
        spec[settings.AGENT_ENV] = settings.agent_env(or_empty(body[settings.AGENT_ENV], []))
    if settings.CUSTOMIZATION in body:
        spec[settings.CUSTOMIZATION] = settings.customization(
            or_empty(body[settings.CUSTOMIZATION], {})
        )
    if FLEET_CUSTOMIZATION in body:
        spec[FLEET_CUSTOMIZATION] = customization(body, FLEET_CUSTOMIZATION)
    if PSA_TEMPLATE in body:
        spec[PSA_TEMPLATE] = podsecurity.check_template(body[PSA_TEMPLATE], PSA_TEMPLATE)
    if NAMESPACE_QUOTA_DEFAULT in body:
        spec[NAMESPACE_QUOTA_DEFAULT] = quota.parse_quota(
            body[NAMESPACE_QUOTA_DEFAULT], NAMESPACE_QUOTA_DEFAULT
        )
    if CONTAINER_LIMIT_DEFAULT in body:
        defaults = quota.parse_limits(
            body[CONTAINER_LIMIT_DEFAULT], CONTAINER_LIMIT_DEFAULT, quota.CONTAINER_DEFAULT_FIELDS
        )
        quota.check_container_defaults(defaults, CONTAINER_LIMIT_DEFAULT)
        spec[CONTAINER_LIMIT_DEFAULT] = defaults or None
    return spec


def customization(body: dict[str, Any], name: str) -> dict[str, Any]:
    """The fleet agent's customization: an object, kept as given."""
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


def replacing(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`: keys of `old` that `new`
    lacks are removed (null), not kept."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        patch[key] = replacing(old.get(key), value)
    return patch
