"""`AsyncGateway`: the same programs as `Gateway`, awaited; streams with ``async for``."""

from __future__ import annotations

import asyncio
import logging

import pytest
from fault_server import MP4, PNG

from gatecell.gateway import AsyncChatStream, AsyncGateway
from gatecell.wire.apis.spec import ChatCompletion
from gatecell.wire.transport.errors import GatecellError, RateLimitError, StreamError, StreamTimeoutError

HI = [{"role": "user", "content": "hi"}]


def run(make, scenario, body, **options):
    async def main():
        async with make(scenario, asynchronous=True, **options) as gw:
            return await body(gw)

    return asyncio.run(main())


def test_chat_and_stream(make):
    async def body(gw: AsyncGateway):
        reply = await gw.chat("m", HI)
        stream = await gw.chat("m", HI, stream=True)
        fragments = [f async for f in stream]
        return reply, stream, fragments

    reply, stream, fragments = run(make, "ok", body)
    assert isinstance(reply, ChatCompletion) and reply.text == "Hello world"
    assert isinstance(stream, AsyncChatStream) and fragments == ["Hello", " world"]
    assert stream.finish_reason == "stop" and stream.usage.total_tokens == 5


def test_native_streams_models_image_speech(make):
    async def body(gw: AsyncGateway):
        messages = await gw.messages("m", HI, stream=True)
        gc = await gw.generate_content("g", "x", stream=True)
        return (
            await messages.aread(),
            await gc.aread(),
            (await gw.responses("r", "q")).text,
            (await gw.models()).ids,
            [await m.aread() for m in (await gw.image("i", "cat")).images],
            (await gw.speech("t", "alloy", "hello")).format,
        )

    assert run(make, "ok", body) == (
        "Hi there",
        "Bonjour",
        "Forty-two.",
        ["local-chat", "deep-thinker", "typed-reasoner", "plain"],
        [PNG] * 3,
        "wav",
    )


def test_jobs_and_lazy_media(make):
    async def body(gw: AsyncGateway):
        seen = []
        job = await gw.imagine(
            "castle", wait=True, interval=0.01, on_progress=lambda j: seen.append(j.status)
        )
        video = await gw.wait(await gw.video("v", "waves"), interval=0.01)
        with pytest.raises(GatecellError, match="await media.aread"):
            _ = video.media[0].data
        return seen, await job.media[0].aread(), await video.media[0].aread()

    assert run(make, "ok", body) == (["running", "succeeded"], PNG, MP4)


def test_retries_and_reasoning_routing(make, fault, caplog):
    caplog.set_level(logging.INFO, logger="gatecell")

    async def body(gw: AsyncGateway):
        return (await gw.chat("m", HI)).meta.attempts

    assert run(make, "5xx", body) == 3

    async def limited(gw: AsyncGateway):
        with pytest.raises(RateLimitError):
            await gw.chat("m", HI)

    run(make, "429always", limited, max_retries=1)

    async def reasoner(gw: AsyncGateway):
        first = await gw.chat("deep-thinker", HI)
        stream = await gw.chat("deep-thinker", HI, stream=True)
        return first.text, await stream.aread()

    assert run(make, "reasoner", reasoner) == ("Forty-two.", "Forty-two.")


def test_broken_streams(make):
    async def cut(gw: AsyncGateway):
        stream = await gw.chat("m", HI, stream=True)
        with pytest.raises(StreamError) as caught:
            async for _ in stream:
                pass
        return caught.value.partial_text

    assert run(make, "cut", cut) == "Hello world"

    async def idle(gw: AsyncGateway):
        stream = await gw.chat("m", HI, stream=True)
        with pytest.raises(StreamTimeoutError) as caught:
            await stream.aread()
        return caught.value.partial_text

    assert run(make, "keepalive-after", idle, stream_idle_timeout=0.3) == "Hello"

    async def error(gw: AsyncGateway):
        stream = await gw.chat("m", HI, stream=True)
        with pytest.raises(StreamError, match="upstream overloaded"):
            await stream.aread()
        return stream.text

    assert run(make, "stream-error", error) == "Partial"


def test_cancelling_a_stream_closes_it(make):
    async def body(gw: AsyncGateway):
        stream = await gw.chat("m", HI, stream=True)

        async def consume():
            async for _ in stream:
                pass

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return stream.text, stream._response.is_closed

    assert run(make, "keepalive-after", body) == ("Hello", True)
