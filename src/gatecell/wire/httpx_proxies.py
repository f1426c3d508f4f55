"""The proxy settings (`gatecell.wire.proxies`) on httpx's side: a transport per proxy.

httpx reads the proxy environment itself only when it builds its own transport; a client
that passes one (as gatecell's does, to enforce its limits) gets no proxies at all. So the
client's transport is a `ProxiedTransport`: each request goes to the httpx transport of the
proxy `Proxies.for_url` names for its URL (made on first use by a factory the client gives,
so that its other options, TLS and pool limits, stay the client's), or to the direct one.
The rules are gatecell's, not httpx's mounts, so that httpx and the lean HTTP/1.1 pool
(the batch, the forwarder) route every URL alike.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from .proxies import Proxies, Proxy

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
        self._routes: dict[tuple[bytes, bytes, int | None], Transport] = {}  # by origin

    def _transport(self, url: httpx.URL) -> Transport:
        origin = (url.raw_scheme, url.raw_host, url.port)
        transport = self._routes.get(origin)
        if transport is None:
            proxy = self._proxies.for_url(str(url))
            transport = self._transports.get(proxy)
            if transport is None:
                transport = self._make(None if proxy is None else httpx.Proxy(proxy.reveal()))
                self._transports[proxy] = transport
            self._routes[origin] = transport
        return transport

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        transport = self._transport(request.url)
        assert isinstance(transport, httpx.BaseTransport), "an async transport in a sync client"
        return transport.handle_request(request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        transport = self._transport(request.url)
        assert isinstance(transport, httpx.AsyncBaseTransport), "a sync transport in an async client"
        return await transport.handle_async_request(request)

    def close(self) -> None:
        for transport in self._transports.values():
            if isinstance(transport, httpx.BaseTransport):
                transport.close()

    async def aclose(self) -> None:
        for transport in self._transports.values():
            if isinstance(transport, httpx.AsyncBaseTransport):
                await transport.aclose()
