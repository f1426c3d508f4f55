"""Which redirects the client follows, and with what (sans-IO).

httpx would follow a 307/308 to any host with the same method and body, so a prompt could
be re-posted to a stranger; and it drops only ``Authorization`` on the way, not the
``x-goog-api-key`` that generate-content uses (SPEC 5). So the exchange follows redirects
itself, by these rules:

- a request with a body is never sent to another origin: the redirect fails with an
  `APIError` instead (on its own origin it is followed, as the status says);
- a request without a body may go to another origin, but without any credential header;
- only to http(s) addresses;
- an upgrade from ``http`` to ``https`` on the same host counts as the same origin;
- 303, and 301/302 after a POST, continue with a GET and no body, as browsers and httpx do;
- at most `MAX_REDIRECTS` hops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

from .errors import APIError
from .results import request_id_of
from .secret import Secret, redact

if TYPE_CHECKING:
    from .exchange import Call

__all__ = ["MAX_REDIRECTS", "CREDENTIALS", "same_origin", "redirected"]

MAX_REDIRECTS = 10
CREDENTIALS = ("authorization", "x-goog-api-key", "x-api-key", "proxy-authorization", "cookie")
_BODY_HEADERS = ("content-type", "content-length", "transfer-encoding")


def same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    """Same scheme, host and port; or ``b`` is the https upgrade of ``a`` on default ports."""
    if a.host != b.host:
        return False
    if a.scheme == b.scheme:
        return a.port == b.port
    return a.scheme == "http" and b.scheme == "https" and a.port in (None, 80) and b.port in (None, 443)


def redirected(
    call: Call, request: httpx.Request, response: httpx.Response, hops: int, key: Secret | None
) -> httpx.Request:
    """The request that follows ``response`` (a redirect with a Location), or an `APIError`
    when following it is not allowed."""
    location = response.headers["location"]

    def refuse(why: str) -> APIError:
        return APIError(
            f"redirect to {redact(location[:200], key)!r} not followed: {why}",
            status=response.status_code,
            method=call.method,
            path=call.path,
            request_id=request_id_of(response.headers),
        )

    try:
        target = request.url.join(location)
    except httpx.InvalidURL:
        raise refuse("not a valid address") from None
    if target.scheme not in ("http", "https") or not target.host:
        raise refuse("not an http(s) address")
    if hops >= MAX_REDIRECTS:
        raise refuse(f"more than {MAX_REDIRECTS} redirects")
    same = same_origin(request.url, target)
    body = request.content
    if body and not same:
        raise refuse("another origin, and the request's body goes to its own gateway only")
    method = request.method
    status = response.status_code
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method = "GET"
    headers = request.headers.copy()
    headers.pop("host", None)
    if method != request.method:
        body = b""
        for name in _BODY_HEADERS:
            headers.pop(name, None)
    if not same:
        for name in CREDENTIALS:
            headers.pop(name, None)
    return httpx.Request(method, target, headers=headers, content=body or None, extensions=request.extensions)
