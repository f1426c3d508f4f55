"""Forwarding to an upstream gateway for every model this gateway does not serve itself.

The path is kept lean because it sits in front of every remote call: one pooled
`httpx.AsyncClient` for the app's lifetime, the request body passed on as the bytes that
arrived (never parsed and re-serialised), the caller's key swapped for the upstream key, and
the answer relayed as raw bytes: event streams chunk by chunk as they arrive, other bodies
whole. Upstream errors keep their status and body.
"""

from __future__ import annotations

import logging
from typing import AsyncIterator

import httpx
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from gatecell.wire.secret import Secret, redact
from gatecell.wire.settings import root_url

from .errors import Fail, is_generate_content

__all__ = ["Upstream"]

log = logging.getLogger("gatecell.local")

# Hop-by-hop headers, and the credentials that belong to this gateway, not the upstream one.
_DROP_REQUEST = frozenset(
    b"host content-length connection keep-alive transfer-encoding te upgrade proxy-authorization "
    b"proxy-connection authorization x-api-key x-goog-api-key accept-encoding".split()
)
_DROP_RESPONSE = frozenset(
    "content-length connection keep-alive transfer-encoding te upgrade proxy-connection date server".split()
)


class Upstream:
    def __init__(self, base_url: str, key: Secret | None) -> None:
        self.base_url = root_url(base_url)
        self._key = key
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        # Created on first use, inside the server's event loop, and kept for reuse.
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                timeout=httpx.Timeout(600.0, connect=10.0),
                limits=httpx.Limits(max_connections=2000, max_keepalive_connections=500),
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _headers(self, request: Request) -> list[tuple[bytes, bytes]]:
        headers = [(k, v) for k, v in request.headers.raw if k not in _DROP_REQUEST]
        if self._key:
            key = self._key.reveal().encode()
            path = request.url.path
            if is_generate_content(path):
                headers.append((b"x-goog-api-key", key))
            elif path.startswith(("/v1/messages", "/messages")):
                headers.append((b"x-api-key", key))
            headers.append((b"authorization", b"Bearer " + key))
        return headers

    async def forward(self, request: Request, body: bytes | None = None) -> Response:
        """Send `request` (with `body`, the bytes already read) upstream; relay the answer."""
        if body is None:
            body = await request.body()
        scope = request.scope
        target = scope["raw_path"].decode("latin-1") if scope.get("raw_path") else scope["path"]
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        req = self.client.build_request(request.method, target, headers=self._headers(request), content=body)
        try:
            resp = await self.client.send(req, stream=True)
        except httpx.HTTPError as exc:
            log.warning("upstream %s unreachable: %s", self.base_url, redact(str(exc), self._key))
            raise Fail(502, f"upstream gateway unreachable ({type(exc).__name__})") from None
        headers = {k: v for k, v in resp.headers.items() if k not in _DROP_RESPONSE}
        if resp.headers.get("content-type", "").startswith("text/event-stream"):
            return StreamingResponse(_relay(resp), status_code=resp.status_code, headers=headers)
        try:
            data = b"".join([chunk async for chunk in resp.aiter_raw()])
        except httpx.HTTPError as exc:
            raise Fail(502, f"upstream gateway broke off its answer ({type(exc).__name__})") from None
        finally:
            await resp.aclose()
        return Response(data, status_code=resp.status_code, headers=headers)

    async def models(self) -> list[dict]:
        """Upstream's model entries, or [] when it cannot be listed."""
        headers = {"authorization": f"Bearer {self._key.reveal()}"} if self._key else {}
        try:
            resp = await self.client.get("/v1/models", headers=headers)
            data = resp.json().get("data") if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            log.warning("could not list upstream models: %s", type(exc).__name__)
            return []
        return [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)] if isinstance(data, list) else []


async def _relay(resp: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in resp.aiter_raw():
            yield chunk
    finally:
        await resp.aclose()
