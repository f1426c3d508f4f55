"""The anthropic and google-genai SDKs, configured as their users do, work."""

from __future__ import annotations

import anthropic
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types


@pytest.fixture
def claude(local_gateway):
    with anthropic.Anthropic(
        base_url=local_gateway.base_url, api_key=local_gateway.api_key.reveal(), max_retries=0
    ) as c:
        yield c


@pytest.fixture
def gemini(local_gateway):
    options = types.HttpOptions(base_url=local_gateway.base_url)
    return genai.Client(api_key=local_gateway.api_key.reveal(), http_options=options)


def test_messages(claude):
    message = claude.messages.create(
        model="local-chat",
        max_tokens=100,
        system="Be brief.",
        messages=[{"role": "user", "content": "What is 10 / 4?"}],
    )
    assert message.content[0].text == "10 / 4 = 2.5"
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens > 0


def test_messages_stream(claude):
    with claude.messages.stream(
        model="local-chat", max_tokens=4, messages=[{"role": "user", "content": "count to 20"}]
    ) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(pieces) == 4
    assert final.content[0].text == "".join(pieces) == "1, 2, 3, 4,"
    assert final.stop_reason == "max_tokens"


def test_messages_refuse_a_wrong_key(local_gateway):
    with anthropic.Anthropic(
        base_url=local_gateway.base_url, api_key="sk-nope-00000000", max_retries=0
    ) as bad:
        with pytest.raises(anthropic.AuthenticationError):
            bad.messages.create(
                model="local-chat", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
            )


def test_generate_content(gemini):
    reply = gemini.models.generate_content(model="local-chat", contents="What is 7 * 8?")
    assert reply.text == "7 * 8 = 56"
    assert reply.candidates[0].finish_reason == types.FinishReason.STOP
    assert reply.usage_metadata.total_token_count > 0


def test_generate_content_stream(gemini):
    pieces = [
        c.text for c in gemini.models.generate_content_stream(model="local-chat", contents="count to 6")
    ]
    assert "".join(pieces) == "1, 2, 3, 4, 5, 6."
    assert len(pieces) == 6


def test_generate_content_system_instruction_and_limit(gemini):
    config = types.GenerateContentConfig(system_instruction="Reply in JSON.", max_output_tokens=50)
    reply = gemini.models.generate_content(model="local-chat", contents="say ok", config=config)
    assert reply.text == '{"answer": "ok"}'


def test_generate_content_unknown_model_is_404(gemini):
    with pytest.raises(genai_errors.ClientError) as info:
        gemini.models.generate_content(model="no-such-model", contents="hi")
    assert info.value.code == 404
