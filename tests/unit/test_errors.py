from __future__ import annotations

import json
from decimal import Decimal

import httpx2
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from lightkube import ApiError as KubeApiError

from corral.apiserver.http.errors import Handler, answer, from_core, from_kube
from corral.core import settings
from corral.core.auth import passwords, ttl
from corral.core.clusters import importing, taints
from corral.core.errors import Conflict, CorralError, Forbidden, Invalid, NotFound, Unavailable
from corral.core.kube import usernames
from corral.core.projects import quota


def kube_error(status: dict) -> KubeApiError:
    request = httpx2.Request("POST", "https://kube/apis/x")
    response = httpx2.Response(
        status["code"], request=request, content=json.dumps(status).encode(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    return KubeApiError(request=request, response=response)


def status(code: int, reason: str, message: str, **extra: object) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "reason": reason, "message": message, **extra}  # fmt: skip


@pytest.mark.parametrize(
    ("code", "reason"), [(409, "AlreadyExists"), (409, "Conflict"), (404, "NotFound"),
                         (403, "Forbidden")],
)  # fmt: skip
def test_status_and_reason_carry_over(code: int, reason: str) -> None:
    error = from_kube(kube_error(status(code, reason, f"tokens x {reason}")))
    assert error.body() == {"type": "error", "baseType": "error", "status": code,
                            "code": reason, "message": f"tokens x {reason}"}  # fmt: skip


def test_invalid_names_the_field_at_fault() -> None:
    details = {"causes": [{"reason": "FieldValueInvalid", "field": "spec.userId",
                           "message": "userId is immutable"}]}  # fmt: skip
    error = from_kube(kube_error(status(422, "Invalid", "Token is invalid", details=details)))
    assert (error.status, error.code, error.field_name) == (422, "InvalidFormat", "userId")
    assert error.message == "userId is immutable"


# -- core errors: each kind to its /v3 body, as the routes answered before they were mapped here --


def body(status: int, code: str, message: str, field: str | None = None) -> dict:
    rendered = {"type": "error", "baseType": "error", "status": status, "code": code,
                "message": message}  # fmt: skip
    return {**rendered, "fieldName": field} if field else rendered


def excess() -> quota.Excess:
    return quota.Excess("pods", Decimal(3), Decimal(2), "3 namespace(s) x 1")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (Invalid("bad"), body(422, "InvalidFormat", "bad")),
        (Invalid("bad", "name"), body(422, "InvalidFormat", "bad", "name")),
        (Invalid("bad", "name", "MissingRequired"), body(422, "MissingRequired", "bad", "name")),
        (NotFound("project c-x:p-y not found"), body(404, "NotFound", "project c-x:p-y not found")),
        (Conflict("taken"), body(409, "AlreadyExists", "taken")),
        (Conflict("moved on", code="Conflict"), body(409, "Conflict", "moved on")),
        (Forbidden("only owners"), body(403, "PermissionDenied", "only owners")),
        (Unavailable("cluster c-x did not answer"),
         body(503, "ClusterUnavailable", "cluster c-x did not answer")),
    ],
)  # fmt: skip
def test_each_kind_of_core_error_has_its_status_and_code(
    error: CorralError, expected: dict
) -> None:
    assert from_core(error).body() == expected


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (importing.ImportFailed("kubeConfig is not YAML"),
         body(422, "InvalidFormat", "kubeConfig is not YAML", "importedConfig.kubeConfig")),
        (importing.ImportFailed("cannot reach it", "ClusterUnavailable"),
         body(422, "ClusterUnavailable", "cannot reach it", "importedConfig.kubeConfig")),
        (quota.QuotaError("pods cannot be negative", "resourceQuota.limit.pods"),
         body(422, "InvalidFormat", "pods cannot be negative", "resourceQuota.limit.pods")),
        (quota.QuotaExceeded("c-x:p-y", [excess()]),
         body(422, "QuotaExceeded",
              "project c-x:p-y quota: pods: 3 namespace(s) x 1 = 3 exceeds the limit 2", "pods")),
        (usernames.UsernameTaken(),
         body(409, "AlreadyExists", "Username is already in use.", "username")),
        (passwords.PasswordPolicyError("password must be at least 12 characters"),
         body(422, "InvalidBodyContent", "password must be at least 12 characters", "password")),
        (ttl.TtlError("ttl must be a whole number of milliseconds"),
         body(422, "InvalidFormat", "ttl must be a whole number of milliseconds", "ttl")),
        (settings.SettingValueError("setting x must be a whole number from 0 to 5"),
         body(422, "InvalidFormat", "setting x must be a whole number from 0 to 5", "value")),
        (taints.InvalidTaint("desiredNodeTaints must be a list of taints", "desiredNodeTaints"),
         body(422, "InvalidFormat", "desiredNodeTaints must be a list of taints",
              "desiredNodeTaints")),
    ],
)  # fmt: skip
def test_core_modules_errors_keep_their_bodies(error: CorralError, expected: dict) -> None:
    assert from_core(error).body() == expected


def test_validation_in_core_names_the_field_at_fault() -> None:
    with pytest.raises(Invalid) as caught:
        taints.parse([{"key": "k", "effect": "Sometimes"}])
    assert caught.value.field == "desiredNodeTaints"
    with pytest.raises(Invalid) as caught:
        ttl.requested("soon")
    assert caught.value.field == "ttl"
    with pytest.raises(Invalid) as caught:
        settings.as_number("api-rate-limit-per-minute", "1.5")
    assert caught.value.field == "value"


async def answered(request: web.Request, handler: Handler) -> web.StreamResponse:
    """What the API's middleware answers for what `handler` raised."""
    try:
        await handler(request)
    except Exception as failure:  # noqa: BLE001 - the failure is the point
        return answer(request, failure)
    raise AssertionError("the handler did not fail")


async def test_the_api_renders_a_core_error() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        raise Conflict("user u-x already has project-owner in c-x:p-y")

    response = await answered(make_mocked_request("POST", "/v3/x"), handler)
    assert isinstance(response, web.Response) and response.body is not None
    assert response.status == 409
    assert json.loads(response.body) == body(
        409, "AlreadyExists", "user u-x already has project-owner in c-x:p-y"
    )


async def test_a_core_error_of_no_known_kind_tells_the_client_nothing() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        raise CorralError("secret detail")

    response = await answered(make_mocked_request("GET", "/v3/x"), handler)
    assert isinstance(response, web.Response) and response.body is not None
    assert json.loads(response.body) == body(500, "ServerError", "internal server error")
