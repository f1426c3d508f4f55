"""`Gateway` against the fault server: every endpoint, and every hostile case of WIRE-NOTES."""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import socket
from typing import Any

import pytest
from fault_server import KEY, MP4, PNG

from gatecell.gateway import Gateway
from gatecell.wire.apis.jobs import JobPaths
from gatecell.wire.apis.spec import ChatCompletion
from gatecell.wire.transport.errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConfigError,
    InvalidRequest,
    JobError,
    NotFoundError,
    RateLimitError,
    ServerError,
    StreamError,
    StreamTimeoutError,
    echo,
)

HI = [{"role": "user", "content": "hi"}]


def paths(fault, gw) -> list[str]:
    return [f"{r.method} {r.path}" for r in fault.seen(gw.token)]


def retry_waits(caplog) -> list[float]:
    found = (re.match(r"retry \d/\d of .* in ([\d.]+)s after", m) for m in caplog.messages)
    return [float(m.group(1)) for m in found if m]


# -- the plain endpoints ----------------------------------------------------------------


def test_chat_returns_a_typed_completion(make, fault):
    gw = make("ok")
    reply = gw.chat(model="m", messages=HI, temperature=0.5, top_p=1, max_tokens=20)
    assert isinstance(reply, ChatCompletion)
    assert reply.choices[0].message.content == "Hello world"
    assert reply.usage.total_tokens == 5
    assert reply.system_fingerprint == "fp_1"  # extras are kept
    assert reply.meta.endpoint == "/v1/chat/completions" and reply.meta.request_id == "req-1"
    assert reply.meta.usage.total_tokens == 5 and reply.meta.latency > 0 and reply.meta.status == 200
    sent = fault.seen(gw.token)[0]
    assert sent.json() == {
        "model": "m",
        "messages": HI,
        "temperature": 0.5,
        "max_tokens": 20,
        "stream": False,
        "top_p": 1.0,
    }
    assert sent.headers["authorization"] == f"Bearer {KEY}"


def test_chat_stream_yields_fragments_then_the_whole_reply(make):
    stream = make("ok").chat("m", HI, stream=True)
    assert list(stream) == ["Hello", " world"]
    assert (stream.text, stream.finish_reason, stream.id) == ("Hello world", "stop", "chatcmpl-1")
    assert stream.usage.total_tokens == 5 and stream.meta.usage.total_tokens == 5
    completion = stream.completion()
    assert (
        completion.choices[0].message.content == "Hello world"
        and completion.choices[0].finish_reason == "stop"
    )
    assert list(stream) == []  # a stream is read once


def test_models(make):
    models = make("ok").models()
    assert models.ids == ["local-chat", "deep-thinker", "typed-reasoner", "plain"]
    assert "plain" in models and models[0].owned_by == "me"
    assert models[0].endpoints == ["/v1/chat/completions", "/v1/messages"] and models[3].endpoints is None


def test_native_messages(make):
    gw = make("ok")
    reply = gw.messages("m", HI, max_tokens=10)
    assert reply.text == "Hi there" and reply.usage == {"input_tokens": 3, "output_tokens": 2}  # as sent
    assert reply.meta.usage.model_dump() == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    stream = gw.messages("m", HI, stream=True)
    assert list(stream) == ["Hi", " there"]
    assert stream.finish_reason == "end_turn" and stream.usage == {"input_tokens": 3, "output_tokens": 2}
    assert stream.meta.usage.total_tokens == 5
    assert [e["type"] for e in stream.raw_events][:2] == ["message_start", "content_block_start"]


def test_generate_content_sends_the_key_in_the_vendor_header(make, fault):
    gw = make("ok")
    assert gw.generate_content("gem-1", "Say hello").text == "Bonjour"
    assert list(
        gw.generate_content("models/gem-1", [{"role": "user", "parts": [{"text": "hi"}]}], stream=True)
    ) == ["Bon", "jour"]
    first, second = fault.seen(gw.token)
    assert first.path == "/v1beta/models/gem-1:generateContent"
    assert second.path == "/v1beta/models/gem-1:streamGenerateContent?alt=sse"
    assert first.headers["x-goog-api-key"] == KEY and "authorization" not in first.headers
    assert first.json() == {"contents": [{"role": "user", "parts": [{"text": "Say hello"}]}]}


def test_responses(make, fault):
    gw = make("ok")
    reply = gw.responses("deep-thinker", "What is six times seven?", effort="high")
    assert (reply.text, reply.reasoning) == ("Forty-two.", "Thought briefly.")
    assert reply.usage["total_tokens"] == 10
    assert fault.seen(gw.token)[0].json()["reasoning"] == {"effort": "high"}
    stream = gw.responses("deep-thinker", "q", stream=True)
    assert (
        list(stream) == ["Forty", "-two."]
        and stream.reasoning == "Thought."
        and stream.finish_reason == "stop"
    )


def test_image_media_from_b64_and_urls_with_the_key_only_on_the_gateway_host(make, fault):
    gw = make("ok")
    result = gw.image("img", "a cat", size="256x256")
    inline, same_host, other_host = result.images
    assert inline.data == PNG and inline.mime == "image/png" and inline.url is None
    assert not same_host.loaded
    assert same_host.data == PNG and same_host.mime == "image/png"  # sniffed: the server said octet-stream
    assert other_host.data == PNG
    fetches = {
        r.path: r.headers.get("authorization") for r in fault.seen(gw.token) if r.path.startswith("/files/")
    }
    assert fetches == {"/files/img.png": f"Bearer {KEY}", "/files/open.png": None}


def test_speech_format_is_sniffed(make, tmp_path):
    gw = make("ok")
    wav = gw.speech("tts", "alloy", "Hello")
    assert (wav.format, wav.mime) == ("wav", "audio/wav")
    mp3 = gw.speech("tts", "alloy", "Hello", response_format="mp3")
    assert mp3.format == "mp3" and mp3.save(tmp_path / "a.mp3").read_bytes() == mp3.data


def test_jobs_imagine_music_video(make, fault):
    gw = make("ok")
    seen = []
    job = gw.imagine(
        "a castle --ar 16:9",
        wait=True,
        on_progress=lambda j: seen.append((j.status, j.progress)),
        interval=0.01,
    )
    assert seen == [("running", 40.0), ("succeeded", 100.0)]
    assert (job.kind, job.id, job.status, job.error) == ("imagine", "task-1", "succeeded", None)
    assert [m.data for m in job.media] == [PNG]
    song = gw.music("a tune", style="jazz", wait=True, interval=0.01)
    assert song.status == "succeeded" and song.media[0].url.endswith("/files/song.mp3")
    video = gw.video("vid", "waves")
    assert (video.id, video.status, video.progress) == ("video_1", "queued", 0.0)
    polled = gw.job("video_1", kind="video")
    assert polled.status == "running" and polled.progress == 50.0
    done = gw.wait(polled, interval=0.01)
    assert done.media[0].data == MP4
    content = [r for r in fault.seen(gw.token) if r.path.endswith("/content")][0]
    assert content.headers["authorization"] == f"Bearer {KEY}"


def test_job_failures(make):
    gw = make("ok")
    with pytest.raises(JobError, match="failed: banned prompt") as failed:
        gw.imagine("fail", wait=True, interval=0.01)
    assert failed.value.job.status == "failed"
    with pytest.raises(JobError, match="queue full"):
        gw.imagine("full")
    pending = gw.imagine("slow")
    with pytest.raises(JobError, match="did not finish within"):
        gw.wait(pending, timeout=0.001, interval=0.001)


def test_unknown_job_shape_is_kept_raw(make):
    gw = make("ok", job_paths=JobPaths(imagine_fetch="/odd/fetch/{id}"))
    job = gw.job("x1", kind="imagine")
    assert job.status == "running" and job.raw == {"state": "weird-state", "percent": 3} and job.media == []


# -- validation before sending ----------------------------------------------------------


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda gw: gw.chat("m", HI, temperature=2.5), r"temperature: must be between 0 and 2, got 2\.5"),
        (lambda gw: gw.chat("m", HI, top_p=-0.1), r"top_p: must be between 0 and 1"),
        (
            lambda gw: gw.chat("m", [{"role": "robot", "content": "x"}]),
            r"messages\.0\.role: must be one of system, user, assistant",
        ),
        (lambda gw: gw.chat("m", []), r"messages: must not be empty"),
        (lambda gw: gw.image("i", "cat", size="big"), r"size: must look like WIDTHxHEIGHT"),
        (lambda gw: gw.image("i", "   "), r"prompt: must not be empty"),
        (lambda gw: gw.speech("t", "alloy", ""), r"input: must not be empty"),
        (lambda gw: gw.responses("r", ""), r"input: must not be empty"),
        (lambda gw: gw.generate_content("", "x"), r"model: must not be empty"),
        (lambda gw: gw.job("1", kind="painting"), r"kind: must be one of imagine, music, video"),
        (lambda gw: gw.job("..", kind="video"), r"id: not a job id"),
    ],
)
def test_bad_input_fails_before_any_request(make, fault, call, message):
    gw = make("ok")
    with pytest.raises(InvalidRequest, match=message) as caught:
        call(gw)
    assert "\n" not in str(caught.value)
    assert fault.seen(gw.token) == []


def test_a_huge_value_is_echoed_cut_short(make, fault):
    gw = make("ok")
    prompt = "Summarise this: " + "lorem ipsum " * 1700  # about 20 KB, passed where temperature goes
    with pytest.raises(InvalidRequest) as caught:
        gw.chat("m", HI, prompt)
    assert str(caught.value) == (
        "temperature: input should be a valid number, unable to parse string as a number, "
        f"got {repr(prompt)[:80]}… ({len(repr(prompt)):,} characters)"
    )
    assert fault.seen(gw.token) == []


@pytest.mark.parametrize(
    "value, shown",
    [
        ("short", "'short'"),
        ("x" * 78, repr("x" * 78)),  # 80 characters with its quotes: whole
        ("x" * 79, f"'{'x' * 79}… (81 characters)"),
        (list(range(40)), f"{repr(list(range(40)))[:80]}… (150 characters)"),
        (
            functools.reduce(lambda inner, _: [inner], range(100_000), []),
            "[[[[[[[...]]]]]]]",
        ),  # too deep for repr
    ],
)
def test_an_echoed_value_is_at_most_80_characters_and_says_how_long_it_was(value, shown):
    assert echo(value) == shown


def test_config(monkeypatch):
    for name in ("GATECELL_BASE_URL", "OPENAI_BASE_URL", "GATECELL_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://o:1/v1/")
    monkeypatch.setenv("GATECELL_BASE_URL", "http://g:2/v1")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with Gateway() as gw:
        assert gw.base_url == "http://g:2" and gw.api_key.reveal() == KEY
    with Gateway("http://explicit:3", "sk-other-key-123456") as gw:
        assert gw.base_url == "http://explicit:3" and gw.api_key.reveal() == "sk-other-key-123456"


def test_numbers_come_from_the_environment_when_not_given(make, fault, monkeypatch):
    monkeypatch.setenv("GATECELL_MAX_RETRIES", "0")
    monkeypatch.setenv("GATECELL_STREAM_IDLE_TIMEOUT", "0.3")
    gw = make("500always")
    with pytest.raises(ServerError):
        gw.chat("m", HI)
    assert len(fault.seen(gw.token)) == 1
    assert gw.options.stream_idle_timeout == 5.0  # an explicit argument wins over the environment
    quiet = Gateway(f"{fault.url}/s/silent/x", KEY)
    assert quiet.options.stream_idle_timeout == 0.3 and quiet.options.retry.max_retries == 0
    quiet.close()
    monkeypatch.setenv("GATECELL_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match="^GATECELL_TIMEOUT must be a non-negative number, got 'soon'$"):
        Gateway(fault.url, KEY)


# -- retries ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scenario, wait", [("429s", 0.05), ("429ms", 0.03), ("429date", 0.0), ("429long", 0.2)]
)
def test_rate_limits_wait_what_the_gateway_asks_up_to_the_cap(make, fault, caplog, scenario, wait):
    caplog.set_level(logging.INFO, logger="gatecell")
    gw = make(scenario)
    assert gw.chat("m", HI).text == "Hello world"
    assert retry_waits(caplog) == [wait]
    assert len(fault.seen(gw.token)) == 2


def test_5xx_then_success_with_backoff(make, fault, caplog):
    caplog.set_level(logging.INFO, logger="gatecell")
    gw = make("5xx", backoff=0.01)
    reply = gw.chat("m", HI)
    assert reply.text == "Hello world" and reply.meta.attempts == 3
    first, second = retry_waits(caplog)
    assert 0.0075 <= first <= 0.01 and 0.015 <= second <= 0.02  # exponential, jittered down by at most 25%


def test_retries_are_bounded(make, fault):
    gw = make("500always")
    with pytest.raises(ServerError, match=r"^500 from POST /v1/chat/completions: try again \(3\)$"):
        gw.chat("m", HI)
    assert len(fault.seen(gw.token)) == 3
    once = make("429always", max_retries=0)
    with pytest.raises(RateLimitError) as caught:
        once.chat("m", HI)
    assert caught.value.retry_after == 0.0 and len(fault.seen(once.token)) == 1


def test_client_errors_are_not_retried(make, fault):
    gw = make("400")
    with pytest.raises(BadRequestError):
        gw.chat("m", HI)
    assert len(fault.seen(gw.token)) == 1


def test_connection_refused_is_retried_then_raised(caplog):
    caplog.set_level(logging.INFO, logger="gatecell")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Gateway(f"http://127.0.0.1:{port}", KEY, backoff=0.001) as gw:
        with pytest.raises(
            APIConnectionError, match=r"^connection error from POST /v1/chat/completions: ConnectError"
        ):
            gw.chat("m", HI)
    assert len(retry_waits(caplog)) == 2


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_trickled_body_hits_the_whole_request_cap(make, fault, asynchronous):
    gw = make("trickle", asynchronous=asynchronous, request_timeout=0.3, max_retries=0)
    with pytest.raises(APITimeoutError, match=r"the whole request took longer than 0.3 s$"):
        if asynchronous:
            asyncio.run(_chat_then_close(gw))
        else:
            gw.chat("m", HI)
    assert len(fault.seen(gw.token)) == 1


async def _chat_then_close(gw: Any) -> Any:
    async with gw:
        return await gw.chat("m", HI)


# -- hostile streams --------------------------------------------------------------------


def test_a_cut_mid_stream_keeps_the_partial_text_and_is_not_retried(make, fault):
    gw = make("cut")
    stream = gw.chat("m", HI, stream=True)
    got = []
    with pytest.raises(StreamError) as caught:
        for fragment in stream:
            got.append(fragment)
    assert got == ["Hello", " world"] and stream.text == "Hello world"
    assert caught.value.partial_text == "Hello world"
    assert "broke mid-stream" in str(caught.value)
    assert len(fault.seen(gw.token)) == 1


def test_an_error_event_inside_the_stream(make):
    stream = make("stream-error").chat("m", HI, stream=True)
    with pytest.raises(StreamError) as caught:
        list(stream)
    assert caught.value.partial_text == "Partial" == stream.text
    assert caught.value.code == "overloaded"
    assert str(caught.value) == "stream error from POST /v1/chat/completions: upstream overloaded"


@pytest.mark.parametrize("scenario, partial", [("keepalive", ""), ("keepalive-after", "Hello")])
def test_keepalives_for_ever_hit_the_idle_timeout(make, scenario, partial):
    stream = make(scenario, stream_idle_timeout=0.3).chat("m", HI, stream=True)
    with pytest.raises(StreamTimeoutError, match="keep-alives do not count") as caught:
        list(stream)
    assert isinstance(caught.value, APITimeoutError) and isinstance(caught.value, StreamError)
    assert caught.value.partial_text == partial


def test_a_silent_stream_hits_the_idle_timeout(make):
    stream = make("silent", stream_idle_timeout=0.2).chat("m", HI, stream=True)
    with pytest.raises(StreamTimeoutError):
        list(stream)


def test_malformed_lines_are_skipped(make, caplog):
    stream = make("malformed").chat("m", HI, stream=True)
    assert list(stream) == ["Hel", "lo", " \u2028wide"]
    assert stream.finish_reason == "stop"
    assert "not a JSON object: 'not json at all'" in caplog.text


def test_a_json_body_where_a_stream_was_asked(make):
    stream = make("json-for-stream").chat("m", HI, stream=True)
    assert list(stream) == ["Whole answer"]
    assert stream.finish_reason == "stop" and stream.usage.total_tokens == 5


def test_an_sse_body_where_json_was_asked(make):
    reply = make("sse-for-plain").chat("m", HI)
    assert (
        reply.text == "Hello world"
        and reply.choices[0].finish_reason == "stop"
        and reply.usage.total_tokens == 5
    )


@pytest.mark.parametrize("stream", [False, True])
def test_a_200_carrying_an_error(make, stream):
    with pytest.raises(
        APIError,
        match=r"^200 from POST /v1/chat/completions: no channel for model under group default "
        r"\(request id rid-200\)$",
    ) as caught:
        make("error200").chat("m", HI, stream=stream)
    assert caught.value.code == "model_not_found"


def test_native_error_shapes_and_non_json_bodies(make):
    gw = make("native-errors")
    with pytest.raises(BadRequestError, match="max_tokens too large"):
        gw.messages("m", HI)
    with pytest.raises(NotFoundError, match="models/nope is not found") as caught:
        gw.generate_content("nope", "x")
    assert caught.value.type == "NOT_FOUND"
    with pytest.raises(
        ServerError, match=r"^502 from GET /v1/models: <html><body>Bad Gateway</body></html>$"
    ):
        make("not-json", max_retries=0).models()


def test_interrupting_iteration_closes_the_connection_and_keeps_the_text(make):
    stream = make("keepalive-after").chat("m", HI, stream=True)
    with pytest.raises(KeyboardInterrupt):
        with stream:
            for _fragment in stream:
                raise KeyboardInterrupt
    assert stream.text == "Hello"
    assert stream._response.is_closed


def test_an_auth_error_names_the_key_settings(make):
    gw = make("ok")
    gw.api_key = None
    with pytest.raises(AuthenticationError, match="Check the API key"):
        gw.chat("m", HI)


# -- reasoning models -------------------------------------------------------------------


def test_refusal_on_chat_completions_retries_once_through_responses_and_remembers(make, fault):
    gw = make("reasoner")
    reply = gw.chat("deep-thinker", [{"role": "system", "content": "Think."}, *HI])
    assert isinstance(reply, ChatCompletion)
    assert reply.text == "Forty-two." and reply.choices[0].message.reasoning_content == "Thought briefly."
    assert reply.usage.total_tokens == 10 and reply.meta.endpoint == "/v1/responses"
    stream = gw.chat("deep-thinker", HI, stream=True)
    assert list(stream) == ["Forty", "-two."] and stream.finish_reason == "stop"
    assert paths(fault, gw) == ["POST /v1/chat/completions", "POST /v1/responses", "POST /v1/responses"]
    sent = fault.seen(gw.token)[1].json()
    assert sent["instructions"] == "Think." and sent["input"] == "hi"


def test_model_list_and_patterns_route_without_a_refusal(make, fault):
    gw = make("ok")
    gw.models()
    assert gw.chat("typed-reasoner", HI).text == "Forty-two."
    patterned = make("ok", reasoning_patterns=["*-thinker"])
    assert patterned.chat("deep-thinker", HI).text == "Forty-two."
    assert paths(fault, gw) == ["GET /v1/models", "POST /v1/responses"]
    assert paths(fault, patterned) == ["POST /v1/responses"]
