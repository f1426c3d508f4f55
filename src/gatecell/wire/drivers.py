"""The drivers: carry out a request program's commands, one sync, one async; and the edge
where the wire's `http.Request` and `http.Response` meet httpx.

A program (see `exchange`) yields `Send`, `Read`, `Close`, `Sleep`, `Wait` and `Perform`, and is sent
each command's result. Whatever the I/O raises is thrown into the program where it asked, so the
program decides what it means (retry, an `APIError`, a recorded outcome); the driver decides
nothing. The two loops are the same but for ``await``. They send with any callable from a
`Request` to a `Response`: `httpx_sender` (the clients), or the batch engine's lean one.

The httpx edge sends every request with ``stream=True`` and redirects off, whoever made the
``httpx.Client`` (the user may bring one: ``Gateway(http_client=...)``), so the programs'
redirect rules and the caps of `http.Response` hold in every case; httpx's exceptions become
`TransportError`.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

import httpx

from .exchange import Close, Perform, Program, Read, Send, Wait
from .http import Headers, Request, Response, TransportError

__all__ = ["run", "arun", "httpx_sender", "async_httpx_sender", "SyncSend", "AsyncSend"]

T = TypeVar("T")
SyncSend = Callable[[Request], Response]
AsyncSend = Callable[[Request], Awaitable[Response]]


def run(program: Program[T], send: SyncSend) -> T:
    """Run ``program`` to its end, sending with ``send``; return what it returns."""
    result: Any = None
    error: Exception | None = None
    while True:
        try:
            command = program.send(result) if error is None else program.throw(error)
        except StopIteration as stop:
            return stop.value
        result = error = None
        try:
            if isinstance(command, Send):
                result = send(command.request)
            elif isinstance(command, Read):
                result = command.response.read()
            elif isinstance(command, Close):
                command.response.close()
            elif isinstance(command, Wait):
                command.pending.wait()
            elif isinstance(command, Perform):
                result = command.fn()
            else:
                time.sleep(command.seconds)
        except Exception as exc:
            error = exc


async def arun(program: Program[T], send: AsyncSend) -> T:
    """`run`, awaiting each command."""
    result: Any = None
    error: Exception | None = None
    while True:
        try:
            command = program.send(result) if error is None else program.throw(error)
        except StopIteration as stop:
            return stop.value
        result = error = None
        try:
            if isinstance(command, Send):
                result = await send(command.request)
            elif isinstance(command, Read):
                result = await command.response.aread()
            elif isinstance(command, Close):
                await command.response.aclose()
            elif isinstance(command, Wait):
                await command.pending
            elif isinstance(command, Perform):
                result = command.fn()
                if inspect.isawaitable(result):
                    result = await result
            else:
                await asyncio.sleep(command.seconds)
        except Exception as exc:
            error = exc


# -- httpx ------------------------------------------------------------------------------


def transport_error(exc: httpx.HTTPError | httpx.InvalidURL) -> TransportError:
    kind = type(exc).__name__
    return TransportError(f"{kind}: {exc}", timeout=isinstance(exc, httpx.TimeoutException), kind=kind)


class _Body:
    """An httpx response's body, read as the wire reads bodies."""

    __slots__ = ("_response",)

    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._response.iter_raw()
        except httpx.HTTPError as exc:
            raise transport_error(exc) from None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_raw():
                yield chunk
        except httpx.HTTPError as exc:
            raise transport_error(exc) from None

    def close(self) -> None:
        self._response.close()

    async def aclose(self) -> None:
        await self._response.aclose()


def _native(client: httpx.Client | httpx.AsyncClient, request: Request) -> httpx.Request:
    timeout: Any = httpx.USE_CLIENT_DEFAULT
    if request.read_timeout is not None:
        default = client.timeout
        timeout = httpx.Timeout(
            connect=default.connect, read=request.read_timeout, write=default.write, pool=default.pool
        )
    return client.build_request(
        request.method, request.url, headers=request.headers, content=request.body, timeout=timeout
    )


def httpx_sender(client: httpx.Client) -> SyncSend:
    """Send over ``client``; the answer's body is left to read."""

    def send(request: Request) -> Response:
        try:
            native = client.send(_native(client, request), stream=True, follow_redirects=False)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise transport_error(exc) from None
        return Response(
            native.status_code, Headers(native.headers.multi_items()), request, body=_Body(native)
        )

    return send


def async_httpx_sender(client: httpx.AsyncClient) -> AsyncSend:
    """`httpx_sender`, awaited."""

    async def send(request: Request) -> Response:
        try:
            native = await client.send(_native(client, request), stream=True, follow_redirects=False)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise transport_error(exc) from None
        return Response(
            native.status_code, Headers(native.headers.multi_items()), request, body=_Body(native)
        )

    return send
