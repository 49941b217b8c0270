"""`GET /v3`, `/v3/schemas` and who gets in: what a schema-driven client reads first."""

from __future__ import annotations

import pytest

from .client import Api, error
from .conftest import EXTERNAL_URL, Person

# Each family the contract tier covers: its schema id, plural, and methods.
FAMILIES = {
    "token": ("tokens", ["GET", "DELETE"], ["GET", "POST"]),
    "user": ("users", ["GET", "PUT", "DELETE"], ["GET", "POST"]),
    "globalRoleBinding": ("globalRoleBindings", ["GET", "DELETE"], ["GET", "POST"]),
    "setting": ("settings", ["GET", "PUT"], ["GET"]),
    "cloudCredential": ("cloudCredentials", ["GET", "PUT", "DELETE"], ["GET", "POST"]),
    "nodeDriver": ("nodeDrivers", ["GET", "PUT", "DELETE"], ["GET", "POST"]),
    "nodeTemplate": ("nodeTemplates", ["GET", "PUT", "DELETE"], ["GET", "POST"]),
    "project": ("projects", ["GET", "PUT", "DELETE"], ["GET", "POST"]),
    "clusterRoleTemplateBinding": ("clusterRoleTemplateBindings", ["GET", "DELETE"],
                                   ["GET", "POST"]),
    "projectRoleTemplateBinding": ("projectRoleTemplateBindings", ["GET", "DELETE"],
                                   ["GET", "POST"]),
}  # fmt: skip


async def test_the_root_links_every_collection_at_the_external_url(user: Person) -> None:
    root = await user.api.get("/v3", headers={"Host": "elsewhere.example"})
    assert root.status == 200, root.body
    assert root.body["type"] == "apiRoot"
    assert root.body["apiVersion"] == {"group": "management.svc.io", "path": "/v3",
                                       "version": "v3"}  # fmt: skip
    assert root.headers["X-Api-Schemas"] == f"{EXTERNAL_URL}/v3/schemas"
    links = root.body["links"]
    assert links["schemas"] == f"{EXTERNAL_URL}/v3/schemas"
    for plural, _, _ in FAMILIES.values():
        assert links[plural] == f"{EXTERNAL_URL}/v3/{plural.lower()}"


async def test_the_schema_collection_describes_every_family(user: Person) -> None:
    listed = await user.api.get("/v3/schemas")
    assert listed.status == 200, listed.body
    assert listed.body["type"] == "collection"
    assert listed.body["resourceType"] == "schema"
    assert listed.body["createTypes"] == {}
    by_id = {doc["id"]: doc for doc in listed.body["data"]}
    for schema_id, (plural, resource_methods, collection_methods) in FAMILIES.items():
        doc = by_id[schema_id]
        assert doc["type"] == "schema"
        assert doc["pluralName"] == plural
        assert doc["resourceMethods"] == resource_methods, schema_id
        assert doc["collectionMethods"] == collection_methods, schema_id
        assert doc["links"] == {"self": f"{EXTERNAL_URL}/v3/schemas/{schema_id}",
                                "collection": f"{EXTERNAL_URL}/v3/{plural.lower()}"}  # fmt: skip
        for common in ("id", "type", "created", "uuid"):
            assert common in doc["resourceFields"], (schema_id, common)
    assert listed.body["pagination"]["total"] == len(listed.body["data"])


async def test_a_schema_names_its_fields_actions_and_filters(user: Person) -> None:
    doc = (await user.api.get("/v3/schemas/user")).body
    username = doc["resourceFields"]["username"]
    assert username == {"type": "string", "create": True, "update": False, "nullable": False,
                        "required": True}  # fmt: skip
    assert doc["resourceFields"]["password"]["writeOnly"] is True
    assert doc["resourceActions"] == {"setpassword": {"input": "setPasswordInput"}}
    assert doc["collectionActions"] == {"changepassword": {"input": "changePasswordInput"}}
    # A write-only field is no filter: a filter would tell its value.
    assert "password" not in doc["collectionFilters"]
    assert doc["collectionFilters"]["username"] == {"modifiers": ["eq", "ne", "in", "notin"]}
    embedded = (await user.api.get("/v3/schemas/setPasswordInput")).body
    assert embedded["resourceMethods"] == [] and "collectionFilters" not in embedded


async def test_a_schema_is_found_by_id_or_plural_in_any_case(user: Person) -> None:
    for name in ("globalRoleBinding", "globalrolebindings", "GLOBALROLEBINDING"):
        found = await user.api.get(f"/v3/schemas/{name}")
        assert found.status == 200, name
        assert found.body["id"] == "globalRoleBinding"


async def test_every_action_input_and_output_a_schema_names_is_served(user: Person) -> None:
    """Discovered from the schemas themselves: an action a new family declares is covered."""
    named = {
        (doc["id"], action, role, spec[role])
        for doc in (await user.api.get("/v3/schemas")).body["data"]
        for actions in (doc.get("resourceActions", {}), doc.get("collectionActions", {}))
        for action, spec in actions.items()
        for role in ("input", "output")
        if role in spec
    }
    assert ("cluster", "rotateCertificates", "input", "rotateCertificatesInput") in named
    for schema_id, action, role, type_name in sorted(named):
        served = await user.api.get(f"/v3/schemas/{type_name}")
        assert served.status == 200, (schema_id, action, role, type_name)
        assert served.body["id"] == type_name and served.body["type"] == "schema", served.body
        assert served.body["resourceFields"], (schema_id, action, role, type_name)


async def test_the_rotation_input_is_what_the_action_reads(user: Person) -> None:
    doc = (await user.api.get("/v3/schemas/rotateCertificatesInput")).body
    assert set(doc["resourceFields"]) == {"caCertificates", "services"}
    assert doc["resourceFields"]["services"]["options"] == [
        "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet",
        "kube-proxy",
    ]  # fmt: skip
    output = (await user.api.get("/v3/schemas/rotateCertificateOutput")).body
    assert set(output["resourceFields"]) == {"message"}


async def test_an_unknown_schema_is_404(user: Person) -> None:
    error(await user.api.get("/v3/schemas/nothing"), 404, "NotFound")


async def test_schemas_filter_and_sort_like_any_collection(user: Person) -> None:
    only = await user.api.get("/v3/schemas?pluralName=projects")
    assert [doc["id"] for doc in only.body["data"]] == ["project"]
    assert only.body["filters"]["pluralName"] == [{"modifier": "eq", "value": "projects"}]
    ids = [doc["id"] for doc in (await user.api.get("/v3/schemas?order=desc")).body["data"]]
    assert ids == sorted(ids, reverse=True)


@pytest.mark.parametrize(
    ("authorization", "status", "code", "message"),
    [
        (None, 401, "Unauthorized", "must authenticate"),
        ("Bearer no-colon", 422, "InvalidToken", "invalid auth token value"),
        ("Bearer token-nothere:somekey", 404, "NotFound", "token not found"),
    ],
)
async def test_a_request_without_a_good_token_gets_the_spec_outcome(
    anonymous: Api, authorization: str | None, status: int, code: str, message: str
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    answer = await anonymous.get("/v3/schemas", headers=headers)
    error(answer, status, code)
    assert answer.body["message"] == message


async def test_a_wrong_key_of_a_real_token_is_invalid(admin: Person, anonymous: Api) -> None:
    name = admin.api.token.split(":")[0]
    answer = await anonymous.get("/v3/schemas", headers={"Authorization": f"Bearer {name}:x"})
    error(answer, 422, "InvalidToken")


async def test_health_and_readiness_need_no_token(anonymous: Api) -> None:
    assert (await anonymous.get("/healthz")).body == {"status": "ok"}
    assert (await anonymous.get("/readyz")).body == {"status": "ok"}
