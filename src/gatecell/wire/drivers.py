"""The two drivers: carry out a request program's commands with httpx, one sync, one async.

A program (see `exchange`) yields `Send`, `Read` and `Sleep`, and is sent each command's
result. Whatever the I/O raises is thrown into the program where it asked, so the program
decides what it means (retry, an `APIError`, a recorded outcome); the driver decides
nothing. The two loops are the same but for ``await``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol, TypeVar

import httpx

from .exchange import Program, Read, Send

__all__ = ["run", "arun", "AsyncSender"]

T = TypeVar("T")


class AsyncSender(Protocol):
    """What `arun` sends with: an `httpx.AsyncClient`, or the batch engine's lean sender."""

    async def send(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response: ...


def run(program: Program[T], http: httpx.Client) -> T:
    """Run ``program`` to its end with ``http``; return what it returns."""
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
                result = http.send(command.request, stream=command.stream)
            elif isinstance(command, Read):
                result = command.response.read()
            else:
                time.sleep(command.seconds)
        except Exception as exc:
            error = exc


async def arun(program: Program[T], http: AsyncSender) -> T:
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
                result = await http.send(command.request, stream=command.stream)
            elif isinstance(command, Read):
                result = await command.response.aread()
            else:
                await asyncio.sleep(command.seconds)
        except Exception as exc:
            error = exc
