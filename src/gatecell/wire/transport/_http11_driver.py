"""The lean HTTP/1.1 driver: a `drivers.AsyncSend` over `http11.Pool`s, beside httpx's.

The request programs (`exchange`) do not know which driver carries them: the clients send
over httpx (`drivers.httpx_sender`), the batch over this one, whose CPU per request is a
small part of httpx's (`benchmarks/bench_http11.py`), so that a batch of short prompts is
paced by the gateway, not by the client. Its answers come back whole (read under the
request's size cap), so the programs' `Read` of them costs nothing.

**One proxy router.** Which proxy a URL goes through is `proxies.Proxies.for_url`'s answer,
the httpx driver's router too (`httpx_proxies.ProxiedTransport`). The pool speaks plain
``http://`` proxies (absolute-form requests, ``CONNECT`` tunnels); a URL whose proxy is of
another kind (``https://``, ``socks5://``, ``socks5h://``) goes through httpx instead, made on
first use with the same router, so every proxy httpx can speak works on both drivers (at
httpx's CPU per request on that route). `proxies.check_proxies` refuses, in one line when a client
is made, a proxy neither driver can speak here (SOCKS without the ``socksio`` package).

**Time.** One watch enforces the request timeout of every request in flight (a timer per
request costs several microseconds of a row's few tens): a request gets its whole answer
within ``request_timeout``, give or take the watch's half second. Failures are the
`TransportError` the programs know, one line each (a proxy's named, its password masked).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import urlsplit

from gatecell.wire.transport.http import BodyTooLarge, Headers, Request, Response, TransportError
from gatecell.wire.transport.http11 import BROKEN, Pool, ProxyError, with_body
from gatecell.wire.transport.proxies import Proxies

__all__ = ["Http11Driver"]

_DROPPED_HEADERS = frozenset(("host", "content-length", "transfer-encoding"))
_WATCH = 0.5  # seconds between the watch's looks at the requests in flight


class Http11Driver:
    """Sends `Request`s over kept-alive pools, one per origin; an ``AsyncSend`` (await it
    with a request). Close it with `aclose`, on the loop it ran on.

    **Parameters:**

    * **proxies** - the proxy settings in force (`Proxies`), or None to go direct.
    * **connect_timeout** - seconds to open a connection (through a proxy: to reach it and
      its tunnel).
    * **request_timeout** - seconds for the whole answer of one request.
    * **idle** - connections kept alive per origin.
    """

    def __init__(
        self, proxies: Proxies | None, *, connect_timeout: float, request_timeout: float, idle: int
    ) -> None:
        self.proxies = proxies
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.idle = idle
        self._pools: dict[str, Pool] = {}  # by origin
        self._routes: dict[str, Pool | None] = {}  # by URL (None: through httpx)
        self._heads: dict[tuple[str, str, int], bytes] = {}
        self._deadlines: dict[asyncio.Task[Any], float] = {}  # requests in flight, by their task
        self._expired: set[asyncio.Task[Any]] = set()
        self._watching: asyncio.Future[None] | None = None
        self._httpx: Any = None  # httpx's client, for the proxies the pool does not speak

    async def __call__(self, request: Request) -> Response:
        url = request.url
        if not url.startswith(("http://", "https://")):
            raise TransportError(
                f"cannot send to {url[:80]!r}: not an http(s) URL", kind="UnsupportedProtocol"
            )
        pool = self._routes[url] if url in self._routes else self._route(url)
        if pool is None:
            return await self._through_httpx(request)
        raw = with_body(request.method, self._head(pool, request), request.body)
        status, head, content = await self._exchange(pool, request, raw)
        return Response(status, Headers.from_raw(head), request, content=content)

    def _route(self, url: str) -> Pool | None:
        """The pool of ``url``'s origin; None when its proxy is one only httpx speaks."""
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        proxy = self.proxies.for_url(url) if self.proxies is not None else None
        pool = None
        if proxy is None or proxy.scheme == "http":
            pool = self._pools.get(origin)
            if pool is None:
                pool = self._pools[origin] = Pool(
                    origin + "/",
                    connect_timeout=self.connect_timeout,
                    answer_timeout=None,
                    idle=self.idle,
                    proxy=proxy,
                )
        if len(self._routes) < 1024:  # the URLs a batch uses are few; a redirect's are not kept
            self._routes[url] = pool
        return pool

    def _head(self, pool: Pool, request: Request) -> bytes:
        """The request's line and headers on the wire, written once per kind of request (its
        method, URL and headers, which the programs share between requests of a kind)."""
        kind = (request.method, request.url, id(request.headers))
        head = self._heads.get(kind)
        if head is None:
            parts = urlsplit(request.url)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            fields = [
                (name.encode("latin-1"), value.encode("latin-1"))
                for name, value in request.headers.items()
                if name not in _DROPPED_HEADERS
            ]
            head = pool.request_head(request.method, target.encode("latin-1"), fields)
            if len(self._heads) < 1024:  # the kinds a batch uses are few; a redirect's are not kept
                self._heads[kind] = head
        return head

    async def _through_httpx(self, request: Request) -> Response:
        """A request whose proxy only httpx speaks, its whole answer read here as the pool's is."""
        if self._httpx is None:
            import httpx

            from gatecell.wire.transport._httpx_proxies import ProxiedTransport
            from gatecell.wire.transport.drivers import async_httpx_sender

            assert self.proxies is not None
            client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.request_timeout, connect=self.connect_timeout),
                transport=ProxiedTransport(self.proxies, lambda proxy: httpx.AsyncHTTPTransport(proxy=proxy)),
            )
            self._httpx = (client, async_httpx_sender(client))
        response = await self._httpx[1](request)
        await response.aread()
        return response

    async def _exchange(
        self, pool: Pool, request: Request, raw: bytes
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """One request over ``pool``, its whole answer read within the request timeout and
        the size cap; failures as the `TransportError` the programs know."""
        if self._watching is None:
            self._watching = asyncio.ensure_future(self._watch())
        answer = None
        task = asyncio.current_task()
        assert task is not None
        self._deadlines[task] = time.monotonic() + self.request_timeout
        try:
            answer = await pool.send(request.method, raw)
            content = await answer.body(request.max_bytes)
        except asyncio.CancelledError:
            if task not in self._expired:
                raise
            self._expired.discard(task)
            if hasattr(task, "uncancel"):  # 3.11+: the cancel was ours, and is over
                task.uncancel()
            raise TransportError(
                f"ReadTimeout: no whole answer within {self.request_timeout:g} s",
                timeout=True,
                kind="ReadTimeout",
            ) from None
        except asyncio.TimeoutError:  # opening the connection took too long
            raise TransportError(
                f"ConnectTimeout: no connection within {self.connect_timeout:g} s",
                timeout=True,
                kind="ConnectTimeout",
            ) from None
        except OverflowError:
            raise BodyTooLarge(request.max_bytes) from None
        except ProxyError as exc:  # it names the proxy, its password masked
            raise TransportError(f"ProxyError: {exc}", kind="ProxyError") from None
        except ConnectionRefusedError as exc:
            raise TransportError(f"ConnectError: {exc}", kind="ConnectError") from None
        except BROKEN as exc:
            raise TransportError(
                f"RemoteProtocolError: {type(exc).__name__}: {exc}", kind="RemoteProtocolError"
            ) from None
        finally:
            del self._deadlines[task]
            if answer is not None:
                answer.release()
        return answer.status, answer.headers, content

    async def _watch(self) -> None:
        """Cut the requests past the request timeout (see the module)."""
        while True:
            await asyncio.sleep(_WATCH)
            now = time.monotonic()
            for task, deadline in list(self._deadlines.items()):
                if deadline < now and task not in self._expired:
                    self._expired.add(task)
                    task.cancel()

    async def aclose(self) -> None:
        if self._watching is not None:
            self._watching.cancel()
            self._watching = None
        for pool in self._pools.values():
            await pool.aclose()
        self._pools.clear()
        if self._httpx is not None:
            await self._httpx[0].aclose()
            self._httpx = None
