"""End to end against the embedded local gateway: the client and the gateway agree on the wire."""

from __future__ import annotations

import asyncio

import pytest

from gatecell.gateway import AsyncGateway, Gateway
from gatecell.wire.transport.errors import NotFoundError

HI = [{"role": "user", "content": "Hello there"}]


@pytest.fixture
def gw(local_gateway):
    with Gateway(local_gateway.base_url, local_gateway.api_key) as gw:
        yield gw


def test_models_say_which_endpoint_each_model_takes(gw):
    models = gw.models()
    assert {"local-chat", "local-reasoner", "local-image", "local-tts", "local-video"} <= set(models.ids)
    by_id = {m.id: m for m in models}
    assert by_id["local-reasoner"].endpoints == ["/v1/responses"]
    assert gw.router.wants_responses("local-reasoner") and not gw.router.wants_responses("local-chat")


def test_chat_and_stream_agree(gw):
    reply = gw.chat("local-chat", HI, temperature=0)
    assert reply.text and reply.choices[0].finish_reason == "stop" and reply.usage.total_tokens > 0
    stream = gw.chat("local-chat", HI, temperature=0, stream=True)
    fragments = list(stream)
    assert len(fragments) > 1 and "".join(fragments) == stream.text == reply.text
    assert stream.finish_reason == "stop"


def test_a_reasoning_model_through_chat(local_gateway):
    with Gateway(local_gateway.base_url, local_gateway.api_key) as gw:  # fresh: learns from the refusal
        reply = gw.chat("local-reasoner", [{"role": "user", "content": "What is 2+2?"}])
        assert reply.meta.endpoint == "/v1/responses" and "4" in reply.text
        stream = gw.chat("local-reasoner", [{"role": "user", "content": "What is 2+2?"}], stream=True)
        assert "".join(stream) == stream.text and "4" in stream.text


def test_native_endpoints(gw):
    assert gw.messages("local-chat", HI).text
    assert "".join(gw.messages("local-chat", HI, stream=True))
    assert gw.generate_content("local-chat", "Hello").text
    assert "".join(gw.generate_content("local-chat", "Hello", stream=True))
    reply = gw.responses("local-reasoner", "Why is the sky blue?", effort="low")
    assert reply.text and reply.reasoning


def test_image_and_speech(gw):
    image = gw.image("local-image", "a red cat", size="64x64")
    assert image.images[0].mime == "image/png" and image.images[0].data[:4] == b"\x89PNG"
    assert gw.speech("local-tts", "alloy", "Hello world").format == "wav"
    assert gw.speech("local-tts", "nova", "Hello world", response_format="mp3").format == "mp3"


def test_jobs(gw):
    progress = []
    job = gw.imagine("a castle", wait=True, interval=0.1, on_progress=lambda j: progress.append(j.progress))
    assert (
        job.status == "succeeded" and job.media[0].data[:4] == b"\x89PNG" and job.media[0].mime == "image/png"
    )
    assert progress[-1] == 100.0 and progress == sorted(progress)
    song = gw.music("a tune", style="jazz", wait=True, interval=0.1)
    assert song.status == "succeeded" and song.media and song.media[0].data
    video = gw.video("local-video", "waves", wait=True, interval=0.1)
    assert video.media[0].mime == "video/mp4"
    assert gw.job(video.id, kind="video").status == "succeeded"


def test_errors_from_the_gateway(gw):
    with pytest.raises(NotFoundError) as caught:
        gw.chat("no-such-model", HI)
    assert "\n" not in str(caught.value) and str(caught.value).startswith(
        "404 from POST /v1/chat/completions: "
    )


def test_async_client(local_gateway):
    async def main():
        async with AsyncGateway(local_gateway.base_url, local_gateway.api_key) as gw:
            reply = await gw.chat("local-chat", HI, temperature=0)
            stream = await gw.chat("local-chat", HI, temperature=0, stream=True)
            return reply.text, [f async for f in stream], (await gw.models()).ids

    text, fragments, ids = asyncio.run(main())
    assert "".join(fragments) == text and "local-chat" in ids
