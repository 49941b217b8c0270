"""What a create or update of an rke2 or k3s cluster may say, and what is stored of it
(docs/provisioning.md, "Flavours and versions").

The provisioner reads one truth: `spec.kubernetesVersion`, a key of the version catalog. The
configuration is stored as the client gave it (its keys are not the interface's to list), with
`networking.plugin` filled in, so the provisioner never has to apply a default itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from corral.core.errors import Invalid
from corral.core.provisioning import catalog, s3
from corral.core.provisioning.flavours import Flavour

# A configuration is kept whole in the Cluster and shown in every rendering of it.
MAX_CONFIG_BYTES = 64 * 1024
# Far above any version a client writes (`v1.36.3+rke2r1`); keeps refusals short.
MAX_VERSION_LENGTH = 64


@dataclass(frozen=True)
class Admitted:
    version: str  # the catalog's key: spec.kubernetesVersion
    config: dict[str, Any]  # spec.rke2Config or spec.k3sConfig


def admit(flavour: Flavour, config: Any, version: Any, versions: catalog.Catalog) -> Admitted:
    """The spec of a new cluster of `flavour`, from its configuration (None when the body gave
    only `driver`) and the top-level `kubernetesVersion` (None or empty when not given).
    Invalid, naming the field at fault, when either is not acceptable."""
    where = flavour.config_field
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise Invalid(f"{where} must be an object", where)
    if len(json.dumps(config)) > MAX_CONFIG_BYTES:
        raise Invalid(f"{where} may be at most {MAX_CONFIG_BYTES} bytes of JSON", where)
    given, key = _version(flavour, config.get("kubernetesVersion"), version, versions)
    if s3.target(config, where) is not None:
        s3.check_release(versions.release(key), f"{where}.etcd.s3")
    return Admitted(
        version=key,
        config={
            **config,
            "kubernetesVersion": given,
            "networking": _networking(flavour, config.get("networking")),
        },
    )


def _version(
    flavour: Flavour, inner: Any, outer: Any, versions: catalog.Catalog
) -> tuple[str, str]:
    """The version as the client gave it, and its catalog key, checked against the catalog."""
    field = f"{flavour.config_field}.kubernetesVersion"
    if _given(inner):
        key = catalog_key(flavour, inner, field)
        if _given(outer) and catalog_key(flavour, outer, "kubernetesVersion") != key:
            raise Invalid(
                f"{field} and kubernetesVersion name different versions; give one of them, "
                "or the same in both",
                field,
            )
        given = inner
    elif _given(outer):
        field = "kubernetesVersion"
        key, given = catalog_key(flavour, outer, field), outer
    else:
        raise Invalid(
            f"{field} (or kubernetesVersion) is required: a version of the setting "
            f"{catalog.SETTING}",
            field,
            code="MissingRequired",
        )
    versions.release(key, field)
    return given, key


def catalog_key(flavour: Flavour, given: Any, field: str) -> str:
    """The catalog key of a version a client gave for a cluster of `flavour`; Invalid on
    `field` when it is not a version."""
    if not isinstance(given, str) or len(given) > MAX_VERSION_LENGTH:
        raise Invalid(f"{field} must be a version like v1.36.3", field)
    return catalog.normalise(given, flavour.driver, field)


def _given(value: Any) -> bool:
    return value is not None and value != ""


def _networking(flavour: Flavour, given: Any) -> dict[str, Any]:
    where = f"{flavour.config_field}.networking"
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise Invalid(f"{where} must be an object", where)
    plugin = given.get("plugin")
    if not _given(plugin):
        plugin = flavour.default_plugin
    elif plugin in flavour.not_yet:
        raise Invalid(
            f"{where}.plugin {plugin} is not installed by corral yet: a {flavour.driver} "
            f"cluster's pod network is one of {', '.join(flavour.plugins)} "
            f"(default {flavour.default_plugin})",
            f"{where}.plugin",
            code="InvalidOption",
        )
    elif plugin not in flavour.plugins:
        raise Invalid(
            f"{where}.plugin of a {flavour.driver} cluster must be one of "
            f"{', '.join(flavour.plugins)} (default {flavour.default_plugin})",
            f"{where}.plugin",
            code="InvalidOption",
        )
    return {**given, "plugin": plugin}
