"""charts/corral: its CRDs are the repository's, it lints and renders, and what it renders keeps
the rules of issue 11 (least-privilege RBAC, non-root pods, one namespace)."""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from corral.core.projects import roles

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "corral"
DEVKUBE = ROOT / "tools" / "devkube" / "bin" / "devkube"
NAMESPACE = "svc-system"

Manifest = dict[str, Any]

needs_helm = pytest.mark.skipif(
    not DEVKUBE.exists(),
    reason="helm comes from tools/devkube/bin/devkube, which is missing: run `make devkube`",
)


def test_the_charts_crds_are_the_repositorys_byte_for_byte() -> None:
    source = {p.name: p.read_bytes() for p in (ROOT / "crds").glob("*.yaml")}
    copies = {p.name: p.read_bytes() for p in (CHART / "files" / "crds").glob("*.yaml")}
    assert source, "no CRDs in crds/"
    differ = sorted(n for n in source.keys() | copies.keys() if source.get(n) != copies.get(n))
    assert not differ, (
        f"charts/corral/files/crds/ differs from crds/ in {differ}: "
        "cp crds/*.yaml charts/corral/files/crds/"
    )


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(DEVKUBE), "helm", *args], capture_output=True, text=True, check=False, timeout=120
    )


@functools.cache  # the same values render the same, short of the generated secrets
def render(*sets: str) -> list[Manifest]:
    done = helm(
        "template", "corral", str(CHART), f"--namespace={NAMESPACE}", *(f"--set={s}" for s in sets)
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def named(docs: list[Manifest], kind: str, name: str) -> Manifest:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def rules_of(docs: list[Manifest]) -> Iterator[tuple[str, dict[str, Any]]]:
    for doc in docs:
        if doc["kind"] in ("Role", "ClusterRole"):
            for rule in doc.get("rules") or []:
                yield doc["metadata"]["name"], rule


@needs_helm
@pytest.mark.parametrize("strict", [[], ["--strict"]])
def test_helm_lint_is_clean(strict: list[str]) -> None:
    done = helm("lint", *strict, str(CHART))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout, done.stdout


@needs_helm
@pytest.mark.parametrize(
    "sets",
    [
        [],
        ["crds.install=false"],
        ["ingress.enabled=true", "ingress.host=corral.example.com"],
        ["api.tls.secretName=x"],
    ],
)
def test_it_renders(sets: list[str]) -> None:
    docs = render(*sets)
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "Service", "ServiceAccount", "ClusterRole", "Role"} <= kinds
    assert ("CustomResourceDefinition" in kinds) is ("crds.install=false" not in sets)
    assert ("Ingress" in kinds) is ("ingress.enabled=true" in sets)


@needs_helm
def test_another_namespace_is_refused_with_the_one_to_use() -> None:
    done = helm("template", "corral", str(CHART), "--namespace=default")
    assert done.returncode != 0
    assert "must be installed into the namespace svc-system" in done.stderr


@needs_helm
def test_rbac_grants_no_wildcard_and_nothing_that_grants_more() -> None:
    docs = render()
    for name, rule in rules_of(docs):
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule.get(field, []), f"{name}: * in {field}"
        assert not {"escalate", "impersonate"} & set(rule["verbs"]), name
        if "bind" in rule["verbs"]:
            # Only the role the operator binds itself in provisioned clusters' namespaces.
            assert (name, rule) == ("corral-operator", {
                "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
                "resourceNames": [HOSTED_ROLE], "verbs": ["bind"]}), rule  # fmt: skip
        assert not rule.get("nonResourceURLs"), name
    for doc in docs:
        if doc["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            assert doc["roleRef"]["name"] not in ("cluster-admin", "admin", "edit"), doc
            subjects = {(s["kind"], s["name"]) for s in doc["subjects"]}
            assert subjects <= {
                ("ServiceAccount", "corral-operator"),
                ("ServiceAccount", "corral-api"),
            }


@needs_helm
def test_secrets_and_configmaps_are_granted_in_svc_system_only() -> None:
    # A ClusterRole's rules reach every namespace; corral's Secrets live in one. The hosted
    # control planes' role is the exception: no binding of the chart grants it; the operator
    # binds it to itself in each provisioned cluster's namespace (RoleBindings).
    docs = render()
    cluster_roles = [
        d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] != HOSTED_ROLE
    ]
    for name, rule in rules_of(cluster_roles):
        assert not {"secrets", "configmaps"} & set(rule["resources"]), name
    bound = {d["roleRef"]["name"] for d in docs if d["kind"].endswith("Binding")}
    assert HOSTED_ROLE not in bound
    hosted = named(docs, "ClusterRole", HOSTED_ROLE)
    assert hosted["metadata"]["annotations"]["management.svc.io/rbac-purpose"] == (
        "hosted-namespaces"
    )
    for doc in render():
        if doc["kind"] in ("Role", "RoleBinding"):
            assert doc["metadata"]["namespace"] == NAMESPACE


@needs_helm
def test_the_escalation_cover_is_exactly_the_role_the_operator_writes() -> None:
    """The operator applies corral-cluster-member in `local`; Kubernetes allows it only while
    the operator holds each of its permissions, which the cover role grants."""
    cover = named(render(), "ClusterRole", "corral-operator-local-member-role")
    assert cover["rules"] == roles.CLUSTER_MEMBER_RULES
    assert cover["metadata"]["annotations"]["management.svc.io/rbac-purpose"] == (
        "escalation-cover"
    )
    local = named(render(), "ClusterRole", "corral-operator-local")
    writes = [r for r in local["rules"] if r.get("resourceNames")]
    assert writes == [{
        "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
        "resourceNames": [roles.CLUSTER_MEMBER_CLUSTERROLE], "verbs": ["create", "patch"],
    }]  # fmt: skip
    names = {d["metadata"]["name"] for d in render("rbac.localCluster=false")}
    assert not {"corral-operator-local", "corral-operator-local-member-role"} & names


@needs_helm
def test_pods_run_non_root_read_only_with_their_own_accounts() -> None:
    docs = render()
    pods = {
        d["metadata"]["name"]: d["spec"]["template"]["spec"]
        for d in docs
        if d["kind"] == "Deployment"
    }
    pods["test"] = named(docs, "Pod", "corral-test-api")["spec"]
    assert set(pods) == {"corral-operator", "corral-api", "test"}
    for name, spec in pods.items():
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        (container,) = spec["containers"]
        security = container["securityContext"]
        assert security["runAsUser"] == 10001 and security["runAsNonRoot"] is True
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert container["imagePullPolicy"] == "IfNotPresent"
        assert container["image"] == "localhost/corral:0.1.0"
        if name != "test":
            assert spec["serviceAccountName"] == name
            assert spec["automountServiceAccountToken"] is True
            assert {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}} in spec["volumes"]
            assert spec["terminationGracePeriodSeconds"] == 30
    accounts = {d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"}
    assert accounts == {"corral-operator", "corral-api"}


def env_of(deployment: Manifest) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@needs_helm
def test_operator_replicas_each_pick_a_priority_only_when_there_are_several() -> None:
    two = env_of(named(render(), "Deployment", "corral-operator"))
    one = env_of(named(render("operator.replicas=1"), "Deployment", "corral-operator"))
    assert (two["CORRAL_OPERATOR_PRIORITY"], one["CORRAL_OPERATOR_PRIORITY"]) == ("auto", "0")
    assert two["CORRAL_BOOTSTRAP_PASSWORD"] == {
        "secretKeyRef": {"name": "corral-bootstrap", "key": "password"}
    }


@needs_helm
def test_operator_replicas_share_the_clusters_each_under_its_pod_name() -> None:
    operator = named(render(), "Deployment", "corral-operator")
    assert operator["spec"]["replicas"] == 3
    env = env_of(operator)
    assert env["CORRAL_OPERATOR_IDENTITY"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["CORRAL_OPERATOR_SHARDS"] == "64"
    shards = named(render("operator.shards=16"), "Deployment", "corral-operator")
    assert env_of(shards)["CORRAL_OPERATOR_SHARDS"] == "16"
    refused = helm("template", "corral", str(CHART), "--set=operator.shards=0")
    assert refused.returncode != 0 and "shards" in refused.stderr
    assert env["CORRAL_HOSTED_CONTROL_PLANE_STARTS"] == "2"
    starts = named(render("operator.hostedControlPlaneStarts=8"), "Deployment", "corral-operator")
    assert env_of(starts)["CORRAL_HOSTED_CONTROL_PLANE_STARTS"] == "8"
    too_many = helm("template", "corral", str(CHART), "--set=operator.hostedControlPlaneStarts=65")
    assert too_many.returncode != 0 and "hostedControlPlaneStarts" in too_many.stderr
    role = named(render(), "Role", "corral-operator")
    (leases,) = [r for r in role["rules"] if r["resources"] == ["leases"]]
    # A shard Lease is taken over, never deleted; a member Lease goes with its replica.
    assert set(leases["verbs"]) == {"list", "watch", "create", "patch", "delete"}


@needs_helm
def test_the_operator_keeps_downloaded_drivers_in_a_bounded_writable_volume() -> None:
    operator = named(render("operator.driverCacheSize=2Gi"), "Deployment", "corral-operator")
    pod = operator["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert {"name": "data", "emptyDir": {"sizeLimit": "2Gi"}} in pod["volumes"]
    assert {"name": "data", "mountPath": "/var/lib/corral"} in container["volumeMounts"]
    assert env_of(operator)["CORRAL_OPERATOR_DATA_DIR"] == "/var/lib/corral"


@needs_helm
def test_the_external_url_follows_the_ingress_or_the_value() -> None:
    def url(*sets: str) -> str:
        value: str = env_of(named(render(*sets), "Deployment", "corral-api"))["CORRAL_EXTERNAL_URL"]
        return value

    assert url() == "https://corral-api.svc-system.svc"
    assert url("ingress.enabled=true", "ingress.host=c.example.com") == "https://c.example.com"
    assert url("api.externalURL=https://corral.example.com:8443") == (
        "https://corral.example.com:8443"
    )


@needs_helm
def test_the_import_manifest_runs_the_agent_from_the_charts_own_image() -> None:
    def images(*sets: str) -> tuple[str, str]:
        deployment = named(render(*sets), "Deployment", "corral-api")
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        return container["image"], env_of(deployment)["CORRAL_AGENT_IMAGE"]

    own, agent = images("image.repository=registry.example/corral", "image.tag=1.2.3-abc")
    assert own == agent == "registry.example/corral:1.2.3-abc"
    own, agent = images()
    assert own == agent and own.startswith("localhost/corral:")


@needs_helm
def test_the_generated_certificate_names_the_service_and_reaches_the_pods() -> None:
    docs = render(
        "ingress.enabled=true", "ingress.host=c.example.com", "api.tls.extraIPs={10.1.2.3}"
    )
    secret = named(docs, "Secret", "corral-api-tls")
    assert secret["type"] == "kubernetes.io/tls"
    assert {"tls.crt", "tls.key", "ca.crt"} == set(secret["data"])
    sans = secret["metadata"]["annotations"]["management.svc.io/certificate-sans"].split(",")
    assert sans == [
        "corral-api", "corral-api.svc-system", "corral-api.svc-system.svc",
        "corral-api.svc-system.svc.cluster.local", "c.example.com", "10.1.2.3",
    ]  # fmt: skip
    api = named(docs, "Deployment", "corral-api")
    assert env_of(api)["CORRAL_CA_FILE"] == "/etc/corral/tls/ca.crt"
    # The CA's key stays in its own Secret, which no pod mounts.
    mounted = [v["secret"]["secretName"] for v in api["spec"]["template"]["spec"]["volumes"]
               if "secret" in v]  # fmt: skip
    assert mounted == ["corral-api-tls"]
    given = named(render("api.tls.secretName=x"), "Deployment", "corral-api")
    assert "CORRAL_CA_FILE" not in env_of(given)


@needs_helm
def test_the_generated_certificate_names_the_external_urls_host() -> None:
    def sans(url: str) -> list[str]:
        secret = named(render(f"api.externalURL={url}"), "Secret", "corral-api-tls")
        names: str = secret["metadata"]["annotations"]["management.svc.io/certificate-sans"]
        return names.split(",")[4:]

    assert sans("https://corral.example.com:8443") == ["corral.example.com"]
    assert sans("https://192.0.2.7") == ["192.0.2.7"]
    assert sans("https://[2001:db8::7]:8443/") == ["2001:db8::7"]
    # The Service's own names are there already, once.
    assert sans("https://corral-api.svc-system.svc") == []


@needs_helm
def test_the_test_pod_finds_the_service_through_the_kubelets_variables() -> None:
    docs = render()
    service = named(docs, "Service", "corral-api")
    assert service["spec"]["ports"][0]["port"] == 443
    (container,) = named(docs, "Pod", "corral-test-api")["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    prefix = service["metadata"]["name"].upper().replace("-", "_")
    assert env["SERVICE_HOST_VAR"] == f"{prefix}_SERVICE_HOST"
    assert env["SERVICE_PORT_VAR"] == f"{prefix}_SERVICE_PORT"
    assert env["SERVICE_NAME"] == "corral-api.svc-system.svc"


@needs_helm
def test_crds_are_kept_on_uninstall() -> None:
    crds = [d for d in render() if d["kind"] == "CustomResourceDefinition"]
    assert {c["metadata"]["name"] for c in crds} == {
        yaml.safe_load(p.read_text())["metadata"]["name"] for p in (ROOT / "crds").glob("*.yaml")
    }
    for crd in crds:
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


Permissions = dict[tuple[str, str], set[tuple[str, str, str]]]
HOSTED_ROLE = "corral-operator-hosted"


def documented() -> Permissions:
    """The RBAC tables of the chart's README: (apiGroup, resource, verb) per (kind, name) of
    the role its heading names first."""
    tables: Permissions = {}
    role: tuple[str, str] | None = None
    for line in (CHART / "README.md").read_text().splitlines():
        if line.startswith("### "):
            names = [n for n in line.split("`")[1::2] if n.startswith("corral-")]
            kind = "ClusterRole" if "ClusterRole" in line else "Role"
            role = (kind, names[0]) if names else None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not role or not line.startswith("|") or set(cells[0]) <= {"-"}:
            continue
        if cells[0] in ("apiGroup", "resource"):
            continue
        group, resources, verbs = ("", *cells[:2]) if len(cells) == 3 else cells[:3]
        group = "" if group == '""' else group
        for resource in resources.split(", "):
            for verb in verbs.split(", "):
                tables.setdefault(role, set()).add((group, resource.split(" ")[0], verb))
    return tables


@needs_helm
def test_the_readme_documents_every_rule_and_no_other() -> None:
    granted: Permissions = {}
    for doc in render():
        annotations = doc["metadata"].get("annotations") or {}
        # The escalation cover is never used, only held; every other rule is a call.
        purpose = annotations.get("management.svc.io/rbac-purpose")
        if doc["kind"] not in ("Role", "ClusterRole") or purpose == "escalation-cover":
            continue
        granted[(doc["kind"], doc["metadata"]["name"])] = {
            (group, resource, verb)
            for rule in doc["rules"]
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            for verb in rule["verbs"]
        }
    assert documented() == granted


@needs_helm
@pytest.mark.parametrize(
    ("sets", "workers"),
    [((), "limits.cpu"), (("api.resources.limits.cpu=1500m",), "limits.cpu"),
     (("api.resources.limits.cpu=null",), None)],
)  # fmt: skip
def test_the_api_server_runs_a_worker_per_cpu_of_its_limit(
    sets: tuple[str, ...], workers: str | None
) -> None:
    deployment = named(render(*sets), "Deployment", "corral-api")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["--workers", "$(CORRAL_WORKERS)"]
    (env,) = [e for e in container["env"] if e["name"] == "CORRAL_WORKERS"]
    if workers is None:
        assert env["value"] == "1"
    else:
        field = env["valueFrom"]["resourceFieldRef"]
        assert field == {"containerName": "api", "resource": workers, "divisor": "1"}
