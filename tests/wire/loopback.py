"""A raw HTTP/1.1 server on loopback for the lean client's tests: every byte of its answers
is written by the test, and it counts connections and requests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\nok"


class Loopback:
    """A raw HTTP/1.1 server on 127.0.0.1: each connection runs ``handler(server, reader,
    writer)``; it counts connections, and `request` records each request read."""

    def __init__(
        self, handler: Callable[[Loopback, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
    ):
        self.handler = handler
        self.connections = 0
        self.requests: list[bytes] = []

    async def __aenter__(self) -> Loopback:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(self, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client left, or the test is over (a cancelled task would be logged)
        finally:
            writer.close()

    async def request(self, reader: asyncio.StreamReader) -> bytes | None:
        """The next request's head (its body read by Content-Length), None at the end."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        for line in head.lower().split(b"\r\n"):
            if line.startswith(b"content-length:"):
                await reader.readexactly(int(line.split(b":")[1]))
        self.requests.append(head)
        return head


def answering(*answers: bytes, close: bool = False, delay: float = 0.0):
    """A handler that answers each request of a connection with the next of ``answers`` (the
    last one again when they run out), ``delay`` seconds after it came (so that requests
    overlap); with ``close``, closes after the first."""

    async def handler(server: Loopback, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        n = 0
        while await server.request(reader) is not None:
            if delay:
                await asyncio.sleep(delay)
            writer.write(answers[min(n, len(answers) - 1)])
            await writer.drain()
            n += 1
            if close:
                return

    return handler
