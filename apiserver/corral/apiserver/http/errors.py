"""The one error body of the API, and how every failure becomes it.

`{"type": "error", "baseType": "error", "status": <int>, "code": ..., "message": ...}`, plus
`fieldName` when one field is at fault. `core`'s errors are mapped here and nowhere else.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from lightkube import ApiError as KubeApiError

from corral.apiserver.http.encoding import json_response
from corral.core.errors import (
    Conflict,
    CorralError,
    Forbidden,
    Invalid,
    NotFound,
    Unavailable,
    Unsupported,
)

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field_name: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field_name = field_name
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": "error", "baseType": "error",
            "status": self.status, "code": self.code, "message": self.message,
        }  # fmt: skip
        if self.field_name:
            body["fieldName"] = self.field_name
        return body


def from_kube(exc: KubeApiError) -> ApiError:
    """kube-apiserver's Status into our body: the reason becomes the code, as norman does.

    A 422 names the first field at fault (CRD schema or CEL rule) so a client can point at it.
    """
    status = exc.status
    code = status.code or 500
    field = None
    if code == 422 and status.details and status.details.causes:
        cause = status.details.causes[0]
        field = (cause.field or "").rsplit(".", 1)[-1] or None
        message = cause.message or status.message or ""
        return ApiError(422, "InvalidFormat", message, field)
    reason = status.reason or {404: "NotFound", 409: "Conflict", 403: "Forbidden"}.get(
        code, "ServerError"
    )
    return ApiError(code, reason, status.message or reason)


# Each kind of core error: its status, and its code unless the error names a more precise one.
_CORE_KINDS: dict[type[CorralError], tuple[int, str]] = {
    Invalid: (422, "InvalidFormat"),
    NotFound: (404, "NotFound"),
    Conflict: (409, "AlreadyExists"),
    Forbidden: (403, "PermissionDenied"),
    Unavailable: (503, "ClusterUnavailable"),
    Unsupported: (405, "MethodNotAllowed"),
}


def from_core(error: CorralError) -> ApiError:
    for kind, (status, code) in _CORE_KINDS.items():
        if isinstance(error, kind):
            return ApiError(status, error.code or code, error.message, error.field)
    # Only a kind of its own would get here, and its message was not written for clients.
    log.error("core error of no known kind: %r", error)
    return ApiError(500, "ServerError", "internal server error")


def response(error: ApiError, headers: dict[str, str] | None = None) -> web.Response:
    return json_response(
        error.body(), status=error.status, headers={**error.headers, **(headers or {})}
    )


_HTTP_CODES = {
    404: "NotFound", 405: "MethodNotAllowed", 413: "RequestEntityTooLarge",
    400: "BadRequest", 401: "Unauthorized", 403: "PermissionDenied", 429: "TooManyRequests",
}  # fmt: skip


def answer(request: web.Request, failure: Exception) -> web.Response:
    """The error body for what serving `request` raised; a redirect (an HTTP exception under
    400) is raised again, as aiohttp sends it. Called while `failure` is being handled, so an
    unknown one is logged with its traceback."""
    if isinstance(failure, ApiError):
        return response(failure)
    if isinstance(failure, CorralError):
        return response(from_core(failure))
    if isinstance(failure, KubeApiError):
        return response(from_kube(failure))
    if isinstance(failure, web.HTTPException):
        if failure.status < 400:
            raise failure
        code = _HTTP_CODES.get(failure.status, "ServerError")
        allow = {"Allow": failure.headers["Allow"]} if "Allow" in failure.headers else None
        return response(ApiError(failure.status, code, failure.reason), allow)
    log.exception("unhandled error serving %s %s", request.method, request.path)
    return response(ApiError(500, "ServerError", "internal server error"))
