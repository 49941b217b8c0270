"""`/v3/clusterroletemplatebindings`: who owns or is a member of a cluster. The operator turns
each into RBAC downstream; here the cluster has no downstream, and the binding's effect on
`/v3` (who sees the cluster, who may grant) is what is pinned."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.core.api import names

from .client import error
from .conftest import EXTERNAL_URL, Person

GROUP, VERSION = names.GROUP, names.VERSION
PATH = "/v3/clusterroletemplatebindings"


async def grant(admin: Person, cluster: str, user_id: str, role: str) -> dict[str, Any]:
    made = await admin.api.post(PATH, {"clusterId": cluster, "userId": user_id,
                                       "roleTemplateId": role})  # fmt: skip
    assert made.status == 201, made.body
    return dict(made.body)


async def test_a_member_sees_the_cluster_until_the_binding_goes(
    admin: Person, make_user: Callable[..., Awaitable[Person]], cluster: str,
    crs: k8s.CustomObjectsApi,
) -> None:  # fmt: skip
    person = await make_user()
    error(await person.api.get(f"/v3/clusters/{cluster}"), 404, "NotFound")
    binding = await grant(admin, cluster, person.id, "cluster-member")
    namespace, name = binding["id"].split(":")
    assert namespace == cluster and binding["name"] == name
    assert binding["type"] == "clusterRoleTemplateBinding"
    assert binding["clusterId"] == binding["clusterName"] == cluster
    assert binding["userId"] == binding["userName"] == person.id
    assert binding["roleTemplateId"] == binding["roleTemplateName"] == "cluster-member"
    assert binding["links"] == {
        "self": f"{EXTERNAL_URL}/v3/clusterRoleTemplateBindings/{binding['id']}",
        "remove": f"{EXTERNAL_URL}/v3/clusterRoleTemplateBindings/{binding['id']}",
    }
    stored = crs.get_namespaced_custom_object(
        GROUP, VERSION, cluster, "clusterroletemplatebindings", name
    )
    assert stored["spec"] == {"clusterName": cluster, "userName": person.id,
                              "roleTemplateName": "cluster-member"}  # fmt: skip

    assert (await person.api.get(f"/v3/clusters/{cluster}")).status == 200
    seen = await person.api.get(f"{PATH}?clusterId={cluster}")
    assert binding["id"] in {b["id"] for b in seen.body["data"]}
    assert (await person.api.get(f"{PATH}/{binding['id']}")).status == 200
    # A member may not grant.
    answer = await person.api.post(PATH, {"clusterId": cluster, "userId": person.id,
                                          "roleTemplateId": "cluster-owner"})  # fmt: skip
    error(answer, 403, "PermissionDenied")
    error(await person.api.delete(f"{PATH}/{binding['id']}"), 403, "PermissionDenied")

    assert (await admin.api.delete(f"{PATH}/{binding['id']}")).status == 204
    error(await person.api.get(f"/v3/clusters/{cluster}"), 404, "NotFound")
    error(await admin.api.get(f"{PATH}/{binding['id']}"), 404, "NotFound")


async def test_an_owner_grants_in_their_cluster(
    admin: Person, make_user: Callable[..., Awaitable[Person]], cluster: str
) -> None:
    owner, member = await make_user(), await make_user()
    await grant(admin, cluster, owner.id, "cluster-owner")
    made = await owner.api.post(PATH, {"clusterName": cluster, "userName": member.id,
                                       "roleTemplateName": "cluster-member"})  # fmt: skip
    assert made.status == 201, made.body
    assert (await owner.api.delete(f"{PATH}/{made.body['id']}")).status == 204


async def test_a_grant_exists_once(
    admin: Person, make_user: Callable[..., Awaitable[Person]], cluster: str
) -> None:
    person = await make_user()
    await grant(admin, cluster, person.id, "cluster-member")
    again = await admin.api.post(PATH, {"clusterId": cluster, "userId": person.id,
                                        "roleTemplateId": "cluster-member"})  # fmt: skip
    error(again, 409, "AlreadyExists")


async def test_a_group_can_be_granted(admin: Person, cluster: str) -> None:
    made = await admin.api.post(PATH, {"clusterId": cluster, "roleTemplateId": "cluster-member",
                                       "groupPrincipalId": "oidc_group://ops"})  # fmt: skip
    assert made.status == 201, made.body
    assert made.body["groupPrincipalId"] == "oidc_group://ops" and made.body["userId"] == ""
    assert (await admin.api.delete(f"{PATH}/{made.body['id']}")).status == 204


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"roleTemplateId": "cluster-member"}, "InvalidBodyContent", "groupPrincipalId"),
        ({"userId": "USER", "groupPrincipalId": "oidc_group://a",
          "roleTemplateId": "cluster-member"}, "InvalidBodyContent", "userId"),
        ({"groupPrincipalId": "ldap://a", "roleTemplateId": "cluster-member"}, "InvalidFormat",
         "groupPrincipalId"),
        ({"userId": "u-none", "roleTemplateId": "cluster-member"}, "InvalidReference", "userId"),
        ({"userId": "USER", "roleTemplateId": "project-owner"}, "InvalidOption",
         "roleTemplateId"),
    ],
)  # fmt: skip
async def test_a_bad_grant_is_422_naming_the_field(
    admin: Person, user: Person, cluster: str, body: dict[str, Any], code: str, field: str
) -> None:
    filled = {k: (user.id if v == "USER" else v) for k, v in body.items()}
    error(await admin.api.post(PATH, {"clusterId": cluster, **filled}), 422, code, field)


async def test_a_cluster_the_caller_cannot_see_is_no_reference(user: Person, cluster: str) -> None:
    answer = await user.api.post(PATH, {"clusterId": cluster, "userId": user.id,
                                        "roleTemplateId": "cluster-owner"})  # fmt: skip
    error(answer, 422, "InvalidReference", "clusterId")


async def test_unknown_and_malformed_ids_are_404(admin: Person, cluster: str) -> None:
    for binding in (f"{cluster}:crtb-none", "no-colon"):
        error(await admin.api.get(f"{PATH}/{binding}"), 404, "NotFound")
        error(await admin.api.delete(f"{PATH}/{binding}"), 404, "NotFound")
