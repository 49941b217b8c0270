"""A cluster's agent settings: checked as Kubernetes checks what they become, and rendered into
the import manifest's Deployment."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from corral.core.errors import Invalid
from corral.core.tunnel import manifest, settings

TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "edge", "effect": "NoSchedule"}
AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In",
                                   "values": ["linux"]}]},
        ]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [
                {"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}]}},
        ],
    },
    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "corral-agent"}}}},
    ]},
}  # fmt: skip
RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}}
CUSTOMIZATION = {"appendTolerations": [TOLERATION], "overrideAffinity": AFFINITY,
                 "overrideResourceRequirements": RESOURCES}  # fmt: skip


def test_good_settings_are_kept_as_given() -> None:
    assert settings.customization(CUSTOMIZATION) == CUSTOMIZATION
    env = [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"},
           {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]  # fmt: skip
    assert settings.agent_env(env) == env


@pytest.mark.parametrize(
    ("customization", "field"),
    [
        ({"schedulingCustomization": {}}, "schedulingCustomization"),
        ({"appendTolerations": {}}, "appendTolerations"),
        ({"appendTolerations": [{}] * 33}, "appendTolerations"),
        ({"appendTolerations": [{"key": "k", "operator": "Maybe"}]},
         "appendTolerations[0].operator"),
        ({"appendTolerations": [{"operator": "Equal", "value": "v"}]},
         "appendTolerations[0].operator"),
        ({"appendTolerations": [{"key": "k", "operator": "Exists", "value": "v"}]},
         "appendTolerations[0].value"),
        ({"appendTolerations": [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]},
         "appendTolerations[0].tolerationSeconds"),
        ({"overrideResourceRequirements": {"limits": {"cpu": "lots"}}},
         "overrideResourceRequirements.limits.cpu"),
        ({"overrideResourceRequirements": {"requests": {"memory": "1Gi"},
                                           "limits": {"memory": "512Mi"}}},
         "overrideResourceRequirements.requests.memory"),
        ({"overrideResourceRequirements": {"limits": {"gpu": "1"}}},
         "overrideResourceRequirements.limits"),
        ({"overrideAffinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                {"nodeSelectorTerms": []}}}},
         "overrideAffinity.nodeAffinity."
         "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"),
        ({"overrideAffinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                {"nodeSelectorTerms": [{"matchExpressions": [
                                                    {"key": "k", "operator": "In"}]}]}}}},
         "overrideAffinity.nodeAffinity."
         "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]."
         "matchExpressions[0].values"),
        ({"overrideAffinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
                                                [{"weight": 0, "preference": {}}]}}},
         "overrideAffinity.nodeAffinity."
         "preferredDuringSchedulingIgnoredDuringExecution[0].weight"),
        ({"overrideAffinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                               [{"labelSelector": {}}]}}},
         "overrideAffinity.podAffinity."
         "requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"),
        ({"overrideAffinity": {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {
                "topologyKey": "t", "labelSelector": {"matchExpressions": [{
                    "key": "a", "operator": "Gt", "values": ["1"]}]}}}]}}},
         "overrideAffinity.podAntiAffinity."
         "preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector."
         "matchExpressions[0].operator"),
        ({"overrideAffinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                {"nodeSelectorTerms": [{"matchFields": [
                                                    {"key": "k", "operator": "Lt",
                                                     "values": ["x"]}]}]}}}},
         "overrideAffinity.nodeAffinity."
         "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]."
         "matchFields[0].values"),
        ({"overrideAffinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                {"nodeSelectorTerms": [{}] * 17}}}},
         "overrideAffinity.nodeAffinity."
         "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"),
        ({"overrideAffinity": {"someAffinity": {}}},
         "overrideAffinity.someAffinity"),
    ],
)  # fmt: skip
def test_a_customization_kubernetes_would_refuse_is_invalid_naming_the_field(
    customization: dict[str, Any], field: str
) -> None:
    with pytest.raises(Invalid) as refused:
        settings.customization(customization)
    assert refused.value.field == f"{settings.CUSTOMIZATION}.{field}", refused.value


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ([{"name": "CORRAL_URL", "value": "https://elsewhere"}], "agentEnvVars[0].name"),
        ([{"name": "A=B", "value": "1"}], "agentEnvVars[0].name"),
        ([{"name": f"V{i}", "value": "1"} for i in range(65)], "agentEnvVars"),
        ([{"name": "X", "value": "1", "valueFrom": {"fieldRef": {}}}], "agentEnvVars[0]"),
    ],
)
def test_agent_env_vars_kubernetes_or_the_agent_would_refuse_are_invalid(
    env: list[dict[str, Any]], field: str
) -> None:
    with pytest.raises(Invalid) as refused:
        settings.agent_env(env)
    assert refused.value.field == field, refused.value


def test_the_manifests_deployment_carries_the_settings() -> None:
    env = [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}]
    agent = manifest.Agent(cluster="c-abcde", corral_url="https://corral.example",
                           credential="x" * 48, image="localhost/corral:0.1.0", env=env,
                           customization=CUSTOMIZATION)  # fmt: skip
    deployment = list(yaml.safe_load_all(manifest.render(agent)))[-1]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["env"][-1] == env[0]
    corrals = ["CORRAL_URL", "CORRAL_CLUSTER", "CORRAL_AGENT_IMAGE", "CORRAL_AGENT_CREDENTIAL"]
    assert [e["name"] for e in container["env"][:-1]] == corrals
    assert pod["tolerations"] == [TOLERATION]
    assert pod["affinity"] == AFFINITY
    assert container["resources"] == RESOURCES
    # Without settings, nothing of them.
    bare = list(yaml.safe_load_all(manifest.render(manifest.Agent(
        cluster="c-abcde", corral_url="https://corral.example", credential="x" * 48,
        image="localhost/corral:0.1.0"))))[-1]["spec"]["template"]["spec"]  # fmt: skip
    assert "tolerations" not in bare and "affinity" not in bare
    assert "resources" not in bare["containers"][0]


def test_settings_replace_those_a_deployment_had_and_leave_the_agents_own() -> None:
    agent = manifest.Agent(cluster="c-abcde", corral_url="https://corral.example",
                           credential="x" * 48, image="localhost/corral:0.1.0",
                           env=[{"name": "OLD", "value": "1"}],
                           customization=CUSTOMIZATION)  # fmt: skip
    shaped = manifest.objects(agent)[-1]
    env = [{"name": "NEW", "value": "2"}]
    changed = manifest.with_settings(shaped, env, {})
    pod = changed["spec"]["template"]["spec"]
    assert "tolerations" not in pod and "affinity" not in pod
    assert "resources" not in pod["containers"][0]
    assert [e["name"] for e in pod["containers"][0]["env"]][-2:] == [
        "CORRAL_AGENT_CREDENTIAL",
        "NEW",
    ]
    annotations = changed["spec"]["template"]["metadata"]["annotations"]
    assert annotations[manifest.ANNOTATION_SETTINGS] == manifest.settings_digest(env, {})
    assert manifest.settings_digest(env, {}) != manifest.settings_digest([], {})
    # The Deployment read is left as it was.
    assert shaped["spec"]["template"]["spec"]["tolerations"] == [TOLERATION]
