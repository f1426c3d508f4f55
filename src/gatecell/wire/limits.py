"""What the client accepts of a response body: a size cap, and a deadline for the whole of it.

httpx's timeouts bound each operation (connect, one read, one write), so a gateway that
trickles a body a few bytes at a time stays inside all of them for ever; and nothing in
httpx bounds a body's size, so a gateway that answers with gigabytes fills the memory.
This transport wraps httpx's own and checks both between the reads of every body, as it
streams in, against the `Limits` a request carries in its extensions (both clients build
them the same way). Reading stops at the cap with a `ResponseTooLargeError`.

Compressed bodies are refused: a few megabytes of gzip can swell past any cap after the
check, so the client asks for none (``Accept-Encoding: identity``). LLM traffic loses
nothing by it: JSON answers are small, streams are not compressed, media already is.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator

import httpx

from .errors import APIError, ResponseTooLargeError, too_large

__all__ = ["LIMITS", "Limits", "LimitedTransport", "compressed", "too_large_error"]

LIMITS = "gatecell.limits"  # the request extension holding its `Limits`


class Limits:
    """``max_bytes`` of body; and, unless None, a `time.monotonic` ``deadline`` by which the
    whole body must have arrived (``seconds`` is the allowance it came from, for the message)."""

    __slots__ = ("max_bytes", "deadline", "seconds")

    def __init__(self, max_bytes: int, seconds: float | None = None) -> None:
        self.max_bytes = max_bytes
        self.seconds = seconds
        self.deadline = None if seconds is None else time.monotonic() + seconds


def too_large_error(request: httpx.Request, max_bytes: int) -> ResponseTooLargeError:
    return ResponseTooLargeError(too_large(max_bytes), method=request.method, path=request.url.path)


def _too_large(request: httpx.Request, limits: Limits) -> ResponseTooLargeError:
    return too_large_error(request, limits.max_bytes)


def compressed(encoding: str, status: int, request: httpx.Request) -> APIError:
    """A body in a content coding the client did not ask for: refused, since its size after
    decompressing cannot be bounded."""
    return APIError(
        f"the body came compressed ({encoding}) though the client asked for none "
        "(Accept-Encoding: identity), so its size cannot be bounded",
        status=status,
        method=request.method,
        path=request.url.path,
    )


class _LimitedStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    def __init__(
        self, stream: httpx.SyncByteStream | httpx.AsyncByteStream, request: httpx.Request, limits: Limits
    ) -> None:
        self._stream = stream
        self._request = request
        self._limits = limits
        self._size = 0

    def _check(self, chunk: bytes) -> None:
        self._size += len(chunk)
        limits = self._limits
        if self._size > limits.max_bytes:
            raise _too_large(self._request, limits)
        if limits.deadline is not None and time.monotonic() > limits.deadline:
            raise httpx.ReadTimeout(
                f"the whole request took longer than {limits.seconds:g} s", request=self._request
            )

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._stream:  # type: ignore[union-attr]
            self._check(chunk)
            yield chunk

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:  # type: ignore[union-attr]
            self._check(chunk)
            yield chunk

    def close(self) -> None:
        self._stream.close()  # type: ignore[union-attr]

    async def aclose(self) -> None:
        await self._stream.aclose()  # type: ignore[union-attr]


class LimitedTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """httpx's own transport (sync or async), with each request's `Limits` enforced."""

    def __init__(self, inner: httpx.BaseTransport | httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._inner.handle_request(request)  # type: ignore[union-attr]
        try:
            return self._limited(response, request)
        except APIError:
            response.close()
            raise

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)  # type: ignore[union-attr]
        try:
            return self._limited(response, request)
        except APIError:
            await response.aclose()
            raise

    @staticmethod
    def _limited(response: httpx.Response, request: httpx.Request) -> httpx.Response:
        limits: Limits | None = request.extensions.get(LIMITS)
        if limits is None:
            return response
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding != "identity":
            raise compressed(encoding, response.status_code, request)
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > limits.max_bytes:
            raise _too_large(request, limits)
        response.stream = _LimitedStream(response.stream, request, limits)
        return response

    def close(self) -> None:
        self._inner.close()  # type: ignore[union-attr]

    async def aclose(self) -> None:
        await self._inner.aclose()  # type: ignore[union-attr]
