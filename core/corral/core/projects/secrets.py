"""Secrets of projects: what a `/v3` client may write into one, checked as Kubernetes checks a
Secret (`ValidateSecret`, `IsConfigMapKey`, and `core/api/labels.py`), so that no cluster
refuses later what corral accepted; what a response may show of one; and the copy of a project
secret that each namespace of its project gets.

A project secret lives in the management cluster, in `svc-system` with corral's own Secrets
(so corral needs no Secret rights in any other namespace of it), under a name derived from its
cluster, project and `/v3` name: two creates of one name race on that stored name, and
Kubernetes lets one win. Labels say its cluster and project (for selection), an annotation its
`/v3` name (up to 253 characters, longer than a label value). The operator copies it, under its
`/v3` name, into every active namespace of the project. A copy is versioned by the uid and
resourceVersion of the Secret it comes from, never by a hash of its data: a bare hash of a
low-entropy secret (a short password) can be guessed offline by anyone who can read the copy's
annotations.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from corral.core.api import names
from corral.core.api import text as characters
from corral.core.api.ids import MAX_SUBDOMAIN, derived, is_dns_subdomain
from corral.core.api.labels import is_reserved, string_map
from corral.core.errors import Invalid

OPAQUE = "Opaque"
# The types a client may create: Kubernetes' own kinds of user data. Service account tokens
# and bootstrap tokens are refused: the cluster fills them with credentials of its own.
TYPES = (
    OPAQUE,
    "kubernetes.io/basic-auth",
    "kubernetes.io/dockercfg",
    "kubernetes.io/dockerconfigjson",
    "kubernetes.io/ssh-auth",
    "kubernetes.io/tls",
)
# Secrets a namespace holds that are not a team's data: never listed as namespaced secrets.
HIDDEN_TYPES = (
    "kubernetes.io/service-account-token",
    "bootstrap.kubernetes.io/token",
    "helm.sh/release.v1",
)
REQUIRED_KEYS = {
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
}
JSON_KEYS = {
    "kubernetes.io/dockercfg": ".dockercfg",
    "kubernetes.io/dockerconfigjson": ".dockerconfigjson",
}
BASIC_AUTH_KEYS = ("username", "password")
# Kubernetes' own bound: a Secret's keys and values together.
MAX_SIZE = 1024 * 1024
MAX_DESCRIPTION = 1024
# kubectl apply keeps the whole object it applied, data included, in this annotation.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# A project secret's name in svc-system: 27**16 names, so that no two of a management cluster's
# project secrets meet by chance (a meeting would refuse the second create as a duplicate).
STORED_PREFIX = "project-secret"
STORED_LENGTH = 16

_KEY = re.compile(r"[-._a-zA-Z0-9]+", re.ASCII)


@dataclass(frozen=True)
class SecretSpec:
    """What a Secret holds for its user, checked."""

    kind: str
    data: Mapping[str, str]  # key -> base64, as Kubernetes stores it
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    description: str = ""


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise Invalid("name is required", "name")
    if not is_dns_subdomain(name):
        raise Invalid(
            f"name must be a DNS subdomain: at most {MAX_SUBDOMAIN} lower-case letters, "
            "digits, '-' or '.', starting and ending with a letter or digit",
            "name",
        )
    return name


def check_kind(kind: Any) -> str:
    if kind in (None, ""):
        return OPAQUE
    if kind not in TYPES:
        raise Invalid(f"kind must be one of {', '.join(TYPES)}", "kind")
    return str(kind)


def data_of(body: Mapping[str, Any], current: Mapping[str, str] | None) -> dict[str, str] | None:
    """The data a body asks for: its `data` (else `current`), with its `stringData` written
    over it as Kubernetes does. None when the body gives neither."""
    if "data" not in body and "stringData" not in body:
        return None
    data = dict(current or {}) if "data" not in body else string_map(body["data"], "data")
    for key in data:
        _check_key(key, "data")
        _decoded(data[key], key)
    for key, value in string_map(body.get("stringData"), "stringData").items():
        _check_key(key, "stringData")
        data[key] = base64.b64encode(value.encode()).decode()
    return data


def check_data(kind: str, data: Mapping[str, str]) -> None:
    """The rules of the Secret's type and Kubernetes' size limit."""
    size = 0
    for key, value in data.items():
        size += len(key) + len(_decoded(value, key))
        if size > MAX_SIZE:
            raise Invalid(f"data is larger than {MAX_SIZE} bytes (keys and values)", "data")
    for key in REQUIRED_KEYS.get(kind, ()):
        if key not in data:
            raise Invalid(f"a Secret of kind {kind} needs the key {key}", "data")
    if kind == "kubernetes.io/ssh-auth" and not _decoded(data["ssh-privatekey"], "ssh-privatekey"):
        raise Invalid("ssh-privatekey must not be empty", "data")
    if kind == "kubernetes.io/basic-auth" and not any(
        _decoded(data.get(key, ""), key) for key in BASIC_AUTH_KEYS
    ):
        raise Invalid(
            "a Secret of kind kubernetes.io/basic-auth needs username or password", "data"
        )
    if json_key := JSON_KEYS.get(kind):
        try:
            parsed = json.loads(_decoded(data[json_key], json_key))
        except (ValueError, RecursionError):
            parsed = None
        if not isinstance(parsed, dict):
            raise Invalid(f"{json_key} must hold a JSON object", "data")


def check_description(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_DESCRIPTION:
        raise Invalid(f"description must be text of at most {MAX_DESCRIPTION} characters",
                      "description")  # fmt: skip
    return characters.check_description(value, "description")


# -- what a response shows ----------------------------------------------------------------------


def shown_labels(obj: Mapping[str, Any]) -> dict[str, str]:
    """The user's labels: corral's own are not theirs to see or set."""
    labels = obj["metadata"].get("labels") or {}
    return {k: v for k, v in labels.items() if not is_reserved(k)}


def shown_annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    """The user's annotations, short of corral's and of kubectl's copy of the whole object."""
    annotations = obj["metadata"].get("annotations") or {}
    return {k: v for k, v in annotations.items() if not is_reserved(k) and k != LAST_APPLIED}


def description_of(obj: Mapping[str, Any]) -> str:
    return str((obj["metadata"].get("annotations") or {}).get(names.ANNOTATION_DESCRIPTION, ""))


def keys_of(obj: Mapping[str, Any]) -> list[str]:
    """The keys of a Secret's data: what a response shows of it instead of the values."""
    return sorted(obj.get("data") or {})


def kind_of(obj: Mapping[str, Any]) -> str:
    return str(obj.get("type") or OPAQUE)


def is_copy(obj: Mapping[str, Any]) -> bool:
    return names.LABEL_SECRET_COPY in (obj["metadata"].get("labels") or {})


def is_namespaced_secret(obj: Mapping[str, Any]) -> bool:
    """A Secret a namespaced-secret listing shows: a team's own, not a copy of a project
    secret and not the cluster's or Helm's bookkeeping."""
    return not is_copy(obj) and kind_of(obj) not in HIDDEN_TYPES


def kept_metadata(obj: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations of a stored Secret a write through `/v3` keeps besides the
    user's own: corral's, short of the description (written anew) and of kubectl's copy of the
    whole object (which would keep the data a write replaces)."""
    meta = obj["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if is_reserved(k)}
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if is_reserved(k) and k != names.ANNOTATION_DESCRIPTION
    }
    return labels, annotations


# -- what is written ----------------------------------------------------------------------------


def secret_body(
    name: str,
    namespace: str,
    spec: SecretSpec,
    own_labels: Mapping[str, str],
    own_annotations: Mapping[str, str],
) -> dict[str, Any]:
    """A Secret holding `spec`, with corral's labels and annotations over the user's."""
    annotations = {**spec.annotations, **own_annotations}
    if spec.description:
        annotations[names.ANNOTATION_DESCRIPTION] = spec.description
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**spec.labels, **own_labels},
            "annotations": annotations,
        },
        "type": spec.kind,
        "data": dict(spec.data),
    }


def stored_name(cluster: str, project: str, name: str) -> str:
    """The name of the project secret `name` of `cluster:project` in svc-system."""
    return derived(STORED_PREFIX, cluster, project, name, length=STORED_LENGTH)


def project_secret_labels(cluster: str, project: str) -> dict[str, str]:
    """What selects a cluster's or a project's secrets in svc-system."""
    return {names.LABEL_CLUSTER: cluster, names.LABEL_PROJECT_SECRET: project}


def project_secret(
    cluster: str, project: str, name: str, spec: SecretSpec, own_annotations: Mapping[str, str]
) -> dict[str, Any]:
    """The Secret in svc-system that holds the project secret `name`."""
    return secret_body(
        stored_name(cluster, project, name),
        names.SYSTEM_NAMESPACE,
        spec,
        project_secret_labels(cluster, project),
        {**own_annotations, names.ANNOTATION_SECRET_NAME: name},
    )


def name_of(obj: Mapping[str, Any]) -> str:
    """The `/v3` name of a project secret."""
    return str((obj["metadata"].get("annotations") or {}).get(names.ANNOTATION_SECRET_NAME, ""))


def source_project(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(cluster, project) of a project secret, trusted only as the API stores it: in
    svc-system, under the name its labels and its `/v3` name derive."""
    meta = obj["metadata"]
    labels = meta.get("labels") or {}
    cluster, project = labels.get(names.LABEL_CLUSTER), labels.get(names.LABEL_PROJECT_SECRET)
    name = name_of(obj)
    if not cluster or not project or not name or meta.get("namespace") != names.SYSTEM_NAMESPACE:
        return None
    if meta.get("name") != stored_name(cluster, project, name):
        return None
    return cluster, project


def copy_of(source: Mapping[str, Any], project: str) -> dict[str, Any]:
    """The copy of a project secret each namespace of `project` holds, under the secret's
    `/v3` name, without its namespace."""
    spec = SecretSpec(
        kind=kind_of(source),
        data=source.get("data") or {},
        labels=shown_labels(source),
        annotations=shown_annotations(source),
        description=description_of(source),
    )
    body = secret_body(
        name_of(source),
        "",
        spec,
        {
            names.LABEL_MANAGED_BY: names.MANAGED_BY,
            names.LABEL_PROJECT: project,
            names.LABEL_SECRET_COPY: project,
        },
        {names.ANNOTATION_SECRET_SOURCE: source_version(source)},
    )
    del body["metadata"]["namespace"]
    return body


def source_version(source: Mapping[str, Any]) -> str:
    """`<uid>/<resourceVersion>` of a project secret: a new one, or any change, moves it."""
    meta = source["metadata"]
    return f"{meta.get('uid', '')}/{meta.get('resourceVersion', '')}"


# -- helpers ------------------------------------------------------------------------------------


def _check_key(key: str, what: str) -> None:
    """Kubernetes' `IsConfigMapKey`."""
    if len(key) > MAX_SUBDOMAIN or not _KEY.fullmatch(key) or key.startswith(".."):
        raise Invalid(
            f"{what}: the key {key[:64]!r} must be at most {MAX_SUBDOMAIN} letters, digits, "
            "'-', '_' or '.', and not '.' nor start with '..'",
            what,
        )
    if key == ".":
        raise Invalid(f"{what}: a key must not be '.'", what)


def _decoded(value: str, key: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise Invalid(f"data: the value of {key} must be base64", "data") from None
