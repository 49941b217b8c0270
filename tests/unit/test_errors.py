from __future__ import annotations

import json

import httpx2
import pytest
from lightkube import ApiError as KubeApiError

from corral.apiserver.errors import from_kube


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
