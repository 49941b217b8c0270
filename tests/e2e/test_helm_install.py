"""`helm install` of charts/corral into a management cluster whose pods really run.

The management cluster has a real node (kubelet, containerd, runc); corral's image is built
with `make image`'s script and imported into the node, exactly as `kind load image-archive`
would. The tests run in order on one installation: install, use, fail over, upgrade, RBAC,
`helm test`, uninstall.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from corral.core.projects import roles
from corral.devenv.environment import Environment
from corral.devenv.waiting import wait_for

from ..conftest import ROOT
from .api import Api, Response
from .conftest import stack_options

NAMESPACE = "svc-system"
RELEASE = "corral"
CHART = ROOT / "charts" / "corral"
SERVICE_NAME = f"{RELEASE}-api.{NAMESPACE}.svc"
OPERATOR_SA = f"system:serviceaccount:{NAMESPACE}:{RELEASE}-operator"
API_SA = f"system:serviceaccount:{NAMESPACE}:{RELEASE}-api"
READY_TIMEOUT = 180.0
PROVISION_TIMEOUT = 300.0

pytestmark = pytest.mark.timeout(900)


@dataclass
class Install:
    env: Environment
    helm: list[str]
    core: k8s.CoreV1Api
    apps: k8s.AppsV1Api
    crs: k8s.CustomObjectsApi
    image: str
    helm_env: dict[str, str]
    # What the tests hand on to the next one: they run in order on one installation.
    admin: Api | None = None
    cluster_id: str = ""

    def run_helm(self, *args: str) -> str:
        done = subprocess.run(
            [*self.helm, *args],
            capture_output=True,
            text=True,
            env=self.helm_env,
            timeout=READY_TIMEOUT + 60,
            check=False,
        )
        assert done.returncode == 0, f"helm {args[0]} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def pods(self, component: str) -> list[k8s.V1Pod]:
        selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component={component}"
        return list(self.core.list_namespaced_pod(NAMESPACE, label_selector=selector).items)

    def api(self, token: str | None = None) -> Api:
        """The /v3 API through its Service's ClusterIP, as a client on the host reaches it."""
        service = self.core.read_namespaced_service(f"{RELEASE}-api", NAMESPACE)
        secret = self.core.read_namespaced_secret(_tls_secret_name(self), NAMESPACE)
        ca = base64.b64decode(secret.data["ca.crt"]).decode()
        port = service.spec.ports[0].port
        return Api(f"https://{service.spec.cluster_ip}:{port}", _pinned_context(ca), token)

    def bootstrap_password(self) -> str:
        secrets = self.core.list_namespaced_secret(
            NAMESPACE, label_selector=f"app.kubernetes.io/instance={RELEASE}"
        ).items
        secret = next(s for s in secrets if "password" in (s.data or {}))
        return base64.b64decode(secret.data["password"]).decode()


class _PinnedName(ssl.SSLContext):
    """Verifies the certificate against the Service's DNS name whatever address is dialled:
    the host has no cluster DNS, so it connects to the ClusterIP."""

    def wrap_socket(self, sock: socket.socket, *args: Any, **kwargs: Any) -> ssl.SSLSocket:  # type: ignore[override]
        kwargs["server_hostname"] = SERVICE_NAME
        return super().wrap_socket(sock, *args, **kwargs)


def _pinned_context(ca_pem: str) -> ssl.SSLContext:
    context = _PinnedName(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cadata=ca_pem)
    return context


def _tls_secret_name(install: Install) -> str:
    deployment = install.apps.read_namespaced_deployment(f"{RELEASE}-api", NAMESPACE)
    volumes = deployment.spec.template.spec.volumes or []
    return next(v.secret.secret_name for v in volumes if v.secret and "tls" in v.name)


@pytest.fixture(scope="module")
def install(
    tmp_path_factory: pytest.TempPathFactory, devkube: Path, image: tuple[str, Path]
) -> Iterator[Install]:
    options = stack_options(
        tmp_path_factory.mktemp("helm"),
        devkube,
        start_corral=False,
        apply_crds=False,
        downstream_clusters=1,
        nodes_per_cluster=2,
        real_nodes=1,
        audit_namespace=NAMESPACE,
        hosted_control_planes=True,
    )
    reference, archive = image
    repository, tag = reference.rsplit(":", 1)
    with Environment(options) as env:
        env.import_image(repository, archive)
        kubeconfig = str(env.management_kubeconfig)
        cache = env.root / "helm-cache"
        helm = [str(devkube), "helm", f"--kubeconfig={kubeconfig}", f"--namespace={NAMESPACE}"]
        helm_env = {
            "HELM_CACHE_HOME": str(cache),
            "HELM_CONFIG_HOME": str(cache / "config"),
            "HELM_DATA_HOME": str(cache / "data"),
            "PATH": "/usr/bin:/bin",
            # Helm's client keeps a discovery cache under $HOME/.kube: not in the user's home.
            "HOME": str(cache),
        }
        client = k8s_config.new_client_from_config(config_file=kubeconfig)
        installed = Install(
            env,
            helm,
            k8s.CoreV1Api(client),
            k8s.AppsV1Api(client),
            k8s.CustomObjectsApi(client),
            reference,
            helm_env,
        )
        # The same commands as README's "Install into a cluster", after `kind load`.
        installed.run_helm(
            "install",
            RELEASE,
            str(CHART),
            "--create-namespace",
            f"--set=image.repository={repository}",
            f"--set=image.tag={tag}",
            "--wait",
            f"--timeout={int(READY_TIMEOUT)}s",
        )
        # The chart installed the Setting CRD: the catalog can name the local images now.
        env.apply_hosted_settings()
        yield installed


def _ready(pod: k8s.V1Pod) -> bool:
    conditions = pod.status.conditions or []
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in conditions
    )


# The chart's default replicas; the operator's share the clusters.
REPLICAS = {"operator": 3, "api": 2}


def _all_ready(install: Install, component: str) -> list[k8s.V1Pod]:
    pods = [p for p in install.pods(component) if p.metadata.deletion_timestamp is None]
    return pods if len(pods) == REPLICAS[component] and all(map(_ready, pods)) else []


def test_install_runs_operator_and_api_as_real_containers_with_their_own_accounts(
    install: Install,
) -> None:
    for component, account in (("operator", OPERATOR_SA), ("api", API_SA)):
        pods = wait_for(
            f"{component} pods Ready", lambda c=component: _all_ready(install, c), READY_TIMEOUT
        )
        for pod in pods:
            assert pod.spec.node_name == "management-real-0"
            assert f"system:serviceaccount:{NAMESPACE}:{pod.spec.service_account_name}" == account
            (status,) = pod.status.container_statuses
            # A real runtime gives a container ID and an image ID of the imported image.
            assert status.container_id.startswith("containerd://")
            assert status.image == install.image
            assert status.ready and status.state.running is not None
            security = pod.spec.containers[0].security_context
            assert security.read_only_root_filesystem and security.run_as_non_root


def test_login_import_and_a_ready_project_through_the_service(install: Install) -> None:
    api = install.api()
    assert wait_for("API through its Service", lambda: api.get("/readyz").status == 200, 60)
    login = api.login("admin", install.bootstrap_password(), responseType="json")
    assert login.status == 201, login.body
    admin = api.as_token(login.body["token"])
    # The tests poll as the admin ten times a second, and the rate limit (100 a minute by
    # default) holds for all API server replicas together.
    limit = admin.put("/v3/settings/api-rate-limit-per-minute", {"value": "100000"})
    assert limit.status == 200, limit.body

    downstream = install.env.downstreams[0]
    encoded = base64.b64encode(downstream.kubeconfig_path.read_bytes()).decode()
    created = admin.post(
        "/v3/clusters",
        {"type": "cluster", "name": "imported-by-pods", "importedConfig": {"kubeConfig": encoded}},
    )
    assert created.status == 201, created.body
    cluster_id = created.body["id"]
    wait_for(
        "imported cluster active",
        lambda: admin.get(f"/v3/clusters/{cluster_id}").body.get("state") == "active",
        READY_TIMEOUT,
    )
    _project_ready(admin, cluster_id, "made-by-pods")
    install.cluster_id, install.admin = cluster_id, admin


def _scaled_to_zero(admin: Api, pool_url: str) -> bool:
    """The operator has seen the pool at 0 and holds no machine for it."""
    body = admin.get(pool_url).body
    return bool(body.get("state") == "active" and body.get("requested") == 0)


def _machines(admin: Api, cluster_id: str, pool_id: str) -> list[str]:
    nodes = admin.get(f"/v3/clusters/{cluster_id}/nodes").body["data"]
    return [n["id"] for n in nodes if n["spec"].get("nodePoolName") == pool_id]


def _project_ready(admin: Api, cluster_id: str, name: str) -> str:
    created = admin.post("/v3/projects", {"name": name, "clusterId": cluster_id})
    assert created.status == 201, created.body
    project_id: str = created.body["id"]
    wait_for(
        f"project {name} active",
        lambda: admin.get(f"/v3/projects/{project_id}").body.get("state") == "active",
        READY_TIMEOUT,
    )
    return project_id


def _active_operator(install: Install) -> str | None:
    """The pod whose kopf peer has the highest priority: the one that handles objects."""
    peering = install.crs.get_cluster_custom_object(
        "kopf.dev", "v1", "clusterkopfpeerings", "corral"
    )
    peers = peering.get("status") or {}
    if len(peers) < 2:
        return None
    return str(max(peers.items(), key=lambda item: item[1]["priority"])[0])


def test_deleting_the_active_operator_loses_nothing(install: Install) -> None:
    admin = install.admin
    assert admin is not None, "runs after the login test"
    active = wait_for("operator peers", lambda: _active_operator(install), READY_TIMEOUT)
    assert active in {p.metadata.name for p in install.pods("operator")}
    # Mid-operation: the project is created while the active replica is going away.
    install.core.delete_namespaced_pod(active, NAMESPACE)
    project_id = _project_ready(admin, install.cluster_id, "made-during-failover")
    project = admin.get(f"/v3/projects/{project_id}").body
    assert project["state"] == "active"
    # The Deployment replaces the pod; the peers settle again, the deleted one gone.
    wait_for("operator replaced", lambda: _all_ready(install, "operator"), READY_TIMEOUT)
    new_active = wait_for("operator peers again", lambda: _active_operator(install), READY_TIMEOUT)
    assert new_active != active


def test_upgrade_with_a_changed_value_rolls_the_pods_and_keeps_secrets(install: Install) -> None:
    admin = install.admin
    assert admin is not None, "runs after the login test"
    before = {p.metadata.name for p in install.pods("api")}
    tls_before = install.core.read_namespaced_secret(_tls_secret_name(install), NAMESPACE).data
    password = install.bootstrap_password()
    install.run_helm(
        "upgrade",
        RELEASE,
        str(CHART),
        "--reuse-values",
        "--set=api.resources.limits.memory=320Mi",
        "--wait",
        f"--timeout={int(READY_TIMEOUT)}s",
    )
    pods = wait_for(
        "api pods rolled",
        lambda: [p for p in _all_ready(install, "api") if p.metadata.name not in before],
        READY_TIMEOUT,
    )
    assert len(pods) == 2
    assert all(p.spec.containers[0].resources.limits["memory"] == "320Mi" for p in pods)
    # An upgrade neither rotates the generated certificate nor the bootstrap password, and
    # the sessions of before still work.
    assert install.core.read_namespaced_secret(_tls_secret_name(install), NAMESPACE).data == (
        tls_before
    )
    assert install.bootstrap_password() == password
    api = install.api(admin.token)
    assert wait_for("API after upgrade", lambda: api.get("/v3/clusters").status == 200, 60)


def test_helm_test_checks_the_api_answers(install: Install) -> None:
    # --logs: a failing test pod's own output is then in the failure message.
    out = install.run_helm("test", RELEASE, f"--timeout={int(READY_TIMEOUT)}s", "--logs")
    # run_helm fails on a failed test pod; the output must also name it as run.
    assert "Succeeded" in out


def test_every_kind_of_change_through_the_pods(install: Install) -> None:
    """Users, bindings, tokens, settings, drivers, projects and clusters changed and deleted through
    the API: each step needs some permission of the chart, which the next test holds to."""
    admin = install.admin
    assert admin is not None, "runs after the login test"
    cluster_id = install.cluster_id

    def ok(response: Response, *statuses: int) -> dict[str, Any]:
        assert response.status in (statuses or (200, 201, 204)), response.body
        return response.body if isinstance(response.body, dict) else {}

    user = ok(admin.post("/v3/users", {"username": "helm-e2e", "password": "a-long-password-1"}))
    ok(admin.put(f"/v3/users/{user['id']}", {"description": "changed through the pods"}))
    ok(
        admin.post(
            f"/v3/users/{user['id']}?action=setpassword", {"newPassword": "another-long-password-2"}
        )
    )
    binding = ok(
        admin.post("/v3/globalrolebindings", {"globalRoleId": "user", "userId": user["id"]})
    )
    ok(admin.delete(f"/v3/globalrolebindings/{binding['id']}"))
    member = ok(
        admin.post(
            "/v3/clusterroletemplatebindings",
            {"clusterId": cluster_id, "userId": user["id"], "roleTemplateId": "cluster-member"},
        )
    )
    ok(admin.delete(f"/v3/clusterroletemplatebindings/{member['id']}"))

    kept_project = _project_ready(admin, cluster_id, "kept-by-pods")
    project_id = _project_ready(admin, cluster_id, "changed-by-pods")
    ok(admin.put(f"/v3/projects/{project_id}", {"description": "changed"}))
    role = ok(
        admin.post(
            "/v3/projectroletemplatebindings",
            {"projectId": project_id, "userId": user["id"], "roleTemplateId": "project-member"},
        )
    )
    ok(admin.delete(f"/v3/projectroletemplatebindings/{role['id']}"))
    ok(admin.get(f"/v3/projects/{project_id}/events"))
    # A project secret, kept in svc-system (the chart grants no Secret rights elsewhere).
    secrets_url = f"/v3/projects/{project_id}/secrets"
    secret = ok(admin.post(secrets_url, {"name": "db", "stringData": {"password": "pods"}}))
    ok(admin.get(secrets_url))
    ok(admin.put(f"{secrets_url}/{secret['id']}", {"stringData": {"password": "changed"}}))
    ok(admin.delete(f"{secrets_url}/{secret['id']}"))
    ok(admin.delete(f"/v3/projects/{project_id}"))

    for value in ("50000", "60000"):
        ok(admin.put("/v3/settings/api-rate-limit-per-minute", {"value": value}))
    token = ok(admin.post("/v3/token", {"description": "helm e2e"}))
    ok(admin.delete(f"/v3/tokens/{token['id']}"))
    # Inactive: the operator's pod fetches nothing from the example address.
    driver = ok(
        admin.post(
            "/v3/nodedrivers",
            {"name": "helme2e", "active": False, "url": "https://example.com/corral-driver"},
        )
    )
    ok(admin.post(f"/v3/nodedrivers/{driver['id']}?action=deactivate"))
    ok(admin.delete(f"/v3/nodedrivers/{driver['id']}"))
    # A template of the builtin kwok driver and a credential, whose Secret is in svc-system.
    credential = ok(admin.post("/v3/cloudcredentials", {"kwokcredentialConfig": {}}))
    ok(admin.put(f"/v3/cloudcredentials/{credential['id']}", {"kwokcredentialConfig": {}}))
    template = ok(
        admin.post(
            "/v3/nodetemplates",
            {"kwokConfig": {"cpu": "2"}, "cloudCredentialName": credential["id"]},
        )
    )
    ok(admin.get("/v3/nodetemplates"))
    ok(admin.put(f"/v3/nodetemplates/{template['id']}", {"kwokConfig": {"cpu": "3"}}))
    # A pool of one kwok machine in the imported cluster, made, scaled away and deleted.
    pool = ok(
        admin.post(
            "/v3/nodepools",
            {
                "clusterId": cluster_id,
                "hostnamePrefix": "helm-pool",
                "quantity": 1,
                "nodeTemplateName": template["id"],
            },
        )
    )
    pool_url = f"/v3/nodepools/{pool['id']}"
    wait_for("the pool's machine Ready", lambda: admin.get(pool_url).body.get("ready") == 1, 60)
    # Its machine deleted through /v3: the pool makes another.
    (machine,) = _machines(admin, cluster_id, pool["id"])
    ok(admin.delete(f"/v3/clusters/{cluster_id}/nodes/{machine}"))

    def replaced() -> bool:
        now = _machines(admin, cluster_id, pool["id"])
        return len(now) == 1 and now != [machine] and admin.get(pool_url).body.get("ready") == 1

    wait_for("the machine replaced", replaced, 60)
    ok(admin.put(pool_url, {"quantity": 0}))
    wait_for("the machine removed", lambda: _scaled_to_zero(admin, pool_url), 60)
    ok(admin.delete(pool_url))
    wait_for("the pool gone", lambda: admin.get(pool_url).status == 404, 60)
    ok(admin.delete(f"/v3/nodetemplates/{template['id']}"))
    ok(admin.delete(f"/v3/cloudcredentials/{credential['id']}"))
    # An OpenID Connect provider configured, not enabled (no provider runs here).
    oidc = {"issuer": "https://issuer.invalid", "clientId": "corral", "enabled": False}
    ok(admin.put("/v3/authConfigs/oidc", oidc))
    ok(admin.put("/v3/authConfigs/oidc", {"groupsClaim": "roles"}))
    ok(admin.put(f"/v3/clusters/{cluster_id}", {"description": "changed through the pods"}))
    node = admin.get(f"/v3/clusters/{cluster_id}/nodes").body["data"][0]
    ok(
        admin.put(
            f"/v3/clusters/{cluster_id}/nodes/{node['id']}",
            {"desiredNodeTaints": [{"key": "helm", "value": "e2e", "effect": "NoSchedule"}]},
        )
    )
    # A user deleted with a session and role bindings: the operator removes them with it.
    leaver = ok(
        admin.post("/v3/users", {"username": "helm-e2e-2", "password": "a-long-password-3"})
    )
    ok(admin.login("helm-e2e-2", "a-long-password-3"))
    ok(
        admin.post(
            "/v3/clusterroletemplatebindings",
            {"clusterId": cluster_id, "userId": leaver["id"], "roleTemplateId": "cluster-member"},
        )
    )
    ok(
        admin.post(
            "/v3/projectroletemplatebindings",
            {"projectId": kept_project, "userId": leaver["id"], "roleTemplateId": "project-member"},
        )
    )
    for gone in (user, leaver):
        ok(admin.delete(f"/v3/users/{gone['id']}"))
    wait_for(
        "the leaver's tokens gone", lambda: not _tokens_of(install, leaver["id"]), READY_TIMEOUT
    )
    # A node that leaves the downstream cluster leaves corral's records too.
    nodes = admin.get(f"/v3/clusters/{cluster_id}/nodes").body["data"]
    downstream = k8s.CoreV1Api(
        k8s_config.new_client_from_config(
            config_file=str(install.env.downstreams[0].kubeconfig_path)
        )
    )
    downstream.delete_node(nodes[-1]["name"])
    wait_for(
        "node record gone",
        lambda: len(admin.get(f"/v3/clusters/{cluster_id}/nodes").body["data"]) == len(nodes) - 1,
        READY_TIMEOUT,
    )
    ok(admin.delete(f"/v3/clusters/{cluster_id}"))
    wait_for(
        "imported cluster deleted",
        lambda: admin.get(f"/v3/clusters/{cluster_id}").status == 404,
        READY_TIMEOUT,
    )


def test_a_provisioned_cluster_through_the_pods(install: Install) -> None:
    """The operator's pod provisions an rke2 cluster with the chart's RBAC (binding itself the
    hosted role in the cluster's namespace), gets into it, backs its etcd up, and removes it
    whole."""
    admin = install.admin
    assert admin is not None, "runs after the login test"
    created = admin.post(
        "/v3/clusters", {"name": "hosted", "rke2Config": {"kubernetesVersion": "v1.36.3"}}
    )
    assert created.status == 201, created.body
    cluster_id = created.body["id"]

    def ready() -> bool:
        body = admin.get(f"/v3/clusters/{cluster_id}").body
        conditions = (body.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    wait_for(f"cluster {cluster_id} Ready", ready, PROVISION_TIMEOUT)
    backup = admin.post(f"/v3/clusters/{cluster_id}?action=backupEtcd", {})
    assert backup.status == 201, backup.body
    backup_url = f"/v3/etcdbackups/{backup.body['id']}"
    saved = wait_for(
        "the etcd backup saved",
        lambda: (body := admin.get(backup_url).body).get("state") == "active" and body,
        PROVISION_TIMEOUT,
    )
    assert saved["size"] > 0
    assert backup.body["id"] in {b["id"] for b in admin.get("/v3/etcdbackups").body["data"]}
    assert admin.delete(backup_url).status == 204
    rbac = k8s.RbacAuthorizationV1Api(install.core.api_client)
    bindings = rbac.list_namespaced_role_binding(cluster_id).items
    assert [(b.metadata.name, b.role_ref.name) for b in bindings] == [
        ("corral-operator", "corral-operator-hosted")
    ]
    assert admin.delete(f"/v3/clusters/{cluster_id}").status == 204
    wait_for(
        "the cluster's namespace gone",
        lambda: cluster_id not in {n.metadata.name for n in install.core.list_namespace().items},
        PROVISION_TIMEOUT,
    )


def _tokens_of(install: Install, user_id: str) -> list[dict[str, Any]]:
    tokens = install.crs.list_cluster_custom_object("management.svc.io", "v3", "tokens")["items"]
    return [t for t in tokens if t["spec"].get("userId") == user_id]


def test_rbac_is_enough_and_grants_nothing_the_code_does_not_use(install: Install) -> None:
    manifest = install.run_helm("get", "manifest", RELEASE)
    granted, cover = _granted(manifest)
    assert set(granted) == {OPERATOR_SA, API_SA}
    # The operator writes the `cluster-member` ClusterRole of the management cluster itself, and
    # Kubernetes lets it grant only what it holds: one role holds exactly those rules, unused.
    assert cover == {OPERATOR_SA: _expand(roles.CLUSTER_MEMBER_RULES)}
    assert install.env.management is not None
    used, refused = _audited(install.env.management.audit_log)
    # Every request the pods made was allowed ...
    assert refused == set(), f"requests the chart's RBAC refused: {sorted(refused)}"
    # ... and every permission granted was used by what the tests above did, or is needed by
    # a path they cannot reach (races, recovery), which the code must still hold.
    for account, permissions in granted.items():
        unused = permissions - used.get(account, set()) - set(UNREACHED.get(account, {}))
        unused -= cover.get(account, set())
        assert not unused, f"{account} is granted what it never used: {sorted(unused)}"
    for account, reasons in UNREACHED.items():
        for permission, (path, call) in reasons.items():
            assert permission in granted[account], f"{permission} is no longer granted"
            assert call in (ROOT / path).read_text(), f"{path} no longer calls {call}"


# Permissions the chart grants for code paths no test here can reach in order: each names the
# file and the call that needs it, checked above to be still there.
UNREACHED: dict[str, dict[Permission, tuple[str, str]]] = {
    API_SA: {
        # A cluster agent's tunnel held by a replica: its Lease taken, renewed and dropped. No
        # agent dials this installation (tests/e2e/test_cluster_agent.py drives them).
        ("coordination.k8s.io", "leases", "create"): (
            "core/corral/core/kube/tunnel_leases.py",
            "await kube.apply(lease, field_manager=FIELD_MANAGER, force=True)",
        ),
        ("coordination.k8s.io", "leases", "patch"): (
            "core/corral/core/kube/tunnel_leases.py",
            "await kube.patch(Lease, name, patch",
        ),
        ("coordination.k8s.io", "leases", "get"): (
            "core/corral/core/kube/tunnel_leases.py",
            "await kube.get(Lease, name, namespace=names.SYSTEM_NAMESPACE)",
        ),
        ("coordination.k8s.io", "leases", "delete"): (
            "core/corral/core/kube/tunnel_leases.py",
            "delete_if_present(kube, Lease, name, names.SYSTEM_NAMESPACE)",
        ),
        # A concurrent write lost: the project is read again and the change merged.
        ("management.svc.io", "projects", "get"): (
            "apiserver/corral/apiserver/services/admission.py",
            "kube.get(kinds.Project",
        ),
        # An import claim left by an API server that died mid-import is taken over ...
        ("management.svc.io", "clusters", "get"): (
            "apiserver/corral/apiserver/services/claims.py",
            "kube.get(kinds.Cluster, holder)",
        ),
        ("", "secrets", "update"): (
            "apiserver/corral/apiserver/services/claims.py",
            "kube.replace(replacement)",
        ),
        # ... and released when an import fails after claiming.
        ("", "secrets", "delete"): (
            "apiserver/corral/apiserver/services/claims.py",
            "kube, Secret, claim_name(identity)",
        ),
        # Two creates of one username at once: the loser checks the claim's holder.
        ("management.svc.io", "users", "get"): (
            "core/corral/core/kube/usernames.py",
            "kube.get(kinds.User, holder)",
        ),
        # A project's creator already holds its owner binding (a retried create).
        ("management.svc.io", "projectroletemplatebindings", "get"): (
            "apiserver/corral/apiserver/services/bindings.py",
            "kinds.ProjectRoleTemplateBinding, binding_name",
        ),
        # A user's name claim is given up when its User could not be created.
        ("", "configmaps", "delete"): (
            "core/corral/core/kube/usernames.py",
            "kube.delete(ConfigMap",
        ),
        # Server-side apply of a Setting nobody stored yet creates it.
        ("management.svc.io", "settings", "create"): (
            "apiserver/corral/apiserver/services/settings.py",
            ".apply(obj, force=True)",
        ),
        # ... and of a sign-in provider's AuthConfig.
        ("management.svc.io", "authconfigs", "create"): (
            "apiserver/corral/apiserver/services/authconfigs.py",
            "kinds.AuthConfig(metadata=ObjectMeta(name=provider)",
        ),
        # A user's groups are recorded at an OpenID Connect sign-in (tests/e2e/test_oidc.py
        # runs one against Keycloak; the chart's scenario has no provider).
        ("management.svc.io", "userattributes", "create"): (
            "core/corral/core/kube/user_attributes.py",
            "kube.apply(attribute",
        ),
        ("management.svc.io", "userattributes", "patch"): (
            "core/corral/core/kube/user_attributes.py",
            "kube.apply(attribute",
        ),
        # Registration tokens and machines registering with them: the chart's scenario
        # provisions no rke2 or k3s cluster (tests/contract/test_registration.py does).
        ("management.svc.io", "clusterregistrationtokens", "create"): (
            "core/corral/core/kube/registration_tokens.py",
            "kube.create(kinds.ClusterRegistrationToken",
        ),
        ("management.svc.io", "clusterregistrationtokens", "patch"): (
            "core/corral/core/kube/registration_tokens.py",
            'kinds.ClusterRegistrationToken, meta["name"], patch',
        ),
        ("management.svc.io", "clusterregistrationtokens", "delete"): (
            "core/corral/core/kube/registration_tokens.py",
            "delete_if_present(kube, kinds.ClusterRegistrationToken",
        ),
        ("management.svc.io", "nodes", "create"): (
            "apiserver/corral/apiserver/services/registering.py",
            "deps.kube.create(kinds.Node(",
        ),
    },
    OPERATOR_SA: {
        # `bind` is an authorization check inside the RoleBinding's create, not a request of
        # its own, so the audit log never shows it.
        ("rbac.authorization.k8s.io", "clusterroles", "bind"): (
            "operator/corral/operator/controlplane/pods.py",
            'kind="ClusterRole"',
        ),
        # The group sync records groups of users who signed in with OpenID Connect.
        ("management.svc.io", "userattributes", "create"): (
            "core/corral/core/kube/user_attributes.py",
            "kube.apply(attribute",
        ),
        ("management.svc.io", "userattributes", "patch"): (
            "core/corral/core/kube/user_attributes.py",
            "kube.apply(attribute",
        ),
        # A provisioned cluster's default registration token, and a real machine's own (the
        # chart's scenario provisions no rke2 or k3s cluster; tests/e2e/test_provisioning.py
        # and test_nodepools.py reach these).
        ("management.svc.io", "clusterregistrationtokens", "get"): (
            "core/corral/core/kube/registration_tokens.py",
            "kube.get(kinds.ClusterRegistrationToken",
        ),
        ("management.svc.io", "clusterregistrationtokens", "create"): (
            "core/corral/core/kube/registration_tokens.py",
            "kube.create(kinds.ClusterRegistrationToken",
        ),
        ("management.svc.io", "clusterregistrationtokens", "patch"): (
            "core/corral/core/kube/registration_tokens.py",
            'kinds.ClusterRegistrationToken, meta["name"], patch',
        ),
        ("management.svc.io", "clusterregistrationtokens", "delete"): (
            "core/corral/core/kube/registration_tokens.py",
            "delete_if_present(kube, kinds.ClusterRegistrationToken",
        ),
        # A cluster imported before claims existed, whose claim was made meanwhile.
        ("", "secrets", "get"): (
            "core/corral/core/kube/claims.py",
            "kube.get(Secret, claim_name(identity)",
        ),
    },
}


Permission = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)


Grants = dict[str, set[Permission]]
ESCALATION_COVER = "escalation-cover"


def _granted(manifest: str) -> tuple[Grants, Grants]:
    """What each service account is granted: to use, and held only to grant it on."""
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    role_docs = {
        (d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"] in ("Role", "ClusterRole")
    }
    granted: Grants = {}
    cover: Grants = {}
    for binding in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        role = role_docs[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
        purpose = (role["metadata"].get("annotations") or {}).get("management.svc.io/rbac-purpose")
        into = cover if purpose == ESCALATION_COVER else granted
        for subject in binding["subjects"]:
            account = f"system:serviceaccount:{subject['namespace']}:{subject['name']}"
            into.setdefault(account, set()).update(_expand(role.get("rules") or []))
    return granted, cover


def _expand(rules: list[dict[str, Any]]) -> set[Permission]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def _audited(log: Path) -> tuple[dict[str, set[Permission]], set[tuple[str, Permission]]]:
    used: dict[str, set[Permission]] = {}
    refused: set[tuple[str, Permission]] = set()
    for line in log.read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef")
        if not ref:
            continue  # discovery and /version: every authenticated user may read them
        # A watch is audited complete only when it ends, which an open one (a shard's runtime
        # that stays on its replica) has not yet; it was allowed once its answer started.
        done = (
            ("ResponseComplete", "ResponseStarted")
            if event["verb"] == "watch"
            else ("ResponseComplete",)
        )
        if event.get("stage") not in done:
            continue
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        group, verb = ref.get("apiGroup", ""), event["verb"]
        account = event["user"]["username"]
        code = (event.get("responseStatus") or {}).get("code")
        decision = event.get("annotations", {}).get("authorization.k8s.io/decision")
        # A server-side apply that creates is audited as `patch` but authorized as `create`
        # too, and that second check's refusal shows only as the 403.
        if decision == "forbid" or code == 403:
            refused.add((account, (group, resource, verb)))
            continue
        used.setdefault(account, set()).add((group, resource, verb))
        if verb == "patch" and code == 201:
            used[account].add((group, resource, "create"))
    return used, refused


def test_uninstall_leaves_the_crds_and_custom_resources_and_nothing_else(
    install: Install,
) -> None:
    clusters_before = install.crs.list_cluster_custom_object("management.svc.io", "v3", "clusters")
    install.run_helm(
        "uninstall",
        RELEASE,
        "--wait",
        f"--timeout={int(READY_TIMEOUT)}s",
    )
    selector = f"app.kubernetes.io/instance={RELEASE}"
    extensions = k8s.ApiextensionsV1Api(install.core.api_client)
    crds = extensions.list_custom_resource_definition(label_selector=selector).items
    assert {c.metadata.name for c in crds} >= {
        "clusters.management.svc.io",
        "projects.management.svc.io",
    }
    clusters = install.crs.list_cluster_custom_object("management.svc.io", "v3", "clusters")
    assert {c["metadata"]["name"] for c in clusters["items"]} == {
        c["metadata"]["name"] for c in clusters_before["items"]
    }
    assert install.crs.list_cluster_custom_object("management.svc.io", "v3", "projects")["items"]
    # Nothing else of the release is left.
    rbac = k8s.RbacAuthorizationV1Api(install.core.api_client)
    leftovers = [
        *install.apps.list_namespaced_deployment(NAMESPACE, label_selector=selector).items,
        *install.core.list_namespaced_service(NAMESPACE, label_selector=selector).items,
        *install.core.list_namespaced_service_account(NAMESPACE, label_selector=selector).items,
        *install.core.list_namespaced_secret(NAMESPACE, label_selector=selector).items,
        *install.core.list_namespaced_config_map(NAMESPACE, label_selector=selector).items,
        *rbac.list_cluster_role(label_selector=selector).items,
        *rbac.list_cluster_role_binding(label_selector=selector).items,
        *rbac.list_namespaced_role(NAMESPACE, label_selector=selector).items,
    ]
    assert [obj.metadata.name for obj in leftovers] == []
    wait_for(
        "pods gone", lambda: not install.pods("api") and not install.pods("operator"), READY_TIMEOUT
    )
