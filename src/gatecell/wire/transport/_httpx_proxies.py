"""The proxy settings (`gatecell.wire.transport.proxies`) on httpx's side: a transport per proxy.

httpx reads the proxy environment itself only when it builds its own transport; a client
that passes one (as gatecell's does, to enforce its limits) gets no proxies at all. So the
client's transport is a `ProxiedTransport`: each request goes to the httpx transport of the
proxy `Proxies.for_url` names for its URL (made on first use by a factory the client gives,
so that its other options, TLS and pool limits, stay the client's), or to the direct one.
The rules are gatecell's, not httpx's mounts, so that httpx and the lean HTTP/1.1 pool
(the batch, the forwarder) route every URL alike.

Failures say which proxy they went through, as the lean pool's do (its password masked):
a refused tunnel or a 407 is an ``httpx.ProxyError`` naming the proxy; a connection that
failed through a proxy keeps its type, its message followed by the proxy's name (it may be
the proxy's fault or, inside a tunnel, the gateway's certificate).
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from gatecell.wire.transport.errors import cut
from gatecell.wire.transport.proxies import Proxies, Proxy

__all__ = ["ProxiedTransport"]

Transport = httpx.BaseTransport | httpx.AsyncBaseTransport


class ProxiedTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """httpx's transports, one per proxy in use, each request sent through the one its URL's.

    **Parameters:**

    * **proxies** - the settings in force (`Proxies`).
    * **make** - ``make(proxy)``: a new transport, sync or async, through ``proxy`` (an
      ``httpx.Proxy``, credentials included) or direct (None), e.g.
      ``lambda proxy: httpx.HTTPTransport(proxy=proxy)``.
    """

    def __init__(self, proxies: Proxies, make: Callable[[httpx.Proxy | None], Transport]) -> None:
        self._proxies = proxies
        self._make = make
        self._transports: dict[Proxy | None, Transport] = {}
        self._routes: dict[tuple[bytes, bytes, int | None], tuple[Transport, Proxy | None]] = {}  # by origin

    def _route(self, url: httpx.URL) -> tuple[Transport, Proxy | None]:
        origin = (url.raw_scheme, url.raw_host, url.port)
        route = self._routes.get(origin)
        if route is None:
            proxy = self._proxies.for_url(str(url))
            transport = self._transports.get(proxy)
            if transport is None:
                transport = self._make(None if proxy is None else httpx.Proxy(proxy.reveal()))
                self._transports[proxy] = transport
            route = self._routes[origin] = (transport, proxy)
        return route

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        transport, proxy = self._route(request.url)
        assert isinstance(transport, httpx.BaseTransport), "an async transport in a sync client"
        try:
            response = transport.handle_request(request)
        except (httpx.ProxyError, httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise _named(exc, proxy, request) from None
        if proxy is not None and response.status_code == 407:
            response.close()
            raise _refused(proxy, request)
        return response

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        transport, proxy = self._route(request.url)
        assert isinstance(transport, httpx.AsyncBaseTransport), "a sync transport in an async client"
        try:
            response = await transport.handle_async_request(request)
        except (httpx.ProxyError, httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise _named(exc, proxy, request) from None
        if proxy is not None and response.status_code == 407:
            await response.aclose()
            raise _refused(proxy, request)
        return response

    def close(self) -> None:
        for transport in self._transports.values():
            if isinstance(transport, httpx.BaseTransport):
                transport.close()

    async def aclose(self) -> None:
        for transport in self._transports.values():
            if isinstance(transport, httpx.AsyncBaseTransport):
                await transport.aclose()


def _named(exc: httpx.TransportError, proxy: Proxy | None, request: httpx.Request) -> httpx.TransportError:
    if proxy is None:
        return exc
    if isinstance(exc, httpx.ProxyError):  # httpx's words for a refused CONNECT: "407 Proxy ..."
        return httpx.ProxyError(
            f"proxy {proxy} refused CONNECT {request.url.netloc.decode()}: {cut(str(exc))}", request=request
        )
    return type(exc)(f"{exc} (through proxy {proxy})", request=request)


def _refused(proxy: Proxy, request: httpx.Request) -> httpx.ProxyError:
    return httpx.ProxyError(
        f"proxy {proxy} refused the request: 407 Proxy Authentication Required", request=request
    )
