"""Errors as sentences: every failure is `{"error": {"status": n, "message": "..."}}`.

Handlers turn FastAPI's and Starlette's own errors into the same shape, so a client reads
one format whatever went wrong, and never a stack trace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import Send

LOCATIONS = {"query": "query parameter", "path": "path parameter", "header": "header"}


class ApiError(Exception):
    """An answer other than success: a status and one sentence saying what and why."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": {"status": status, "message": message}}


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(
        error_body(error.status, error.message), error.status, headers=error.headers
    )


async def send_error(send: Send, error: ApiError, *, unread_body: bool = False) -> None:
    """Answer from ASGI middleware, outside FastAPI's exception handling. `unread_body`:
    the request's body was not read (all of it), so the answer closes the connection: a
    client that sent its next request on it would have it read after a body the server
    never took, and see the connection drop."""
    response = error_response(error)
    if unread_body:
        response.headers["connection"] = "close"
    await response({"type": "http"}, _no_receive, send)


def has_body(headers: Mapping[str, str]) -> bool:
    """Whether the request sends a body (a length above 0, or chunks)."""
    length = headers.get("content-length")
    return "transfer-encoding" in headers or (length is not None and length.strip() != "0")


async def _no_receive() -> dict[str, Any]:
    return {"type": "http.disconnect"}


def unknown_agent(address: str) -> ApiError:
    """An agent of the caller's tenant that does not exist (yet)."""
    return ApiError(
        404,
        f"there is no agent {address}: an agent comes to be with its first message, which "
        "names a published kind",
    )


def needs_kind(address: str) -> ApiError:
    """A message without a kind to an agent that does not exist."""
    return ApiError(
        404,
        f"there is no agent {address} yet: its first message creates it and must name a "
        "published kind in 'kind' (GET /v1/deployment lists them)",
    )


def other_tenant(address: str, tenant: str) -> ApiError:
    """An address outside the caller's tenant: 404 whether or not such an agent exists, and
    the words say nothing of it, only which addresses this key reaches."""
    return ApiError(
        404,
        f"there is no agent {address} for this key: it is a key of tenant {tenant}, and "
        f"reaches only addresses that start with '{tenant}.'",
    )


def validation_message(errors: Sequence[Any]) -> tuple[int, str]:
    """The status and a sentence for pydantic's errors: which field, what is accepted."""
    for error in errors:
        if error.get("type") == "json_invalid":
            reason = error.get("ctx", {}).get("error", "it does not parse")
            position = error["loc"][-1] if error.get("loc") else "?"
            return 400, f"the request body is not valid JSON: {reason} at character {position}"
    return 422, "; ".join(_one_error(error) for error in errors) or "the request is invalid"


def _one_error(error: Mapping[str, Any]) -> str:
    loc = [str(part) for part in error.get("loc", ())]
    message = str(error.get("msg", "is invalid"))
    if error.get("type") == "model_attributes_type" and loc == ["body"]:
        return "the request body must be a JSON object sent as Content-Type: application/json"
    if error.get("type") == "missing" and loc == ["body"]:
        return "the request body is missing: send a JSON object"
    if loc and loc[0] == "body":
        return f"field '{'.'.join(loc[1:])}': {message}"
    if len(loc) >= 2 and loc[0] in LOCATIONS:
        return f"{LOCATIONS[loc[0]]} '{loc[1]}': {message}"
    return f"{'.'.join(loc) or 'request'}: {message}"


async def _api_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, ApiError)
    return error_response(error)


async def _invalid(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    status, message = validation_message(error.errors())
    return error_response(ApiError(status, message))


async def _http(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HTTPException)
    message = _http_message(request, error)
    return error_response(ApiError(error.status_code, message, error.headers))


def _http_message(request: Request, error: HTTPException) -> str:
    if error.status_code == 404:
        return f"no route {request.url.path}: see /openapi.json for the routes"
    if error.status_code == 405:
        return f"{request.method} is not allowed on {request.url.path}"
    return str(error.detail)


async def _unexpected(request: Request, error: Exception) -> JSONResponse:
    return error_response(ApiError(500, "the gateway failed unexpectedly; the error is in its log"))


def install(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)
