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

from urllib.parse import quote, urljoin, urlsplit

from .errors import APIError
from .http import CREDENTIALS, Request, Response, request_id_of, same_origin
from .secret import Secret, redact

__all__ = ["MAX_REDIRECTS", "redirected"]

MAX_REDIRECTS = 10
_BODY_HEADERS = ("content-type", "content-length", "transfer-encoding")
_URL_SAFE = "%:/?#[]@!$&'()*+,;=~"


def redirected(path: str, request: Request, response: Response, hops: int, key: Secret | None) -> Request:
    """The request that follows ``response`` (a redirect with a Location) to the call of
    ``path``, or an `APIError` when following it is not allowed."""
    location = response.headers["location"]

    def refuse(why: str) -> APIError:
        return APIError(
            f"redirect to {redact(location[:200], key)!r} not followed: {why}",
            status=response.status,
            method=request.method,
            path=path,
            request_id=request_id_of(response.headers),
        )

    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in location):
        raise refuse("not a valid address")
    try:
        # As httpx does: what may not stand in a URL as it is (a space, non-ASCII) is encoded.
        target = quote(urljoin(request.url, location), safe=_URL_SAFE)
        parts = urlsplit(target)
        parts.port  # noqa: B018  (a port that is not a number raises here)
    except ValueError:
        raise refuse("not a valid address") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise refuse("not an http(s) address")
    if hops >= MAX_REDIRECTS:
        raise refuse(f"more than {MAX_REDIRECTS} redirects")
    same = same_origin(request.url, target)
    body = request.body
    if body and not same:
        raise refuse("another origin, and the request's body goes to its own gateway only")
    method = request.method
    status = response.status
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method = "GET"
    headers = request.headers
    if method != request.method:
        body = b""
        headers = headers.without(_BODY_HEADERS)
    if not same:
        headers = headers.without(CREDENTIALS)
    following = Request(
        method,
        target,
        headers,
        body,
        stream=request.stream,
        read_timeout=request.read_timeout,
        max_bytes=request.max_bytes,
    )
    following.seconds, following.deadline = request.seconds, request.deadline  # one deadline for all hops
    return following
