"""A cap on the whole of a non-streaming request.

httpx's timeouts bound each operation (connect, one read, one write), so a gateway that
trickles a body a few bytes at a time stays inside all of them for ever. This transport
checks a deadline, carried in the request's extensions, between the reads of a body; a
request built without one (a stream, which has its idle timeout instead) passes untouched.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import httpx

__all__ = ["DEADLINE", "CappedTransport"]

DEADLINE = "gatecell.deadline"  # request extension: (time.monotonic() deadline, seconds allowed)


class _CappedStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    def __init__(self, stream: httpx.SyncByteStream | httpx.AsyncByteStream, request: httpx.Request) -> None:
        self._stream = stream
        self._request = request
        self._deadline, self._seconds = request.extensions[DEADLINE]

    def _check(self) -> None:
        if time.monotonic() > self._deadline:
            raise httpx.ReadTimeout(
                f"the whole request took longer than {self._seconds:g} s", request=self._request
            )

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._stream:  # type: ignore[union-attr]
            self._check()
            yield chunk

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:  # type: ignore[union-attr]
            self._check()
            yield chunk

    def close(self) -> None:
        self._stream.close()  # type: ignore[union-attr]

    async def aclose(self) -> None:
        await self._stream.aclose()  # type: ignore[union-attr]


class CappedTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """httpx's own transport (sync or async), with the whole-request deadline enforced."""

    def __init__(self, inner: httpx.BaseTransport | httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self._capped(self._inner.handle_request(request), request)  # type: ignore[union-attr]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return self._capped(await self._inner.handle_async_request(request), request)  # type: ignore[union-attr]

    @staticmethod
    def _capped(response: httpx.Response, request: httpx.Request) -> httpx.Response:
        if DEADLINE in request.extensions:
            response.stream = _CappedStream(response.stream, request)
        return response

    def close(self) -> None:
        self._inner.close()  # type: ignore[union-attr]

    async def aclose(self) -> None:
        await self._inner.aclose()  # type: ignore[union-attr]
