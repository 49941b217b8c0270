"""The real stack, started once per test session the way `make run` starts it.

Tests check what lands in the clusters with the official `kubernetes` client, independently of
corral's own client code.
"""

from __future__ import annotations

import secrets
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling, Scheduling

from corral.core.kube.claims import ANNOTATION_IDENTITY
from corral.devenv.controlplane import ControlPlane
from corral.devenv.environment import Environment, Options
from corral.devenv.keycloak import Keycloak
from corral.devenv.waiting import wait_for

from ..conftest import DEVKUBE_BIN, ROOT, build_devkube
from .api import Api

HERE = Path(__file__).parent

# The modules that run a real node or machines. They share fixed state of this host (the bridge at
# 10.254.0.1, /run/corral/containerd.sock, the kubelet's folders, /tmp/hostpath_pv), and
# test_real_node compares the host before and after, so under pytest-xdist they run one after
# another on one worker.
HOST_MODULES = frozenset({"test_agent_pod", "test_helm_install", "test_machines",
                          "test_pod_streams", "test_provisioning", "test_real_machines",
                          "test_real_node", "test_ssh_machines"})  # fmt: skip


# The modules that sign in through Keycloak: one worker runs them all, so that it starts once.
SIGN_IN_MODULES = frozenset({"test_console_oidc", "test_oidc"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    e2e = [item for item in items if item.path.parent == HERE]
    for item in e2e:
        item.add_marker(pytest.mark.e2e)
    # The host group is the longest (test_provisioning alone takes about 5 minutes): collected
    # first, it is handed out first.
    host = {item for item in e2e if item.path.stem in HOST_MODULES}
    items.sort(key=lambda item: item not in host)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> Scheduling:
    # In collection order, not pytest-xdist's default of the groups with the most tests first.
    config.option.loadscopereorder = False
    return ModuleScheduling(config, log)


class ModuleScheduling(LoadScopeScheduling):
    """Hands each worker whole modules, so that a module's fixtures start once, and the host
    modules as one group, the sign-in modules as another. (pytest-xdist's own loadgroup cannot
    do it under pytest 9.2: it writes the group into an attribute that pytest no longer
    reads.)"""

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        stem = Path(module).stem
        if stem in HOST_MODULES:
            return "host"
        return "sign-in" if stem in SIGN_IN_MODULES else module


@pytest.fixture(scope="session")
def previous_devkube() -> Path:
    """The slim devkube of Kubernetes 1.35, to upgrade provisioned clusters from; built like
    devkube (about 5.5 minutes cold on 2 cores), only for the modules that ask for it."""
    build_devkube(ROOT / "tools" / "devkube" / "v1.35" / "build.sh")
    return DEVKUBE_BIN / "devkube-v1.35"


@pytest.fixture(scope="session")
def image() -> tuple[str, Path]:
    """corral's image as `make image` builds it (a no-op when its inputs are unchanged): its
    reference and OCI archive, for `Environment.import_image`."""
    done = subprocess.run(
        [str(ROOT / "tools" / "image" / "build.sh")], capture_output=True, text=True, check=True
    )
    lines = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return lines["IMAGE"], Path(lines["ARCHIVE"])


def stack_options(root: Path, devkube: Path, **overrides: object) -> Options:
    settings: dict[str, object] = {
        "root": root,
        "devkube": devkube,
        "crds": ROOT / "crds",
        "downstream_clusters": 1,
        "nodes_per_cluster": 3,
        "api_port": 0,
    }
    settings.update(overrides)
    return Options(**settings)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory, devkube: Path) -> Iterator[Environment]:
    with Environment(stack_options(tmp_path_factory.mktemp("corral"), devkube)) as env:
        # The suite makes hundreds of requests a minute as the admin; the rate limit has its
        # own test, which lowers it for its users alone.
        set_setting(env, "api-rate-limit-per-minute", "100000")
        yield env


@pytest.fixture(scope="session")
def keycloak(stack: Environment, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Keycloak]:
    """A real OpenID Connect provider on loopback for the sign-in modules (SIGN_IN_MODULES, run
    on one worker), each in realms of its own: started once (it takes a minute of CPU), after
    the stack, and stopped when the worker's session ends."""
    provider = Keycloak(tmp_path_factory.mktemp("keycloak")).start()
    try:
        yield provider
    finally:
        provider.stop()


def set_setting(env: Environment, name: str, value: str) -> None:
    """Write a Setting's value as kubectl would: the CR itself, not through the API."""
    crs = k8s.CustomObjectsApi(k8s_config.new_client_from_config(str(env.management_kubeconfig)))
    crs.patch_cluster_custom_object("management.svc.io", "v3", "settings", name, {"value": value})


def room_in_the_minute(seconds: float) -> None:
    """Wait, if need be, until the wall clock's minute has `seconds` left: rate-limit windows
    are the clock's minutes, and requests counted against one must not straddle two."""
    wait_for(f"a minute with {seconds:.0f} s left", lambda: time.time() % 60 <= 60 - seconds, 60)


@pytest.fixture(scope="session")
def management(stack: Environment) -> k8s.ApiClient:
    return k8s_config.new_client_from_config(config_file=str(stack.management_kubeconfig))


@pytest.fixture(scope="session")
def downstream(stack: Environment) -> k8s.ApiClient:
    return k8s_config.new_client_from_config(config_file=str(stack.downstream_kubeconfigs()[0]))


@pytest.fixture(scope="session")
def corral_tls(stack: Environment) -> ssl.SSLContext:
    """Trusts the CA of corral's serving certificate, as CORRAL_CA tells a client to."""
    return ssl.create_default_context(cafile=str(stack.ca_path))


@pytest.fixture(scope="session")
def api(stack: Environment, corral_tls: ssl.SSLContext) -> Api:
    """The admin's API token from .corral/dev.env (CORRAL_TOKEN)."""
    return Api(stack.api_url, corral_tls, stack.admin_token)


@pytest.fixture(scope="session")
def crs(management: k8s.ApiClient) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(management)


@pytest.fixture
def add_downstream(
    stack: Environment, crs: k8s.CustomObjectsApi
) -> Iterator[Callable[..., ControlPlane]]:
    """Starts simulated clusters for one test (`stack.add_downstream`) and stops them when the
    test ends, so that they do not run through every later module."""
    planes: list[ControlPlane] = []

    def add(name: str, nodes: int = 2, stream_namespaces: Sequence[str] = ()) -> ControlPlane:
        plane = stack.add_downstream(name, nodes, stream_namespaces)
        planes.append(plane)
        return plane

    yield add
    for plane in planes:
        remove_downstream(stack, crs, plane)


def remove_downstream(stack: Environment, crs: k8s.CustomObjectsApi, plane: ControlPlane) -> None:
    """Stops a cluster stack.add_downstream() started, once no Cluster of corral's is made of it:
    a deleted Cluster goes only after its clean-up reached the cluster, which must still run."""
    core = k8s.CoreV1Api(k8s_config.new_client_from_config(str(plane.kubeconfig_path)))
    identity = core.read_namespace("kube-system").metadata.uid

    def unmanaged() -> bool:
        clusters = crs.list_cluster_custom_object("management.svc.io", "v3", "clusters")["items"]
        return all((c["metadata"].get("annotations") or {}).get(ANNOTATION_IDENTITY) != identity
                   for c in clusters)  # fmt: skip

    wait_for(f"no Cluster of {plane.name} left in corral", unmanaged, 90)
    stack.remove_downstream(plane)


@pytest.fixture(scope="module")
def replica(stack: Environment, api: Api) -> Iterator[Api]:
    """A second API server replica for one module, stopped when the module ends."""
    url = stack.add_apiserver_replica()
    yield Api(url, api.context, api.token)
    stack.remove_apiserver_replica(url)


@dataclass
class Person:
    id: str
    username: str
    password: str
    api: Api  # authenticated with a fresh session token


def new_person(api: Api, admin: bool = False) -> Person:
    """A user created through /v3/users, logged in with a fresh session."""
    username = f"user-{secrets.token_hex(4)}"
    password = secrets.token_urlsafe(16)
    created = api.post("/v3/users", {"username": username, "password": password})
    assert created.status == 201, created.body
    user_id = created.body["id"]
    if admin:
        granted = api.post("/v3/globalrolebindings", {"globalRoleId": "admin", "userId": user_id})
        assert granted.status == 201, granted.body
    login = wait_for("login of a new user", lambda: _logged_in(api, username, password), 10)
    return Person(user_id, username, password, api.as_token(login))


@pytest.fixture
def make_user(api: Api) -> Callable[..., Person]:
    """Creates a user through /v3/users and logs them in."""

    def make(admin: bool = False) -> Person:
        return new_person(api, admin)

    return make


def _logged_in(api: Api, username: str, password: str) -> str | None:
    response = api.login(username, password)
    return response.body["token"] if response.status == 201 else None


@pytest.fixture
def setting(
    api: Api, stack: Environment, crs: k8s.CustomObjectsApi
) -> Iterator[Callable[[str, str], None]]:
    """Changes settings for one test and puts them back afterwards."""
    saved: dict[str, str] = {}

    def change(name: str, value: str) -> None:
        if name not in saved:
            stored = crs.get_cluster_custom_object("management.svc.io", "v3", "settings", name)
            saved[name] = stored.get("value", "")
        set_setting(stack, name, value)
        # The API server reads settings from its watch cache: wait until it has the change.
        wait_for(f"setting {name}={value}",
                 lambda: api.get(f"/v3/settings/{name}").body["value"] == value, 10)  # fmt: skip

    yield change
    for name, value in saved.items():
        set_setting(stack, name, value)
        wait_for(f"setting {name} restored", lambda n=name: restored(api, n, saved[n]), 10)


def restored(api: Api, name: str, value: str) -> bool:
    current = api.get(f"/v3/settings/{name}").body
    return bool(current["customized"]) == bool(value) and (not value or current["value"] == value)
