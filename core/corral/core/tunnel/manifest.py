"""The import manifest: what `kubectl apply -f <manifestUrl>` creates in a cluster corral
cannot reach (docs/design/cluster-agent.md, section 8), as plain objects.

- the namespace `svc-agent`;
- the ServiceAccount `corral-agent`, bound to `cluster-admin`: it is corral's credential in
  the cluster (section 4), and corral manages namespaces, RBAC, quotas, workloads and nodes
  there and impersonates users, which nothing narrower allows;
- that account's long-lived token Secret, mounted where a pod's token would be: the agent
  hands it to corral, and a projected token would expire within the hour while corral holds
  it;
- the Secret with the agent's credential, for this cluster alone;
- the Deployment: one replica, `Recreate` (two agents overlap as little as possible), non-root,
  read-only root filesystem, no capabilities, no other token mounted; shaped by the cluster's
  agent settings (`settings.py`): its `agentEnvVars` after corral's own variables, and its
  `clusterAgentDeploymentCustomization`'s tolerations, affinity and resources.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from corral.core.tunnel import settings

NAMESPACE = "svc-agent"
NAME = "corral-agent"
TOKEN_SECRET = "corral-agent-token"
CREDENTIAL_SECRET = "corral-agent-credential"
CONTAINER = "agent"
# On the Deployment's pod template: the digest of the agent settings it carries.
ANNOTATION_SETTINGS = "management.svc.io/agent-settings"
TOKEN_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
# The agent's own user and group, as corral's image has them.
RUN_AS = 10001


@dataclass(frozen=True)
class Agent:
    cluster: str
    corral_url: str
    credential: str = field(repr=False)
    image: str
    ca_checksum: str = ""  # sha256 of corral's CA, pinned by the agent; empty: system trust
    # The cluster's agentEnvVars and clusterAgentDeploymentCustomization, as checked.
    env: list[dict[str, Any]] = field(default_factory=list)
    customization: dict[str, Any] = field(default_factory=dict)


def objects(agent: Agent) -> list[dict[str, Any]]:
    made = _objects(agent)
    made[-1] = with_settings(made[-1], agent.env, agent.customization)
    return made


def _objects(agent: Agent) -> list[dict[str, Any]]:
    # Part of corral, not managed by it: what carries the managed-by label downstream is the
    # project sync's, which removes those of its kinds it did not compute (the binding here).
    labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "corral"}
    meta = {"namespace": NAMESPACE, "labels": labels}
    env: list[dict[str, Any]] = [
        {"name": "CORRAL_URL", "value": agent.corral_url},
        {"name": "CORRAL_CLUSTER", "value": agent.cluster},
        {"name": "CORRAL_AGENT_IMAGE", "value": agent.image},
        {"name": "CORRAL_AGENT_CREDENTIAL", "valueFrom": {"secretKeyRef": {
            "name": CREDENTIAL_SECRET, "key": "credential"}}},
    ]  # fmt: skip
    if agent.ca_checksum:
        env.append({"name": "CORRAL_CA_CHECKSUM", "value": agent.ca_checksum})
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": NAMESPACE, "labels": labels}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, **meta},
         "automountServiceAccountToken": False},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": NAME, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "cluster-admin"},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]},
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
         "metadata": {"name": TOKEN_SECRET, **meta,
                      "annotations": {"kubernetes.io/service-account.name": NAME}}},
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
         "metadata": {"name": CREDENTIAL_SECRET, **meta},
         "stringData": {"credential": agent.credential}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": NAME, **meta},
         "spec": {
             "replicas": 1,
             "strategy": {"type": "Recreate"},
             "selector": {"matchLabels": labels},
             "template": {
                 "metadata": {"labels": labels},
                 "spec": {
                     "serviceAccountName": NAME,
                     "automountServiceAccountToken": False,
                     "securityContext": {"runAsNonRoot": True, "runAsUser": RUN_AS,
                                         "runAsGroup": RUN_AS,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{
                         "name": CONTAINER,
                         "image": agent.image,
                         "command": ["corral-agent"],
                         "env": env,
                         "securityContext": {"allowPrivilegeEscalation": False,
                                             "readOnlyRootFilesystem": True,
                                             "capabilities": {"drop": ["ALL"]}},
                         "volumeMounts": [{"name": "token", "mountPath": TOKEN_MOUNT,
                                           "readOnly": True}],
                     }],
                     "volumes": [{"name": "token", "secret": {"secretName": TOKEN_SECRET}}],
                 },
             },
         }},
    ]  # fmt: skip


def settings_digest(env: list[dict[str, Any]], customization: dict[str, Any]) -> str:
    """What a Deployment's pod template says of the settings it carries."""
    given = json.dumps([env, customization], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(given.encode()).hexdigest()


def with_settings(
    deployment: dict[str, Any], env: list[dict[str, Any]], customization: dict[str, Any]
) -> dict[str, Any]:
    """The agent's Deployment with these settings in place of any it had: the user's
    variables after the agent's own, the tolerations and affinity on its pod, the resources
    on its container, and their digest in its pod template's annotations (a change of it
    rolls the agent)."""
    changed = copy.deepcopy(deployment)
    template = changed["spec"]["template"]
    annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[ANNOTATION_SETTINGS] = settings_digest(env, customization)
    pod = template["spec"]
    for key, value in (("tolerations", customization.get("appendTolerations")),
                       ("affinity", customization.get("overrideAffinity"))):  # fmt: skip
        if value:
            pod[key] = value
        else:
            pod.pop(key, None)
    (container,) = [c for c in pod["containers"] if c["name"] == CONTAINER]
    own = [e for e in container.get("env") or [] if e["name"].startswith(settings.RESERVED_PREFIX)]
    container["env"] = [*own, *env]
    if resources := customization.get("overrideResourceRequirements"):
        container["resources"] = resources
    else:
        container.pop("resources", None)
    return changed


def render(agent: Agent) -> str:
    return yaml.safe_dump_all(objects(agent), sort_keys=False)


def url(corral_url: str, token: str, cluster: str) -> str:
    """Where the manifest is served: the registration token in the path is what makes it
    unguessable, expiring and revocable."""
    return f"{corral_url}{PATH_PREFIX}{token}_{cluster}.yaml"


def command(manifest_url: str) -> str:
    return f"kubectl apply -f {manifest_url}"


def insecure_command(manifest_url: str) -> str:
    """For a corral whose certificate the cluster does not trust: the manifest is fetched
    without checking it; the agent then pins corral's CA by its checksum."""
    return f"curl --insecure -sfL {manifest_url} | kubectl apply -f -"


def parse_name(name: str) -> tuple[str, str] | None:
    """The token and cluster of `<token>_<cluster>.yaml`; None for anything else."""
    stem, dot, extension = name.rpartition(".")
    token, underscore, cluster = stem.partition("_")
    if not dot or extension != "yaml" or not underscore or not token or not cluster:
        return None
    return token, cluster


PATH_PREFIX = "/v3/import/"
