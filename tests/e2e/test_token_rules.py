"""Issue 15's token rules through HTTPS and the management cluster: system tokens, kubeconfig
token names and lifetimes, `status.expired`, idle sessions purged, the key index, and spec
5.2's order (an expired token of a disabled user is 410)."""

from __future__ import annotations

import base64
import datetime
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from corral.core.auth import hashing
from corral.devenv.waiting import wait_for

from .api import Api
from .conftest import Person
from .test_tokens import GROUP, VERSION, token_cr

SYSTEM_NAMES = ("system-operator", "system-apiserver", "system-cluster-agent")
INDEX = "authn.management.svc.io/token-key-index"


def status_of(crs: k8s.CustomObjectsApi, name: str) -> dict[str, Any]:
    return (token_cr(crs, name) or {}).get("status") or {}


def make_token(crs: k8s.CustomObjectsApi, name: str, user_id: str, ttl_ms: int) -> str:
    """A Token labelled `system`, written as an administrator would with kubectl; returns
    `<name>:<key>`."""
    key = hashing.new_key()
    crs.create_cluster_custom_object(GROUP, VERSION, "tokens", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Token",
        "metadata": {"name": name, "labels": {
            "authn.management.svc.io/token-userId": user_id,
            "authn.management.svc.io/kind": "system"}},
        "spec": {"token": hashing.hash_key(key), "userId": user_id, "isDerived": True,
                 "ttlMillis": ttl_ms},
    })  # fmt: skip
    return f"{name}:{key}"


@pytest.fixture
def agent(crs: k8s.CustomObjectsApi, make_user: Callable[..., Person]) -> Iterator[Person]:
    """A user (an administrator) holding the system token `system-cluster-agent`, whose
    lifetime of 1 ms is long over by the time it is used."""
    person = make_user(admin=True)
    value = make_token(crs, "system-cluster-agent", person.id, 1)
    yield Person(person.id, person.username, person.password, person.api.as_token(value))
    crs.delete_cluster_custom_object(GROUP, VERSION, "tokens", "system-cluster-agent")


# -- system tokens ----------------------------------------------------------------------------


def test_a_system_token_never_expires_is_never_shown_and_cannot_be_deleted(
    api: Api, crs: k8s.CustomObjectsApi, agent: Person,
    setting: Callable[[str, str], None], make_user: Callable[..., Person],
) -> None:  # fmt: skip
    holder = agent.api
    assert wait_for("the system token accepted", lambda: holder.get("/v3/clusters").status == 200,
                    10)  # fmt: skip
    name = "system-cluster-agent"
    # Never listed nor shown, to its holder or to an administrator.
    for caller in (api, holder):
        assert name not in {t["id"] for t in caller.get("/v3/tokens").body["data"]}
        assert caller.get(f"/v3/tokens/{name}").status == 404
    # Never deleted through the API, whoever asks, whether it exists or not.
    person = make_user()
    for caller in (api, holder, person.api):
        for target in SYSTEM_NAMES:
            refused = caller.delete(f"/v3/tokens/{target}")
            assert (refused.status, refused.body["code"]) == (403, "PermissionDenied")
            assert "system token" in refused.body["message"]
    assert holder.post("/v3/tokens?action=logoutAll").status == 200
    assert token_cr(crs, name) is not None
    # The operator records no expiry, and a purge leaves it.
    doomed = person.api.post("/v3/token", {"ttlMillis": 1000}).body["id"]
    setting("token-purge-interval-minutes", "0.02")
    wait_for("a purge", lambda: token_cr(crs, doomed) is None, 30)
    assert token_cr(crs, name) is not None and "expiresAt" not in status_of(crs, name)
    assert holder.get("/v3/clusters").status == 200


def test_a_system_label_on_another_name_makes_no_system_token(
    api: Api, crs: k8s.CustomObjectsApi
) -> None:
    value = make_token(crs, "token-e2elabelled", "u-admin", 3_600_000)
    wait_for("the token in the cache", lambda: api.get("/v3/tokens/token-e2elabelled").status
             == 200, 10)  # fmt: skip
    assert api.get("/v3/tokens/token-e2elabelled").body["expiresAt"] != ""
    assert api.delete("/v3/tokens/token-e2elabelled").status == 204
    assert api.as_token(value).get("/v3/clusters").status == 404


# -- kubeconfig tokens ------------------------------------------------------------------------


def generate(caller: Api, cluster: str, body: dict[str, Any] | None = None) -> str:
    response = caller.post(f"/v3/clusters/{cluster}?action=generateKubeconfig", body)
    assert response.status == 200, response.body
    config = yaml.safe_load(base64.b64decode(response.body["config"]))
    token: str = config["users"][0]["user"]["token"]
    return token


def test_kubeconfig_tokens_are_named_after_username_and_cluster_with_a_chosen_ttl(
    api: Api, crs: k8s.CustomObjectsApi, setting: Callable[[str, str], None]
) -> None:
    setting("kubeconfig-default-token-ttl-minutes", "5")
    first = generate(api, "local")
    name = first.split(":")[0]
    assert name == "kubeconfig-admin.local"
    stored = token_cr(crs, name)
    assert stored is not None and stored["spec"]["ttlMillis"] == 300_000  # the setting
    assert stored["metadata"]["labels"]["authn.management.svc.io/kind"] == "kubeconfig"

    chosen = generate(api, "local", {"ttl": 120_000})
    assert token_cr(crs, name)["spec"]["ttlMillis"] == 120_000  # type: ignore[index]
    # The second generation replaced the first: the old key no longer works.
    old = api.as_token(first).get("/k8s/clusters/local/api")
    assert (old.status, old.body["message"]) == (422, "invalid auth token value")
    assert api.as_token(chosen).get("/k8s/clusters/local/api").status == 200

    setting("auth-token-max-ttl-minutes", "1")
    generate(api, "local", {"ttlMillis": 120_000})
    assert token_cr(crs, name)["spec"]["ttlMillis"] == 60_000  # type: ignore[index]
    generate(api, "local", {"ttl": 0})  # "no expiry" under a maximum gets the maximum
    assert token_cr(crs, name)["spec"]["ttlMillis"] == 60_000  # type: ignore[index]
    generate(api, "local")  # the default, clamped too
    assert token_cr(crs, name)["spec"]["ttlMillis"] == 60_000  # type: ignore[index]


@pytest.mark.parametrize("body", [{"ttl": -1}, {"ttl": "soon"}, {"ttlMillis": 1.5}])
def test_a_bad_kubeconfig_ttl_is_422_and_keeps_the_token(
    api: Api, crs: k8s.CustomObjectsApi, body: dict[str, Any]
) -> None:
    kept = generate(api, "local")
    refused = api.post("/v3/clusters/local?action=generateKubeconfig", body)
    assert (refused.status, refused.body["fieldName"]) == (422, "ttl")
    assert api.as_token(kept).get("/k8s/clusters/local/api").status == 200


def test_a_username_that_cannot_be_a_name_gives_the_user_id(
    api: Api, stack: Any, demo_cluster: str
) -> None:
    username, password = "Casey.Jones@Example.com", hashing.new_key()
    created = api.post("/v3/users", {"username": username, "password": password})
    assert created.status == 201, created.body
    user_id = created.body["id"]
    grant = {"clusterId": demo_cluster, "userId": user_id, "roleTemplateId": "cluster-member"}
    assert api.post("/v3/clusterroletemplatebindings", grant).status == 201
    login = wait_for("login", lambda: api.login(username, password).body.get("token"), 10)
    token = generate(api.as_token(login), demo_cluster)
    assert token.split(":")[0] == f"kubeconfig-{user_id}.{demo_cluster}"
    api.delete(f"/v3/users/{user_id}")


@pytest.fixture(scope="module")
def demo_cluster(api: Api) -> str:
    clusters = api.get("/v3/clusters").body["data"]
    return str(next(c["id"] for c in clusters if c["id"] != "local"))


# -- status.expired, idle sessions, the key index, the order of checks -----------------------


def test_status_expired_turns_true_when_a_token_expires(
    make_user: Callable[..., Person], crs: k8s.CustomObjectsApi
) -> None:
    person = make_user()
    created = person.api.post("/v3/token", {"ttlMillis": 3000}).body
    name = created["id"]
    expires = datetime.datetime.fromisoformat(created["expiresAt"])

    def recorded() -> tuple[dict[str, Any], datetime.datetime] | None:
        found = status_of(crs, name)
        return (found, datetime.datetime.now(datetime.UTC)) if found.get("expiresAt") else None

    # As first recorded: a status read before the token's 3 s are up must not say expired (on
    # a slow machine the operator's first write may come after them, and rightly say so).
    first, read_by = wait_for("expiresAt recorded", recorded, 20)
    if read_by < expires:
        assert first["expired"] is False, first
    wait_for("status.expired", lambda: status_of(crs, name).get("expired") is True, 20)
    assert status_of(crs, name)["expiresAt"] == created["expiresAt"]
    gone = person.api.as_token(created["token"]).get("/v3/tokens")
    assert (gone.status, gone.body["message"]) == (410, "must authenticate, expired")


def test_idle_sessions_are_purged(
    make_user: Callable[..., Person], crs: k8s.CustomObjectsApi,
    setting: Callable[[str, str], None],
) -> None:  # fmt: skip
    person = make_user()
    api_token = person.api.post("/v3/token", {}).body["id"]
    setting("auth-user-session-idle-ttl-minutes", "0.05")  # 3 s
    session = person.api.login(person.username, person.password).body["id"]
    setting("token-purge-interval-minutes", "0.02")
    wait_for("the idle session purged", lambda: token_cr(crs, session) is None, 30)
    assert token_cr(crs, api_token) is not None  # derived tokens are never idle


def test_new_tokens_are_in_the_key_index(
    make_user: Callable[..., Person], crs: k8s.CustomObjectsApi
) -> None:
    person = make_user()
    created = person.api.post("/v3/token", {}).body
    name, key = created["token"].split(":")
    labels = token_cr(crs, name)["metadata"]["labels"]  # type: ignore[index]
    assert labels[INDEX] == hashing.index_digest(key)
    assert key not in str(token_cr(crs, name))


def test_an_expired_token_of_a_disabled_user_is_410(
    api: Api, make_user: Callable[..., Person]
) -> None:
    person = make_user()
    short = person.api.as_token(person.api.post("/v3/token", {"ttlMillis": 2000}).body["token"])
    lasting = person.api.as_token(person.api.post("/v3/token", {}).body["token"])
    assert api.put(f"/v3/users/{person.id}", {"enabled": False}).status == 200
    assert wait_for("the user disabled", lambda: lasting.get("/v3/tokens").status == 401, 10)
    gone = wait_for("expiry", lambda: (r := short.get("/v3/tokens")).status == 410 and r, 20)
    assert gone.body["message"] == "must authenticate, expired"
    disabled = lasting.get("/v3/tokens")
    assert (disabled.status, disabled.body["message"]) == (401, "must authenticate, disabled")
