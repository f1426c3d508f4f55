"""What a gateway's error answers become: one `APIError` line with the status and its message.

Any key a gateway echoes is masked before it reaches a message, a body or a log line.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import httpx

from .errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    RateLimitError,
    error_message,
    status_error,
)
from .results import request_id_of
from .retry import retry_after
from .secret import Secret, redact

if TYPE_CHECKING:
    from .exchange import Call

__all__ = ["api_error", "body_error", "connection_error", "json_body"]


def connection_error(exc: httpx.HTTPError | httpx.InvalidURL, call: Call) -> APIConnectionError:
    """A transport failure (or an address httpx cannot use, such as a gateway's media URL)."""
    cls = APITimeoutError if isinstance(exc, httpx.TimeoutException) else APIConnectionError
    message = redact(" ".join(f"{type(exc).__name__}: {exc}".split()))
    return cls(message, method=call.method, path=call.path)


def json_body(content: bytes) -> Any:
    """The JSON of a body, or its text when it is not JSON."""
    try:
        return json.loads(content)
    except ValueError:
        return content.decode("utf-8", "replace")


def api_error(response: httpx.Response, key: Secret | None, call: Call, body: Any = None) -> APIError:
    """An error from a response, with the gateway's message and any key in it masked."""
    text = redact(response.content.decode("utf-8", "replace"), key)
    if body is None:
        body = json_body(text.encode())
    else:  # the body came from the caller: scrub it the same way
        body = json_body(redact(json.dumps(body), key).encode())
    found = error_message(body)
    message, code, kind = (
        found if found else (text.strip()[:300] or response.reason_phrase or "no message", None, None)
    )
    status = response.status_code
    if status < 400 and code is not None and code.isdigit() and 400 <= int(code) < 600:
        status = int(code)  # a 200 carrying an error: its code is the better status
    cls = status_error(status)
    error = cls(
        " ".join(message.split()),
        status=status,
        method=call.method,
        path=call.path,
        code=code,
        type=kind,
        request_id=request_id_of(response.headers),
        body=body,
        hint=_hint(status, f"{message} {kind or ''}"),
    )
    if isinstance(error, RateLimitError):
        error.retry_after = retry_after(response.headers)
    return error


def body_error(response: httpx.Response, body: Any, key: Secret | None, call: Call) -> APIError | None:
    """The error a 200 body carries (``{"error": {...}}`` and kin), or None."""
    if isinstance(body, dict) and body.get("error") and error_message(body) and not body.get("choices"):
        return api_error(response, key, call, body)
    return None


# A 400 that is about the key: LiteLLM's proxy answers a key it does not know with 400
# "No connected db." (type no_db_connection) when it keeps no key database.
_AUTH_SHAPED = re.compile(
    r"api[ _-]?key|invalid key|(un)?authori[sz]|authenticat|credential|no_db_connection", re.I
)


def _hint(status: int, text: str) -> str | None:
    if status == 401 or (status == 400 and _AUTH_SHAPED.search(text)):
        return "Check the API key (GATECELL_API_KEY or OPENAI_API_KEY)"
    return None
