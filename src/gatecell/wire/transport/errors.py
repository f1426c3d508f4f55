"""One exception hierarchy for everything that can go wrong talking to a gateway, and
what a gateway's error answers become.

Every error prints as one readable line: what failed, the status, and the gateway's own
message. The structured parts stay on attributes for code that wants them. Whatever a
gateway sent (message, code, type, request id) is redacted on its way in
(`gatecell.wire.util.secret.redact`: the process's keys in any shape, other services' keys,
credentials), and so is every error's ``str`` and ``repr``, whoever wrote its text.
"""

from __future__ import annotations

import json
import re
import reprlib
from http import HTTPStatus
from typing import Any

from gatecell.wire.transport.http import BodyTooLarge, Response, TransportError, request_id_of, retry_after
from gatecell.wire.util.secret import Secret, redact

__all__ = [
    "GatecellError",
    "ConfigError",
    "InvalidRequest",
    "APIError",
    "BadRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "ConflictError",
    "RequestTooLargeError",
    "ResponseTooLargeError",
    "RateLimitError",
    "ServerError",
    "APIConnectionError",
    "APITimeoutError",
    "StreamError",
    "StreamTimeoutError",
    "StreamTooLargeError",
    "JobError",
    "error_message",
    "status_error",
    "api_error",
    "body_error",
    "connection_error",
    "json_body",
    "too_large",
    "echo",
    "cut",
    "first_line",
    "ECHO_LIMIT",
    "refuses_content",
    "TEXT_ONLY",
]


class GatecellError(Exception):
    """Base class of every gatecell error."""

    def __str__(self) -> str:
        return redact(super().__str__())

    def __repr__(self) -> str:
        return redact(super().__repr__())


class ConfigError(GatecellError, ValueError):
    """A setting is missing or malformed (no gateway address, a variable that is not a
    number...). A ValueError too, as a malformed setting is a bad value."""


class InvalidRequest(GatecellError, ValueError):
    """A request broke a rule of SPEC 2/8; raised before anything is sent."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


class APIError(GatecellError):
    """The gateway answered with an error (an error status, or a 200 carrying an error)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        method: str | None = None,
        path: str | None = None,
        code: str | None = None,
        type: str | None = None,
        request_id: str | None = None,
        body: Any = None,
        hint: str | None = None,
    ) -> None:
        self.message = redact(message)
        self.status = status
        self.method = method
        self.path = path
        self.code = redact(code) if code else code
        self.type = redact(type) if type else type
        self.request_id = redact(request_id) if request_id else request_id
        self.body = body
        self.hint = hint
        super().__init__(self._line())

    label = "error"  # what the line starts with when there is no status

    def _line(self) -> str:
        head = f"{self.status}" if self.status else self.label
        if self.path:
            head += f" from {self.method or 'POST'} {self.path}"
        line = f"{head}: {self.message}"
        if self.request_id:
            line += f" (request id {self.request_id})"
        if self.hint:
            line += f"{'' if line.endswith('.') else '.'} {self.hint}"
        return line


class BadRequestError(APIError):
    """400."""


class AuthenticationError(APIError):
    """401: the key is missing or wrong."""


class PermissionDeniedError(APIError):
    """403: the key may not use this model or route."""


class NotFoundError(APIError):
    """404: unknown route or model."""


class ConflictError(APIError):
    """409."""


class RequestTooLargeError(APIError):
    """413."""


class RateLimitError(APIError):
    """429. ``retry_after`` holds the wait the gateway asked for, in seconds, if any."""

    retry_after: float | None = None


class ServerError(APIError):
    """5xx: trouble at or behind the gateway."""


class APIConnectionError(APIError):
    """The gateway could not be reached, or the connection broke."""

    label = "connection error"


class APITimeoutError(APIConnectionError):
    """Connect, request or stream-idle timeout."""

    label = "timeout"


class ResponseTooLargeError(APIError):
    """A response body passed the client's cap (``max_response_bytes``); reading stopped there.

    Raised while the body streams in, never after reading it whole: a hostile gateway cannot
    make the client hold more than the cap.
    """

    label = "response too large"


def too_large(cap: int, what: str = "the body") -> str:
    """The message of a `ResponseTooLargeError`: the cap, and the setting that moves it."""
    size = next(
        f"{cap / unit:g} {name}"
        for unit, name in ((2**20, "MiB"), (2**10, "KiB"), (1, "bytes"))
        if cap >= unit or unit == 1
    )
    return f"{what} passed {size}; raise max_response_bytes= or GATECELL_MAX_RESPONSE_BYTES to accept more"


ECHO_LIMIT = 80
"""Characters at most of a value an error line quotes."""


def first_line(exc: BaseException) -> str:
    """An exception's message, its first line only (its class's name when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def echo(value: object, limit: int = ECHO_LIMIT) -> str:
    """``value`` as an error line quotes it: a class by its name, anything else by its repr,
    redacted (whole, before the cut: a key cut in two would no longer be found), then cut at
    ``limit`` characters with ``… (N characters)`` (N: the whole repr's length), so that a
    20 KB prompt passed where a number goes still makes one line."""
    if isinstance(value, type):
        return value.__qualname__
    try:
        text = repr(value)
    except RecursionError:  # nested deeper than repr goes: reprlib stops at a depth
        text = reprlib.repr(value)
    return cut(text, limit)


def cut(text: str, limit: int = ECHO_LIMIT) -> str:
    """``text`` as `echo` cuts a quoted value, without quoting it: for words a server chose
    that a line shows as they are (a proxy's reason phrase). Redacted whole before the cut:
    a key cut in two would no longer be found."""
    text = redact(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


class StreamError(APIError):
    """A stream ended badly: an error event inside it, a cut connection, an idle timeout.

    ``partial_text`` holds every fragment that arrived before it ended, so nothing is lost.
    """

    label = "stream error"

    def __init__(self, message: str, *, partial_text: str = "", **kw: Any) -> None:
        self.partial_text = partial_text
        super().__init__(message, **kw)


class StreamTimeoutError(StreamError, APITimeoutError):
    """A stream sent no event within the idle timeout (keep-alive comments do not count)."""

    label = "stream timeout"


class StreamTooLargeError(StreamError, ResponseTooLargeError):
    """A stream, or one event of it, passed the client's cap; ``partial_text`` keeps what came."""

    label = "stream too large"


class JobError(GatecellError):
    """A job-style task failed, or did not finish within the wait allowed."""

    def __init__(self, message: str, *, job: Any = None) -> None:
        self.job = job
        super().__init__(message)


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: RequestTooLargeError,
    429: RateLimitError,
}


def status_error(status: int | None) -> type[APIError]:
    """The exception class for an HTTP status."""
    if status is None:
        return APIError
    if status >= 500:
        return ServerError
    return _BY_STATUS.get(status, APIError)


def error_message(body: Any) -> tuple[str, str | None, str | None] | None:
    """Recognise the error body shapes of WIRE-NOTES; return (message, code, type) or None.

    Shapes: chat format ``{"error": {"message", "type", "code"}}``, native messages
    ``{"type": "error", "error": {"type", "message"}}``, generate-content
    ``{"error": {"code", "message", "status"}}``, a bare ``{"error": "text"}``, the
    job-style ``{"code": 24, "description"}`` / ``{"code": "error", "message"}``, and
    FastAPI's ``{"detail": "text"}``, ``{"detail": {...}}`` and validation
    ``{"detail": [{"loc", "msg"}]}`` (LiteLLM's proxy answers with those).
    """
    if not isinstance(body, dict):
        return None
    if "detail" in body and "error" not in body:
        return _detail(body["detail"])
    err = body.get("error")
    if isinstance(err, str):
        return err, None, None
    if isinstance(err, dict):
        message = err.get("message") or err.get("msg") or str(err)
        code = err.get("code")
        kind = err.get("type") or err.get("status")
        return str(message), None if code is None else str(code), None if kind is None else str(kind)
    code = body.get("code")
    text = body.get("description") or body.get("message")
    if code not in (None, 1, 21, 22, "success") and isinstance(text, str) and text:
        return text, str(code), None
    return None


def _detail(detail: Any) -> tuple[str, str | None, str | None] | None:
    """FastAPI's ``detail``: a string, an object (itself often an error body), or a list of
    validation problems, joined into one line."""
    if isinstance(detail, str) and detail.strip():
        return detail, None, None
    if isinstance(detail, dict):
        found = error_message(detail)
        if found:
            return found
        text = detail.get("message") or detail.get("msg")
        return (str(text), None, None) if text else (str(detail), None, None)
    if isinstance(detail, list) and detail:
        problems = []
        for item in detail:
            if isinstance(item, dict) and item.get("msg"):
                where = ".".join(str(p) for p in item.get("loc") or [])
                problems.append(f"{where}: {item['msg']}" if where else str(item["msg"]))
            else:
                problems.append(str(item))
        return "; ".join(problems), None, None
    return None


# -- what answers become ------------------------------------------------------------------


def connection_error(
    exc: TransportError, method: str, path: str
) -> APIConnectionError | ResponseTooLargeError:
    """A transport failure (or a body past its cap) as the one line the caller sees."""
    if isinstance(exc, BodyTooLarge):
        return ResponseTooLargeError(too_large(exc.max_bytes), method=method, path=path)
    cls = APITimeoutError if exc.timeout else APIConnectionError
    return cls(redact(" ".join(str(exc).split())), method=method, path=path)


def json_body(content: bytes) -> Any:
    """The JSON of a body, or its text when it is not JSON."""
    try:
        return json.loads(content)
    except ValueError:
        return content.decode("utf-8", "replace")


def api_error(response: Response, key: Secret | None, method: str, path: str, body: Any = None) -> APIError:
    """An error from a response, with the gateway's message and any key in it masked."""
    text = redact(response.content.decode("utf-8", "replace"), key)
    if body is None:
        body = json_body(text.encode())
    else:  # the body came from the caller: scrub it the same way
        body = json_body(redact(json.dumps(body), key).encode())
    status = response.status
    found = error_message(body)
    message, code, kind = found if found else (text.strip()[:300] or _phrase(status), None, None)
    if status < 400 and code is not None and code.isdigit() and 400 <= int(code) < 600:
        status = int(code)  # a 200 carrying an error: its code is the better status
    cls = status_error(status)
    error = cls(
        " ".join(message.split()),
        status=status,
        method=method,
        path=path,
        code=code,
        type=kind,
        request_id=request_id_of(response.headers),
        body=body,
        hint=_hint(status, f"{message} {kind or ''}", response.request.body),
    )
    if isinstance(error, RateLimitError):
        error.retry_after = retry_after(response.headers)
    return error


def body_error(response: Response, body: Any, key: Secret | None, method: str, path: str) -> APIError | None:
    """The error a 200 body carries (``{"error": {...}}`` and kin), or None."""
    if isinstance(body, dict) and body.get("error") and error_message(body) and not body.get("choices"):
        return api_error(response, key, method, path, body)
    return None


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "no message"


# A 400 that is about the key: LiteLLM's proxy answers a key it does not know with 400
# "No connected db." (type no_db_connection) when it keeps no key database.
_AUTH_SHAPED = re.compile(
    r"api[ _-]?key|invalid key|(un)?authori[sz]|authenticat|credential|no_db_connection", re.I
)


def _hint(status: int, text: str, sent: bytes) -> str | None:
    if status == 401 or (status == 400 and _AUTH_SHAPED.search(text)):
        return "Check the API key (GATECELL_API_KEY or OPENAI_API_KEY)"
    return refuses_content(status, text, sent)


TEXT_ONLY = (
    "The model takes text only: it refused the picture or file in the prompt. Ask a model that "
    "reads them, or send a document as its text (Attachment.as_text(), --as-text in the magics)"
)
"""The hint of a gateway's refusal of content parts (`refuses_content`)."""

# What a request carrying content parts holds (WIRE-NOTES "Content beyond a plain string"),
# in the compact JSON the client sends or the spaced JSON of json.dumps.
_PARTS_SENT = re.compile(
    rb'"(?:image_url|input_image|input_file|inline_data|inlineData|file_data|fileData)"'
    rb'|"type":\s*"(?:image|document|file)"'
)
_NAMES_CONTENT = re.compile(
    r"image|vision|multi-?modal|content[ _]?type|content part|file|document|pdf|inline_?data", re.I
)
_REFUSES = re.compile(
    r"not supported|unsupported|only supported|does ?n[o']t support|not allowed|cannot|can't|"
    r"invalid|not a valid|expected|must be a string|text[ -]only|no vision",
    re.I,
)


def refuses_content(status: int | None, message: str, sent: bytes | bool | None) -> str | None:
    """`TEXT_ONLY` when a 4xx answers a request that carried pictures or files (``sent``: the
    request's body, or whether it carried any) with a message naming them as refused
    ("Invalid content type. image_url is only supported by certain models."); else None."""
    if status is None or not 400 <= status < 500 or status in (401, 403, 404, 429):
        return None
    if not (_PARTS_SENT.search(sent) if isinstance(sent, bytes) else sent):
        return None
    if _NAMES_CONTENT.search(message) and _REFUSES.search(message):
        return TEXT_ONLY
    return None
