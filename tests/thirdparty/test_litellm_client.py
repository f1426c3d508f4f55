"""The client against LiteLLM's proxy: every endpoint it serves, its ids, its errors, its metadata."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from gatecell import APIError, AsyncGateway, Gateway

pytestmark = pytest.mark.litellm

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
SUM = [{"role": "user", "content": "What is 2+2?"}]
HINT = "Check the API key (GATECELL_API_KEY or OPENAI_API_KEY)"


@pytest.fixture
def gw(litellm):
    with Gateway(litellm.base_url, litellm.key) as gw:
        yield gw


def test_litellm_names_its_requests_only_by_its_call_id(litellm):
    """So a request id gatecell reports for LiteLLM can only have come from x-litellm-call-id."""
    answer = httpx.post(
        litellm.base_url + "/v1/chat/completions",
        json={"model": "lite-chat", "messages": SUM},
        headers={"authorization": f"Bearer {litellm.key}"},
    )
    assert UUID.match(answer.headers["x-litellm-call-id"])
    assert not {"x-request-id", "request-id", "x-oneapi-request-id"} & set(answer.headers)


def test_chat_whole_and_streamed_with_the_request_id(gw):
    reply = gw.chat(model="lite-chat", messages=SUM)
    assert reply.text == "2+2 = 4" and reply.usage.total_tokens > 0
    assert reply.meta.endpoint == "/v1/chat/completions" and UUID.match(reply.meta.request_id)
    stream = gw.chat(model="lite-chat", messages=[{"role": "user", "content": "Count to 20."}], stream=True)
    fragments = list(stream)
    assert len(fragments) > 5 and "".join(fragments) == stream.text
    assert stream.text.startswith("1, 2, 3") and stream.finish_reason == "stop"
    assert UUID.match(stream.meta.request_id) and stream.meta.request_id != reply.meta.request_id


@pytest.mark.parametrize("stream", [False, True])
def test_native_messages_and_generate_content(gw, stream):
    for result in (
        gw.messages("lite-chat", SUM, max_tokens=50, stream=stream),
        gw.generate_content("lite-chat", "What is 2+2?", stream=stream),
    ):
        text = result.read() if stream else result.text
        assert text == "2+2 = 4"
        assert UUID.match(result.meta.request_id)


@pytest.mark.parametrize("stream", [False, True])
def test_responses_with_effort_and_reasoning(gw, stream):
    result = gw.responses("lite-reasoner", "What is 2+2?", effort="low", stream=stream)
    text = result.read() if stream else result.text
    assert text == "2+2 = 4"
    assert "Effort low" in result.reasoning and UUID.match(result.meta.request_id)


def test_image_and_speech(gw):
    image = gw.image("lite-image", "a lighthouse", size="256x256")
    assert image.images[0].mime == "image/png" and image.images[0].data.startswith(b"\x89PNG")
    assert UUID.match(image.meta.request_id)
    audio = gw.speech("lite-tts", "alloy", "Hello from LiteLLM")
    assert audio.format == "wav" and len(audio.data) > 1000 and UUID.match(audio.meta.request_id)


def test_models_carry_litellm_modes_as_endpoints(gw):
    models = {m.id: m.endpoints for m in gw.models()}
    assert models == {
        "lite-chat": ["/v1/chat/completions"],
        "lite-reasoner": ["/v1/responses"],
        "lite-image": ["/v1/images/generations"],
        "lite-tts": ["/v1/audio/speech"],
    }


def test_the_mode_routes_a_reasoning_model_to_responses(litellm):
    """``lite-reasoner`` matches no name pattern: only LiteLLM's mode says it is responses-only."""
    with Gateway(litellm.base_url, litellm.key) as gw:
        before = gw.chat(model="lite-reasoner", messages=SUM)  # LiteLLM bridges it, so it works...
        assert before.meta.endpoint == "/v1/chat/completions"
        gw.models()
        after = gw.chat(model="lite-reasoner", messages=SUM)  # ...but the client now knows better
    assert after.meta.endpoint == "/v1/responses"
    assert after.text == before.text == "2+2 = 4" and after.choices[0].message.reasoning_content


def test_unknown_model_is_one_line_with_the_request_id(gw):
    with pytest.raises(APIError) as caught:
        gw.chat(model="gpt-nope", messages=SUM)
    err = caught.value
    assert err.status == 400 and UUID.match(err.request_id)
    assert str(err) == (
        "400 from POST /v1/chat/completions: /chat/completions: Invalid model name passed in "
        "model=gpt-nope. Call `/v1/models` to view available models for your key. "
        f"(request id {err.request_id})"
    )


def test_wrong_key_gets_the_key_hint_and_is_never_shown(litellm):
    wrong = "sk-wrong-" + "w" * 24
    with Gateway(litellm.base_url, wrong) as gw, pytest.raises(APIError) as caught:
        gw.models()
    err = caught.value
    assert err.status == 400 and err.hint == HINT  # LiteLLM without a key database: 400 "No connected db."
    assert str(err) == f"400 from GET /v1/models: No connected db. {HINT}"
    assert wrong not in str(err) + repr(err.body)


def test_a_fastapi_detail_error_is_one_line(gw):
    """LiteLLM has no job-style endpoints: FastAPI answers {"detail": "Not Found"}."""
    for submit, path in (
        (lambda: gw.imagine("a castle"), "/imgjob/submit/imagine"),
        (lambda: gw.music("a tune"), "/musicjob/submit/music"),
    ):
        with pytest.raises(APIError) as caught:
            submit()
        assert str(caught.value) == f"404 from POST {path}: Not Found"


def test_async_client(litellm):
    async def main():
        async with AsyncGateway(litellm.base_url, litellm.key) as gw:
            reply = await gw.chat(model="lite-chat", messages=SUM)
            stream = await gw.chat(model="lite-chat", messages=SUM, stream=True)
            text = "".join([fragment async for fragment in stream])
            return reply, text, stream

    reply, text, stream = asyncio.run(main())
    assert reply.text == text == "2+2 = 4"
    assert UUID.match(reply.meta.request_id) and UUID.match(stream.meta.request_id)


def test_typed_answers_go_natively_where_litellm_says_the_model_takes_them(gw, litellm):
    from typed_models import Review

    ask = [{"role": "user", "content": "Read this review: my Acme kettle is wonderful, 5 stars."}]
    reply = gw.chat(model="lite-chat", messages=ask, schema=Review)
    assert reply.parsed == Review(sentiment="positive", product="Acme", stars=5)
    assert reply.parse_error is None
    # learnt from LiteLLM's own /model/info: lite-chat natively, lite-image (says no) not
    assert gw.support.asked and gw.support.native("lite-chat") and not gw.support.native("lite-image")
    info = httpx.get(litellm.base_url + "/model/info", headers={"authorization": f"Bearer {litellm.key}"})
    said = {e["model_name"]: e["model_info"].get("supports_response_schema") for e in info.json()["data"]}
    assert said["lite-chat"] is True and said["lite-image"] is False
    labels = gw.chat(model="lite-chat", messages=ask, choices=["positive", "negative", "neutral"])
    assert labels.parsed == "positive"
