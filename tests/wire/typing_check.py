"""Read by mypy in test_typing.py, never run: the types a user of the clients sees are true.

A line whose comment says ``error`` must be refused by mypy, one whose comment says
``reveal:`` and a type must reveal that type, and every other line must pass.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel
from typing_extensions import assert_type, reveal_type

from gatecell import AsyncGateway, Gateway
from gatecell.wire.apis.spec import ChatCompletion
from gatecell.wire.apis.streams import AsyncChatStream, AsyncTextStream, ChatStream, TextStream
from gatecell.wire.transport.results import Audio, ImageResult, Job, ModelList, Reply

HI = [{"role": "user", "content": "hi"}]


class Review(BaseModel):
    stars: int


def sync(gw: Gateway, stream: bool) -> None:
    assert_type(gw.chat("m", HI), ChatCompletion)
    assert_type(gw.chat("m", HI, 0.5, 1.0, 20), ChatCompletion)
    assert_type(gw.chat("m", HI, stream=False), ChatCompletion)
    assert_type(gw.chat("m", HI, stream=True), ChatStream)
    assert_type(gw.chat("m", HI, stream=stream), ChatCompletion | ChatStream)
    assert_type(gw.messages("m", HI), Reply)
    assert_type(gw.messages("m", HI, stream=True), TextStream)
    assert_type(gw.generate_content("g", "x"), Reply)
    assert_type(gw.generate_content("g", "x", stream=True), TextStream)
    assert_type(gw.responses("r", "q", effort="high"), Reply)
    assert_type(gw.responses("r", "q", stream=True), TextStream)
    assert_type(gw.converse("messages", "m", HI), ChatCompletion | Reply)
    assert_type(gw.converse("messages", "m", HI, stream=True), ChatStream | TextStream)
    assert_type(gw.image("i", "a cat", size="64x64"), ImageResult)
    assert_type(gw.speech("t", "alloy", "hi", response_format="mp3"), Audio)
    assert_type(gw.models(), ModelList)
    assert_type(gw.imagine("castle", wait=True), Job)
    assert_type(gw.video("v", "waves"), Job)
    assert_type(gw.music("tune", style="jazz"), Job)
    assert_type(gw.wait(gw.job("v1", kind="video")), Job)
    assert_type(gw.chat("m", HI, schema=Review), ChatCompletion)
    assert_type(gw.chat("m", HI, 0.2, choices=["yes", "no"], repairs=0), ChatCompletion)
    assert_type(gw.messages("m", HI, schema=Review, repairs=2), Reply)
    assert_type(gw.generate_content("g", "x", choices=["a", "b"]), Reply)
    assert_type(gw.responses("r", "q", schema={"type": "object"}), Reply)
    assert_type(gw.converse("chat", "m", HI, schema=Review), ChatCompletion | Reply)
    assert_type(gw.chat("m", HI, schema=Review).parse_error, str | None)
    assert_type(gw.messages("m", HI, schema=Review).parse_error, str | None)
    with gw.chat("m", HI, stream=True) as chat_stream:
        assert_type(chat_stream, ChatStream)
        for fragment in chat_stream:
            assert_type(fragment, str)
    with Gateway() as client:
        assert_type(client, Gateway)
    reveal_type(gw.chat("m", HI).usage)  # reveal: gatecell.wire.apis.spec.Usage | None


async def asynchronous(agw: AsyncGateway) -> None:
    assert_type(await agw.chat("m", HI), ChatCompletion)
    stream = await agw.chat("m", HI, stream=True)
    assert_type(stream, AsyncChatStream)
    async for fragment in stream:
        assert_type(fragment, str)
    assert_type(await agw.messages("m", HI, stream=True), AsyncTextStream)
    assert_type(await agw.responses("r", "q"), Reply)
    assert_type(await agw.chat("m", HI, schema=Review), ChatCompletion)
    assert_type(await agw.converse("messages", "m", HI, choices=["a", "b"]), ChatCompletion | Reply)
    assert_type(await agw.image("i", "a cat"), ImageResult)
    assert_type(await agw.speech("t", "alloy", "hi"), Audio)
    assert_type(await agw.imagine("castle"), Job)
    models = asyncio.create_task(agw.models())  # a coroutine, as create_task wants
    assert_type(await models, ModelList)
    replies = await asyncio.gather(agw.chat("m", HI), agw.chat("n", HI))
    assert_type(replies[0], ChatCompletion)
    async with AsyncGateway() as client:
        assert_type(client, AsyncGateway)
    pending = agw.chat("m", HI)
    reveal_type(pending).close()  # reveal: typing.Coroutine[Any, Any, gatecell.wire.apis.spec.ChatCompletion]


async def wrong(gw: Gateway, agw: AsyncGateway) -> None:
    completion: ChatCompletion = gw.chat("m", HI, stream=True)  # error
    stream: ChatStream = gw.chat("m", HI)  # error
    not_awaited: ChatCompletion = agw.chat("m", HI)  # error
    sync_stream: ChatStream = await agw.chat("m", HI, stream=True)  # error
    for _ in await agw.chat("m", HI, stream=True):  # error
        pass
    reply: Reply = gw.chat("m", HI)  # error
    gw.chat("m", "hi")  # error
    gw.converse("chat", "m", HI, stream=True, schema=Review)  # error
    gw.converse("chat", "m", HI, repairs="twice")  # error
    print(completion, stream, not_awaited, sync_stream, reply)
