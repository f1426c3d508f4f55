"""Error bodies in each endpoint's own format (WIRE-NOTES "Errors").

A handler raises `Fail`; the app turns it into the body the caller's SDK expects: the chat
format for the OpenAI-style paths, the native shapes for messages and generate-content, and
the job-style shapes for imgjob and musicjob. The format follows from the path alone, so even
a 401, 404 or 413 raised before any handler runs comes back in the right shape.
"""

from __future__ import annotations

import json
import reprlib

from starlette.responses import Response

__all__ = ["Fail", "format_for", "error_response", "is_generate_content", "shown"]

_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
}
_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
}


class Fail(Exception):
    """A request the gateway refuses: HTTP status plus a one-line message for the caller."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers


_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother = 2, 60, 60
_SHOWN.maxlist = _SHOWN.maxdict = _SHOWN.maxtuple = 4


def shown(value: object) -> str:
    """A client's value quoted in an error message: its repr, cut short in length and depth,
    so that a huge or deeply nested value gives a short message and never a RecursionError."""
    return _SHOWN.repr(value)


def is_generate_content(path: str) -> bool:
    """``/v1beta/models/<m>:<method>``, and the same under ``/v1`` (the Google SDK's default
    api version) or the unversioned base."""
    if path.startswith("/v1beta/"):
        return True
    return path.startswith(("/models/", "/v1/models/")) and ":" in path


def format_for(path: str) -> str:
    """Which error format a path answers in: openai, messages, google, imgjob or musicjob."""
    if path.startswith("/v1/messages") or path.startswith("/messages"):
        return "messages"
    if is_generate_content(path):
        return "google"
    if path.startswith("/imgjob/"):
        return "imgjob"
    if path.startswith("/musicjob/"):
        return "musicjob"
    return "openai"


def _body(fmt: str, status: int, message: str, param: str | None, code: str | None) -> dict:
    if fmt == "messages":
        kind = _ANTHROPIC_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    if fmt == "google":
        return {
            "error": {"code": status, "message": message, "status": _GOOGLE_STATUS.get(status, "INTERNAL")}
        }
    if fmt == "imgjob":
        return {"code": status, "description": message, "result": None, "properties": {}}
    if fmt == "musicjob":
        return {"code": "error", "message": message, "data": None}
    kind = _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(
    path: str,
    status: int,
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    body = _body(format_for(path), status, message, param, code)
    return Response(
        json.dumps(body, ensure_ascii=False),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )
