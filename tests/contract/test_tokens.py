"""`/v3/tokens` (and its singular alias `/v3/token`): a caller's own API tokens."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.core.api import names

from .client import Api, error, eventually
from .conftest import EXTERNAL_URL, Person

GROUP, VERSION = names.GROUP, names.VERSION


def stored_token(crs: k8s.CustomObjectsApi, name: str) -> dict[str, Any]:
    return dict(crs.get_cluster_custom_object(GROUP, VERSION, "tokens", name))


async def test_a_created_token_is_shown_once_stored_hashed_and_authenticates(
    user: Person, crs: k8s.CustomObjectsApi
) -> None:
    created = await user.api.post("/v3/tokens", {"description": "ci", "ttl": 3_600_000})
    assert created.status == 201, created.body
    body = created.body
    name, _, key = body["token"].partition(":")
    assert body["id"] == body["name"] == name and name.startswith("token-")
    assert body["type"] == "token" and body["baseType"] == "token"
    assert body["userId"] == user.id
    assert body["description"] == "ci" and body["ttl"] == 3_600_000
    assert body["isDerived"] is True and body["enabled"] is True and body["expired"] is False
    assert body["expiresAt"] and body["current"] is False
    assert body["links"] == {"self": f"{EXTERNAL_URL}/v3/tokens/{name}",
                             "remove": f"{EXTERNAL_URL}/v3/tokens/{name}"}  # fmt: skip

    stored = stored_token(crs, name)
    assert stored["spec"]["token"].startswith("$3:") and key not in stored["spec"]["token"]
    assert stored["metadata"]["labels"][names.LABEL_TOKEN_USER] == user.id

    fresh = user.api.as_token(body["token"])
    shown = await fresh.get(f"/v3/tokens/{name}")
    assert shown.status == 200, shown.body
    assert shown.body["current"] is True
    assert "token" not in shown.body  # never again after the create


async def test_the_singular_path_is_the_same_collection(user: Person) -> None:
    plural = await user.api.get("/v3/tokens")
    singular = await user.api.get("/v3/token")
    assert singular.status == 200
    assert {t["id"] for t in singular.body["data"]} == {t["id"] for t in plural.body["data"]}


async def test_a_user_lists_only_their_own_tokens(
    admin: Person, make_user: Callable[..., Awaitable[Person]]
) -> None:
    person = await make_user()
    mine = (await person.api.post("/v3/tokens", {"description": "mine"})).body["id"]
    listed = await person.api.get("/v3/tokens")
    assert listed.status == 200
    assert listed.body["type"] == "collection" and listed.body["resourceType"] == "token"
    assert listed.body["createTypes"] == {"token": f"{EXTERNAL_URL}/v3/tokens"}
    assert {t["userId"] for t in listed.body["data"]} == {person.id}
    assert mine in {t["id"] for t in listed.body["data"]}
    current = [t["id"] for t in listed.body["data"] if t["current"]]
    assert current == [person.api.token.split(":")[0]]
    # Not even an administrator sees another user's token.
    error(await admin.api.get(f"/v3/tokens/{mine}"), 404, "NotFound")
    admins = await admin.api.get("/v3/tokens")
    assert mine not in {t["id"] for t in admins.body["data"]}


async def test_a_listed_token_shows_what_the_request_and_its_version_say(
    make_user: Callable[..., Awaitable[Person]], crs: k8s.CustomObjectsApi
) -> None:
    """A token renders once per version of its object and is kept: which token asks, whether
    it expired by now and a change to its object are still each request's own."""
    person = await make_user()
    first = person.api.token.split(":")[0]
    value = (await person.api.post("/v3/tokens", {"description": "b", "ttl": 1500})).body["token"]
    second = value.split(":")[0]

    async def current(api: Api) -> dict[str, bool]:
        listed = await api.get("/v3/tokens")
        assert listed.status == 200, listed.body
        return {t["id"]: t["current"] for t in listed.body["data"]}

    assert await current(person.api) == {first: True, second: False}
    assert await current(person.api.as_token(value)) == {first: False, second: True}
    crs.patch_cluster_custom_object(GROUP, VERSION, "tokens", second,
                                    {"spec": {"description": "changed"}})  # fmt: skip

    async def changed() -> bool:
        shown = await person.api.get(f"/v3/tokens/{second}")
        return bool(shown.body["description"] == "changed")

    await eventually("the token's new description", changed)

    async def expired() -> bool:
        listed = await person.api.get("/v3/tokens")
        return any(t["id"] == second and t["expired"] for t in listed.body["data"])

    await eventually("the token of 1.5 s to be shown expired", expired)


async def test_tokens_filter_sort_and_page(make_user: Callable[..., Awaitable[Person]]) -> None:
    person = await make_user()
    for description in ("b", "a", "c"):
        assert (await person.api.post("/v3/tokens", {"description": description})).status == 201
    by_description = await person.api.get("/v3/tokens?sort=description&isDerived=true")
    descriptions = [t["description"] for t in by_description.body["data"]]
    assert descriptions == sorted(descriptions)
    assert by_description.body["sort"]["name"] == "description"
    page = await person.api.get("/v3/tokens?limit=2&description_ne=contract+tests")
    assert [t["description"] for t in page.body["data"]] != []
    pagination = page.body["pagination"]
    assert pagination["limit"] == 2 and pagination["total"] == 3 and pagination["partial"]
    following = pagination["next"].removeprefix(EXTERNAL_URL)
    rest = await person.api.get(following)
    seen = [t["id"] for t in page.body["data"]] + [t["id"] for t in rest.body["data"]]
    assert len(set(seen)) == 3
    assert "next" not in rest.body["pagination"]


async def test_deleting_a_token_ends_it(user: Person, crs: k8s.CustomObjectsApi) -> None:
    value = (await user.api.post("/v3/tokens", {})).body["token"]
    name = value.split(":")[0]
    # An API token may delete itself; it is not a session.
    gone = await user.api.as_token(value).delete(f"/v3/tokens/{name}")
    assert gone.status == 204
    with pytest.raises(k8s.ApiException) as raised:
        stored_token(crs, name)
    assert raised.value.status == 404
    error(await user.api.get(f"/v3/tokens/{name}"), 404, "NotFound")
    refused = await user.api.as_token(value).get("/v3/tokens")
    error(refused, 404, "NotFound")
    assert refused.body["message"] == "token not found"


@pytest.mark.parametrize("name", sorted(names.SYSTEM_TOKEN_NAMES))
async def test_a_system_token_cannot_be_deleted(admin: Person, name: str) -> None:
    error(await admin.api.delete(f"/v3/tokens/{name}"), 403, "PermissionDenied")


async def test_an_unknown_token_is_404(user: Person) -> None:
    error(await user.api.get("/v3/tokens/token-none"), 404, "NotFound")
    error(await user.api.delete("/v3/tokens/token-none"), 404, "NotFound")


@pytest.mark.parametrize("ttl", [-1, 1.5, "60", True, 10**16])
async def test_a_bad_ttl_is_422_naming_it(user: Person, ttl: object) -> None:
    error(await user.api.post("/v3/tokens", {"ttl": ttl}), 422, "InvalidFormat", "ttl")


async def test_a_token_scoped_to_an_unknown_cluster_is_refused(user: Person) -> None:
    answer = await user.api.post("/v3/tokens", {"clusterId": "c-nothere"})
    error(answer, 422, "InvalidReference", "clusterId")


async def test_logout_is_for_sessions_and_actions_are_known(user: Person) -> None:
    error(await user.api.post("/v3/tokens?action=logout"), 400, "InvalidAction")
    error(await user.api.post("/v3/tokens?action=explode"), 422, "InvalidAction")


async def test_a_method_the_family_has_not_is_405(user: Person) -> None:
    answer = await user.api.put("/v3/tokens/token-x", {})
    error(answer, 405, "MethodNotAllowed")


async def test_a_users_kept_token_list_follows_their_tokens_not_others(
    make_user: Callable[..., Awaitable[Person]], crs: k8s.CustomObjectsApi
) -> None:
    """A user's list is kept while none of their tokens moves: a token of theirs created,
    changed or deleted shows in the next list, and another user's new token does not."""
    person, other = await make_user(), await make_user()

    async def listed() -> dict[str, str]:
        answer = await person.api.get("/v3/tokens")
        assert answer.status == 200, answer.body
        return {t["id"]: t["description"] for t in answer.body["data"]}

    before = await listed()
    made = (await person.api.post("/v3/tokens", {"description": "new"})).body["id"]
    assert await listed() == {**before, made: "new"}
    theirs = (await other.api.post("/v3/tokens", {"description": "theirs"})).body["id"]
    assert theirs not in await listed()
    crs.patch_cluster_custom_object(GROUP, VERSION, "tokens", made,
                                    {"spec": {"description": "changed"}})  # fmt: skip

    async def changed() -> bool:
        return (await listed()).get(made) == "changed"

    await eventually("the list to show the token's new description", changed)
    assert (await person.api.delete(f"/v3/tokens/{made}")).status == 204
    assert await listed() == before
