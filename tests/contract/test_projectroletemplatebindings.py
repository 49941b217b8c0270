"""`/v3/projectroletemplatebindings`: who has which role in a project. A binding lives in the
project's backing namespace; its effect on `/v3` (who sees the project, who may change it)
is what is pinned here, the RBAC downstream being the operator's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from corral.core.api import names

from .client import error
from .conftest import EXTERNAL_URL, Person

GROUP, VERSION = names.GROUP, names.VERSION
PATH = "/v3/projectroletemplatebindings"


@pytest.fixture
async def project(admin: Person, cluster: str) -> str:
    made = await admin.api.post("/v3/projects", {"name": "bound", "clusterId": cluster})
    assert made.status == 201, made.body
    return str(made.body["id"])


async def grant(by: Person, project: str, user_id: str, role: str) -> dict[str, Any]:
    made = await by.api.post(PATH, {"projectId": project, "userId": user_id,
                                    "roleTemplateId": role})  # fmt: skip
    assert made.status == 201, made.body
    return dict(made.body)


async def test_a_member_sees_the_project_until_the_binding_goes(
    admin: Person, make_user: Callable[..., Awaitable[Person]], project: str,
    crs: k8s.CustomObjectsApi,
) -> None:  # fmt: skip
    person = await make_user()
    error(await person.api.get(f"/v3/projects/{project}"), 404, "NotFound")
    binding = await grant(admin, project, person.id, "project-member")
    cluster, name = project.split(":")
    namespace, binding_name = binding["id"].split(":")
    assert namespace == names.backing_namespace(cluster, name)
    assert binding["type"] == "projectRoleTemplateBinding"
    assert binding["projectId"] == binding["projectName"] == project
    assert binding["userId"] == binding["userName"] == person.id
    assert binding["roleTemplateId"] == binding["roleTemplateName"] == "project-member"
    assert binding["links"]["remove"] == (
        f"{EXTERNAL_URL}/v3/projectRoleTemplateBindings/{binding['id']}"
    )
    stored = crs.get_namespaced_custom_object(
        GROUP, VERSION, namespace, "projectroletemplatebindings", binding_name
    )
    assert stored["spec"] == {"projectName": project, "userName": person.id,
                              "roleTemplateName": "project-member"}  # fmt: skip

    assert (await person.api.get(f"/v3/projects/{project}")).status == 200
    listed = await person.api.get(f"{PATH}?projectId={project}")
    roles = {(b["userId"], b["roleTemplateId"]) for b in listed.body["data"]}
    assert roles == {(admin.id, "project-owner"), (person.id, "project-member")}
    # A member sees the project but may not change it, nor grant in it.
    error(await person.api.put(f"/v3/projects/{project}", {"name": "x"}), 403, "PermissionDenied")
    answer = await person.api.post(PATH, {"projectId": project, "userId": person.id,
                                          "roleTemplateId": "project-owner"})  # fmt: skip
    error(answer, 403, "PermissionDenied")

    assert (await admin.api.delete(f"{PATH}/{binding['id']}")).status == 204
    error(await person.api.get(f"/v3/projects/{project}"), 404, "NotFound")
    error(await admin.api.get(f"{PATH}/{binding['id']}"), 404, "NotFound")


async def test_a_project_owner_grants_and_revokes(
    admin: Person, make_user: Callable[..., Awaitable[Person]], project: str
) -> None:
    owner, reader = await make_user(), await make_user()
    await grant(admin, project, owner.id, "project-owner")
    made = await grant(owner, project, reader.id, "read-only")
    assert (await reader.api.get(f"/v3/projects/{project}")).status == 200
    assert (await owner.api.put(f"/v3/projects/{project}", {"name": "owned"})).status == 200
    assert (await owner.api.delete(f"{PATH}/{made['id']}")).status == 204


async def test_a_grant_exists_once(
    admin: Person, make_user: Callable[..., Awaitable[Person]], project: str
) -> None:
    person = await make_user()
    await grant(admin, project, person.id, "read-only")
    again = await admin.api.post(PATH, {"projectId": project, "userId": person.id,
                                        "roleTemplateId": "read-only"})  # fmt: skip
    error(again, 409, "AlreadyExists")


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"roleTemplateId": "read-only"}, "InvalidBodyContent", "groupPrincipalId"),
        ({"userId": "u-none", "roleTemplateId": "read-only"}, "InvalidReference", "userId"),
        ({"userId": "USER", "roleTemplateId": "cluster-owner"}, "InvalidOption",
         "roleTemplateId"),
    ],
)  # fmt: skip
async def test_a_bad_grant_is_422_naming_the_field(
    admin: Person, user: Person, project: str, body: dict[str, Any], code: str, field: str
) -> None:
    filled = {k: (user.id if v == "USER" else v) for k, v in body.items()}
    error(await admin.api.post(PATH, {"projectId": project, **filled}), 422, code, field)


async def test_a_project_the_caller_cannot_see_is_no_reference(user: Person, project: str) -> None:
    answer = await user.api.post(PATH, {"projectId": project, "userId": user.id,
                                        "roleTemplateId": "project-owner"})  # fmt: skip
    error(answer, 422, "InvalidReference", "projectId")
    error(await user.api.post(PATH, {"projectId": "nothing", "userId": user.id,
                                     "roleTemplateId": "read-only"}), 422, "InvalidReference",
          "projectId")  # fmt: skip


async def test_an_unknown_binding_is_404(admin: Person, project: str) -> None:
    cluster, name = project.split(":")
    unknown = f"{names.backing_namespace(cluster, name)}:prtb-none"
    error(await admin.api.get(f"{PATH}/{unknown}"), 404, "NotFound")
    error(await admin.api.delete(f"{PATH}/{unknown}"), 404, "NotFound")
