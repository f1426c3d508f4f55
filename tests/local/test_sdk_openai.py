"""The openai SDK, configured as its users do (base_url ending in /v1, api_key), works."""

from __future__ import annotations

import base64
import io
import wave

import openai
import pytest


def test_chat_answers_arithmetic(client):
    reply = client.chat.completions.create(
        model="local-chat", messages=[{"role": "user", "content": "What is 2+2?"}]
    )
    assert reply.object == "chat.completion"
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].message.content.endswith("= 4")
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens > 0


def test_chat_is_deterministic_and_honours_max_tokens(client):
    messages = [{"role": "user", "content": "Tell me about the lighthouses of Brittany"}]
    first = client.chat.completions.create(model="local-chat", messages=messages)
    second = client.chat.completions.create(model="local-chat", messages=messages)
    assert first.choices[0].message.content == second.choices[0].message.content
    assert "lighthouses" in first.choices[0].message.content
    cut = client.chat.completions.create(model="local-chat", messages=messages, max_tokens=3)
    assert cut.choices[0].finish_reason == "length"
    assert cut.usage.completion_tokens == 3
    assert first.choices[0].message.content.startswith(cut.choices[0].message.content)


def test_chat_follows_the_system_prompt(client):
    messages = [
        {"role": "system", "content": "Answer in uppercase."},
        {"role": "user", "content": "say hello there"},
    ]
    reply = client.chat.completions.create(model="local-chat", messages=messages)
    assert reply.choices[0].message.content == "HELLO THERE"


def test_streaming_chat_arrives_in_pieces_with_finish_and_usage(client):
    stream = client.chat.completions.create(
        model="local-chat",
        messages=[{"role": "user", "content": "count to 12"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12."
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) == 12
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 12


def test_models_lists_every_local_model_with_its_endpoints(client):
    models = {m.id: m for m in client.models.list()}
    assert {"local-chat", "local-reasoner", "local-image", "local-tts", "local-video"} <= set(models)
    assert models["local-reasoner"].model_extra["supported_endpoints"] == ["/v1/responses"]
    assert "/v1/chat/completions" in models["local-chat"].model_extra["supported_endpoints"]
    assert models["local-image"].owned_by == "gatecell-local"
    assert client.models.retrieve("local-tts").id == "local-tts"


def test_images_are_real_pngs_of_the_requested_size(client):
    from PIL import Image

    result = client.images.generate(model="local-image", prompt="a red kite over dunes", size="256x128")
    png = base64.b64decode(result.data[0].b64_json)
    assert Image.open(io.BytesIO(png)).size == (256, 128)
    by_url = client.images.generate(
        model="local-image", prompt="a red kite over dunes", size="256x128", response_format="url"
    )
    import httpx

    key = {"authorization": f"Bearer {client.api_key}"}  # files are the key's own
    assert httpx.get(by_url.data[0].url, headers=key).content == png


def test_speech_is_wav_audio(client):
    audio = client.audio.speech.create(model="local-tts", voice="alloy", input="Hello from gatecell.")
    data = audio.read()
    with wave.open(io.BytesIO(data)) as w:
        assert w.getnframes() / w.getframerate() > 0.3


def test_speech_refuses_an_unknown_voice(client):
    with pytest.raises(openai.BadRequestError, match="voice"):
        client.audio.speech.create(model="local-tts", voice="no-such-voice", input="hi")


def test_responses_give_summary_and_reasoning_tokens(client):
    response = client.responses.create(
        model="local-reasoner", input="What is 6 times 7?", reasoning={"effort": "high"}
    )
    assert response.output_text == "6 * 7 = 42"
    summary = response.output[0].summary[0].text
    assert "arithmetic" in summary
    assert response.usage.output_tokens_details.reasoning_tokens > 0
    low = client.responses.create(
        model="local-reasoner", input="What is 6 times 7?", reasoning={"effort": "low"}
    )
    assert (
        low.usage.output_tokens_details.reasoning_tokens
        < response.usage.output_tokens_details.reasoning_tokens
    )


def test_responses_stream_through_the_sdk_helper(client):
    deltas, summary = [], []
    with client.responses.stream(model="local-reasoner", input="What is 9 - 5?") as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
            elif event.type == "response.reasoning_summary_text.delta":
                summary.append(event.delta)
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == "9 - 5 = 4"
    assert len(summary) > 3
    assert final.usage.output_tokens_details.reasoning_tokens > 0


def test_chat_completions_refuse_the_reasoning_model(client):
    with pytest.raises(openai.BadRequestError, match="/v1/responses"):
        client.chat.completions.create(model="local-reasoner", messages=[{"role": "user", "content": "hi"}])


def test_wrong_key_is_an_authentication_error(local_gateway):
    with openai.OpenAI(
        base_url=f"{local_gateway.base_url}/v1", api_key="sk-wrong-key-0000", max_retries=0
    ) as bad:
        with pytest.raises(openai.AuthenticationError) as info:
            bad.models.list()
    assert info.value.status_code == 401
