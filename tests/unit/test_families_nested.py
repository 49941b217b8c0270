"""What the family descriptor adds for nested and downstream families: lookups awaited, links
where the resource lives, only the links and actions a caller's checks allow, 404s that say
where, bodies given whole; and the one shape of the role-binding families."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from aiohttp import web
from multidict import MultiDict

from corral.apiserver.auth.access import Access
from corral.apiserver.auth.authn import Principal
from corral.apiserver.auth.authz import Caller
from corral.apiserver.deps import DEPS
from corral.apiserver.http.schemas import Field, Schema
from corral.apiserver.resources import rolebindings
from corral.apiserver.resources.family import Ask, Family
from corral.apiserver.services.bindings import CLUSTER, PROJECT
from corral.core import errors
from corral.core.auth.tokens import TokenRecord
from corral.core.kube.informer import Obj
from corral.core.projects import status
from tests.unit.held import holding

BASE = "https://h"
SCHEMA = Schema(
    id="leaf",
    plural="leaves",
    fields={"color": Field("string", create=True), "size": Field("int", update=True)},
    resource_methods=("GET", "PUT", "DELETE"),
    collection_methods=("GET", "POST"),
    parent="tree",
)
LEAVES = {"l1": {"id": "l1", "color": "red"}, "l2": {"id": "l2", "color": "green"}}


def ask(query: dict[str, str] | None = None) -> Ask:
    meta = {"name": "t", "creationTimestamp": "2026-11-22T10:00:00Z", "uid": "u-1"}
    token = TokenRecord.from_object({"metadata": meta, "spec": {"userId": "u-1"}})
    who = Caller(Principal("u-1", token, False, True), Access("u-1", True, {}, {}))
    deps = holding(web.Application(), external_url=BASE)[DEPS]
    now = datetime.datetime.now(datetime.UTC)
    return Ask(deps, who, BASE, {"tree": "oak"}, MultiDict(query or {}), now)


async def listed(ask: Ask) -> list[dict[str, Any]]:
    return list(LEAVES.values())


async def find(ask: Ask, leaf: str) -> dict[str, Any] | None:
    return LEAVES.get(leaf)


def leaf_url(ask: Ask, leaf: dict[str, Any]) -> str:
    return f"{ask.base}/v3/trees/{ask.path['tree']}/leaves/{leaf['id']}"


def only_red(leaf: dict[str, Any]) -> None:
    if leaf["color"] != "red":
        raise errors.forbidden("only red leaves change")


FAMILY = Family[dict[str, Any]](
    schema=SCHEMA,
    listed=listed,
    find=find,
    fields=lambda ask, leaf: dict(leaf),
    ident=lambda leaf: str(leaf["id"]),
    url=leaf_url,
    before_update=lambda ask, leaf: only_red(leaf),
    before_delete=lambda ask, leaf: only_red(leaf),
    actions=lambda ask, leaf: ("fall",),
    before_action=lambda ask, leaf, name: only_red(leaf),
    create_url=lambda ask: f"{ask.base}/v3/trees/{ask.path['tree']}/leaves",
    within=lambda ask: f"tree {ask.path['tree']}",
)


async def test_a_nested_resource_links_and_acts_where_it_lives() -> None:
    asked = ask()
    red = FAMILY.render(asked, await FAMILY.found(asked, "l1"))
    url = f"{BASE}/v3/trees/oak/leaves/l1"
    assert red["links"] == {"self": url, "update": url, "remove": url}
    assert red["actions"] == {"fall": f"{url}?action=fall"}


async def test_a_caller_sees_links_and_actions_only_where_the_checks_let_them() -> None:
    asked = ask()
    green = FAMILY.render(asked, await FAMILY.found(asked, "l2"))
    assert green["links"] == {"self": f"{BASE}/v3/trees/oak/leaves/l2"}
    assert green["actions"] == {}


async def test_a_missing_nested_resource_is_a_404_that_says_where_it_was_looked_for() -> None:
    with pytest.raises(errors.NotFound) as refused:
        await FAMILY.found(ask(), "l9")
    assert refused.value.message == "leaf l9 not found in tree oak"


async def test_an_awaited_listing_pages_and_offers_creation_where_the_family_lives() -> None:
    page = await FAMILY.page(ask({"color": "red"}), "/v3/trees/oak/leaves")
    assert [leaf["id"] for leaf in page["data"]] == ["l1"]
    assert page["createTypes"] == {"leaf": f"{BASE}/v3/trees/oak/leaves"}


def test_a_family_that_checks_its_body_itself_is_given_it_whole() -> None:
    body = {"type": "leaf", "color": "red", "size": 3}
    assert FAMILY.given(body, creating=True) == {"color": "red"}
    whole = Family[dict[str, Any]](
        schema=SCHEMA, listed=listed, find=find, fields=lambda a, o: o, body_as_sent=True
    )
    assert whole.given(body, creating=True) == body


@pytest.mark.parametrize(("target", "stored"), [(CLUSTER, "clusterName"), (PROJECT, "projectName")])
def test_both_role_binding_families_show_the_target_under_its_id_and_stored_name(
    target: Any, stored: str
) -> None:
    schema = rolebindings.schema(target)
    assert schema.id == f"{target.noun}RoleTemplateBinding"
    assert set(schema.fields) == {
        f"{target.noun}Id", stored, "userId", "userName", "groupPrincipalId",
        "groupPrincipalName", "roleTemplateId", "roleTemplateName",
    }  # fmt: skip
    binding: Obj = {
        "metadata": {"name": "b", "namespace": "c-1"},
        "spec": {stored: "c-1:p-1", "groupPrincipalName": "oidc_group://devs",
                 "roleTemplateName": "project-member"},
    }  # fmt: skip
    shown = rolebindings.fields(target, binding)
    assert shown["id"] == "c-1:b"
    assert shown[f"{target.noun}Id"] == shown[stored] == "c-1:p-1"
    assert shown["groupPrincipalId"] == "oidc_group://devs"


def test_a_project_is_active_once_every_condition_holds_and_says_what_it_waits_for() -> None:
    waiting = {"metadata": {}, "status": {"conditions": [
        {"type": "BackingNamespaceCreated", "status": "False", "message": "creating"},
    ]}}  # fmt: skip
    assert status.state(waiting) == (
        "initializing", "yes", "BackingNamespaceCreated: creating"
    )  # fmt: skip
    assert status.state({"metadata": {"deletionTimestamp": "now"}})[0] == "removing"
    assert status.state({"metadata": {}})[2] == "waiting for the operator"
