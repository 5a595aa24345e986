"""The one error the client raises: the API's sentence and its status."""

from __future__ import annotations

import httpx
import msgspec


class ApiError(Exception):
    """The gateway refused a request, or could not be reached.

    `status` is the HTTP status the gateway answered (401, 404, 422, ...), or 0 when no
    answer came at all; `message` is the gateway's own sentence, or one saying why the
    gateway could not be reached. `str(error)` is the sentence.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def __repr__(self) -> str:
        return f"ApiError({self.status}, {self.message!r})"

    @property
    def retryable(self) -> bool:
        """No answer, or 503: the same request may succeed later."""
        return self.status in (0, 503)


class _Detail(msgspec.Struct):
    status: int
    message: str


class _ErrorBody(msgspec.Struct):
    error: _Detail


def from_response(status: int, body: bytes) -> ApiError:
    """The gateway's `{"error": {"status", "message"}}`, or a sentence for anything else."""
    try:
        return ApiError(status, msgspec.json.decode(body, type=_ErrorBody).error.message)
    except msgspec.DecodeError:
        text = body.decode(errors="replace").strip()[:200]
        return ApiError(status, f"the gateway answered {status}" + (f": {text}" if text else ""))


def unreachable(url: str, error: httpx.TransportError) -> ApiError:
    reason = str(error) or error.__class__.__name__
    return ApiError(0, f"the gateway at {url} does not answer ({reason})")
