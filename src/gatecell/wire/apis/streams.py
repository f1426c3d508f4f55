"""Streams handed to the caller: iterate for text fragments, read the whole reply after.

The parsing is in `decoders` (sans-IO); these classes only pull bytes from the response
and make sure the connection is closed however iteration ends: exhausted, broken off,
an error, or a KeyboardInterrupt. Whatever arrived stays in ``.text``, and the client
hears once how the stream ended (``on_end``: complete, cut, or closed early). Nothing
here retries: once content has been delivered, re-sending would duplicate it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from gatecell.wire.apis._decoders import Decoder
from gatecell.wire.apis.spec import ChatCompletion, Usage, usage_of
from gatecell.wire.transport.errors import StreamError, StreamTimeoutError, StreamTooLargeError, too_large
from gatecell.wire.transport.exchange import Pending
from gatecell.wire.transport.http import BodyTooLarge, Response, TransportError
from gatecell.wire.transport.results import ResponseMeta

__all__ = [
    "Stream",
    "TextStream",
    "AsyncTextStream",
    "ChatStream",
    "AsyncChatStream",
    "Closing",
    "AsyncClosing",
]

C = TypeVar("C", bound="Closing")
A = TypeVar("A", bound="AsyncClosing")


class Closing:
    """``with obj:`` calls ``obj.close()`` at the end."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: C) -> C:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClosing:
    """``async with obj:`` awaits ``obj.aclose()`` at the end."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self: A) -> A:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class Stream:
    """What sync and async streams share: the state of the reply so far, and its end."""

    parsed = None  # a stream is never a typed answer (`results.Answer`)

    def __init__(
        self,
        response: Response,
        decoder: Decoder,
        meta: ResponseMeta,
    ) -> None:
        self._response = response
        self._decoder = decoder
        self._started = False
        self._meta = meta
        self.complete = False  # True once the stream reached its proper end
        # Called once with the stream and its error (or None) when it ends: complete, cut,
        # or closed early. The client sets it to record the call's outcome; what it returns
        # (the log's commit) is waited for before the stream's iteration or close returns.
        self.on_end: Callable[[Stream, StreamError | None], Pending | None] | None = None
        self._pending: Pending | None = None

    @property
    def meta(self) -> ResponseMeta:
        """Provenance; its ``usage`` is filled in once the stream has sent it."""
        if self._meta.usage is None:
            self._meta.usage = usage_of(self._decoder.usage)
        return self._meta

    @property
    def text(self) -> str:
        """All text so far, also after an error or an interrupt."""
        return self._decoder.text

    @property
    def reasoning(self) -> str | None:
        return "".join(self._decoder.reasoning_parts) or None

    @property
    def finish_reason(self) -> str | None:
        return self._decoder.finish_reason

    @property
    def id(self) -> str | None:
        return self._decoder.id

    @property
    def model(self) -> str | None:
        return self._decoder.model or self._meta.model

    @property
    def usage(self) -> Any:
        """The usage block as the stream sent it (``meta.usage`` has it in chat terms)."""
        return self._decoder.usage

    @property
    def raw_usage(self) -> Any:
        """The usage block as the stream sent it, on every kind of stream."""
        return self._decoder.usage

    @property
    def raw_events(self) -> list[Any]:
        """Parsed JSON of every event (native streams; chat streams keep only those carrying
        tool calls, for speed)."""
        return self._decoder.raw_events

    def completion(self) -> ChatCompletion:
        """A `ChatCompletion` built from what has arrived."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        completion = ChatCompletion.model_validate(
            {
                "id": self.id or "",
                "created": int(time.time()),
                "model": self.model or "",
                "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
                "usage": usage_of(self._decoder.usage),
            }
        )
        completion._meta = self.meta
        return completion

    def _begin(self) -> bool:
        first, self._started = not self._started, True
        return first

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Around the reading of the body: a transport failure becomes a `StreamError` that
        keeps the text so far, and however reading ends, the client hears of it once."""
        error: StreamError | None = None
        try:
            yield
            self.complete = True
        except StreamError as exc:  # an error event, the idle timeout, an event too large
            error = exc
            raise
        except TransportError as exc:
            error = self._broken(exc)
            raise error from None
        finally:
            self._ended(error)

    def _ended(self, error: StreamError | None) -> None:
        """Tell the client, once, how the stream ended; what it returns is waited for by the
        sync or async caller (`_settle`)."""
        on_end, self.on_end = self.on_end, None
        if on_end is not None:
            self._pending = on_end(self, error)

    def _take_pending(self) -> Pending | None:
        pending, self._pending = self._pending, None
        return pending

    def _broken(self, exc: TransportError) -> StreamError:
        if isinstance(exc, BodyTooLarge):
            cls: type[StreamError] = StreamTooLargeError
            what = too_large(exc.max_bytes)
        elif exc.timeout:
            cls, what = StreamTimeoutError, f"no data within the idle timeout ({exc.kind})"
        else:
            cls, what = StreamError, f"the connection broke mid-stream ({exc.kind})"
        return cls(what, partial_text=self.text, path=self._meta.endpoint, request_id=self._meta.request_id)

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self._meta.endpoint} model={self.model!r} "
            f"chars={len(self.text)} finish_reason={self.finish_reason!r}>"
        )


class TextStream(Stream, Closing):
    """A native stream (messages, generate-content, responses): iterate for ``str`` fragments."""

    def __iter__(self) -> Iterator[str]:
        if not self._begin():
            return
        decoder = self._decoder
        try:
            with self._reading():
                for raw in self._response.iter_bytes():
                    yield from decoder.feed(raw)
                yield from decoder.finish()
        finally:
            self._response.close()
            self._settle()

    def read(self) -> str:
        """Consume the rest of the stream; return the whole text."""
        for _ in self:
            pass
        return self.text

    def close(self) -> None:
        self._response.close()
        self._ended(None)
        self._settle()

    def _settle(self) -> None:
        pending = self._take_pending()
        if pending is not None:
            pending.wait()


class AsyncTextStream(Stream, AsyncClosing):
    """`TextStream` for ``async for``."""

    async def __aiter__(self) -> AsyncIterator[str]:
        if not self._begin():
            return
        decoder = self._decoder
        try:
            with self._reading():
                async for raw in self._response.aiter_bytes():
                    for fragment in decoder.feed(raw):
                        yield fragment
                for fragment in decoder.finish():
                    yield fragment
        finally:
            await self._response.aclose()
            await self._settle()

    async def aread(self) -> str:
        """Consume the rest of the stream; return the whole text."""
        async for _ in self:
            pass
        return self.text

    async def aclose(self) -> None:
        await self._response.aclose()
        self._ended(None)
        await self._settle()

    async def _settle(self) -> None:
        pending = self._take_pending()
        if pending is not None:
            await pending


class _ChatUsage:
    @property
    def usage(self) -> Usage | None:
        """Chat streams give their usage as a `Usage` (when the gateway sent one)."""
        return usage_of(self._decoder.usage)  # type: ignore[attr-defined]


class ChatStream(_ChatUsage, TextStream):
    """A chat completion stream (SPEC 6), also for reasoning models routed to /v1/responses."""


class AsyncChatStream(_ChatUsage, AsyncTextStream):
    """`ChatStream` for ``async for``."""
