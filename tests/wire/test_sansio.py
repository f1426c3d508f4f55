"""The sans-IO decisions, without a network: retry waits, routing, job shapes, media sniffing;
and the request programs themselves, fed made-up responses: the requests they yield for
retries, Retry-After, the chat→responses fallback, job polling and redirects."""

from __future__ import annotations

import json as pyjson
import re
from collections.abc import Iterator
from email.utils import formatdate
from typing import Any

import pytest
from recording import recording

from gatecell.gateway import Gateway
from gatecell.wire.apis.conversation import to_responses
from gatecell.wire.apis.jobs import JobPaths, job_state, submitted_id
from gatecell.wire.apis.routing import Router, to_chat
from gatecell.wire.apis.spec import usage_of
from gatecell.wire.calls import JSON_CAP, MEDIA_CAP, Options
from gatecell.wire.endpoints import Programs
from gatecell.wire.transport._sse import DONE, EventTooLarge, SSEParser, encode
from gatecell.wire.transport.errors import (
    APIConnectionError,
    APIError,
    BadRequestError,
    ConfigError,
    InvalidRequest,
    JobError,
    ServerError,
    StreamError,
    error_message,
)
from gatecell.wire.transport.exchange import Call, Command, Read, RetryPolicy, Send, Sleep
from gatecell.wire.transport.http import Headers, Response, TransportError, request_id_of, retry_after
from gatecell.wire.transport.results import Audio, ModelList, Reply, sniff
from gatecell.wire.util.secret import redact

NOW = 1_700_000_000.0


def test_retry_after_forms():
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after": "0.25"}) == 0.25
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5  # ms wins
    assert retry_after({"retry-after": formatdate(NOW + 30, usegmt=True)}, now=NOW) == pytest.approx(
        30, abs=1
    )
    assert retry_after({"retry-after": formatdate(NOW - 30, usegmt=True)}, now=NOW) == 0.0
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None


def test_backoff_is_exponential_jittered_and_capped():
    policy = RetryPolicy(base=0.5, cap=8.0, retry_after_cap=60)
    for attempt, full in [(0, 0.5), (1, 1.0), (2, 2.0), (5, 8.0), (9, 8.0)]:
        delays = {policy.delay(attempt) for _ in range(50)}
        assert all(0.75 * full <= d <= full for d in delays)
        assert len(delays) > 1  # jitter
    assert policy.delay(0, {"retry-after": "3"}) == 3.0
    assert policy.delay(0, {"retry-after": "3600"}) == 60  # honoured up to the cap
    assert [s for s in (400, 401, 404, 408, 409, 413, 429, 500, 502, 503) if policy.retryable(s)] == [
        408,
        409,
        429,
        500,
        502,
        503,
    ]


def test_router_patterns_metadata_and_refusals():
    router = Router()
    assert router.wants_responses("o3-pro-2025-06-10")
    assert router.wants_responses("O4-MINI-DEEP-RESEARCH")
    assert not router.wants_responses("gpt-4o-mini")
    assert not router.wants_responses("gemini-2.5-pro")
    custom = Router(["*-thinker", re.compile(r"^r\d$")])
    assert (
        custom.wants_responses("deep-thinker")
        and custom.wants_responses("r1")
        and not custom.wants_responses("o3-pro")
    )

    models = ModelList.from_body(
        {
            "data": [
                {"id": "a", "supported_endpoints": ["/v1/responses"]},
                {"id": "b", "supported_endpoint_types": ["openai-response"]},
                {"id": "c", "supported_endpoint_types": ["openai", "openai-response"]},
                {"id": "o3-pro", "supported_endpoints": ["/v1/chat/completions"]},  # the gateway knows better
                {"id": "d"},
            ]
        }
    )
    router.learn(models)
    assert [m for m in ("a", "b", "c", "o3-pro", "d") if router.wants_responses(m)] == ["a", "b"]
    router.remember("d")
    assert router.wants_responses("d")

    refusal = BadRequestError(
        "This model is only supported in v1/responses and not in v1/chat/completions.", status=400
    )
    assert Router.is_refusal(refusal)
    assert not Router.is_refusal(BadRequestError("temperature must be at most 2", status=400))
    assert not Router.is_refusal(APIError("use v1/responses", status=500))


def test_chat_request_as_responses_and_back():
    body = to_responses(
        {
            "model": "m",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
            "max_tokens": 50,
            "temperature": 1.0,
            "reasoning_effort": "high",
        }
    )
    assert body == {
        "model": "m",
        "temperature": 1.0,
        "instructions": "Be brief.",
        "input": "Hi",
        "max_output_tokens": 50,
        "reasoning": {"effort": "high"},
    }
    turns = to_responses(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": "b"},
                {"role": "user", "content": "c"},
            ],
        }
    )
    assert turns["input"] == [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    chat = to_chat(
        {
            "id": "r",
            "status": "completed",
            "created_at": 5.5,
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "x"}]}],
            "usage": {"input_tokens": 1, "output_tokens": 2},
        },
        "m",
    )
    assert chat["choices"][0]["message"] == {"role": "assistant", "content": "x"}
    assert chat["usage"].model_dump() == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    assert chat["created"] == 5 and chat["model"] == "m"


PATHS = JobPaths()


@pytest.mark.parametrize(
    "body, status, progress, error",
    [
        ({"id": "t", "status": "NOT_START", "progress": "0%"}, "queued", 0.0, None),
        ({"id": "t", "status": "IN_PROGRESS", "progress": "45%"}, "running", 45.0, None),
        ({"id": "t", "status": "FAILURE", "failReason": "banned prompt"}, "failed", None, "banned prompt"),
        (
            {
                "code": "success",
                "data": {
                    "task_id": "t",
                    "status": "SUCCESS",
                    "progress": "100%",
                    "data": [{"audio_url": "u"}],
                },
            },
            "succeeded",
            100.0,
            None,
        ),
        ({"code": "error", "message": "task not found"}, "failed", None, "task not found"),
        ({"id": "t", "object": "video", "status": "in_progress", "progress": 30}, "running", 30.0, None),
        (
            {"id": "t", "object": "video", "status": "failed", "error": {"message": "moderation"}},
            "failed",
            None,
            "moderation",
        ),
        ({"state": "something-new"}, "running", None, None),
        ("not even json", "queued", None, None),
    ],
)
def test_job_shapes(body, status, progress, error):
    job = job_state("video", "t", body, PATHS)
    assert (job.status, job.progress, job.error, job.raw) == (status, progress, error, body)


def test_job_media_urls_and_ids():
    assert job_state(
        "imagine", "t", {"status": "SUCCESS", "imageUrl": "http://x/i.png"}, PATHS
    ).media_urls == [("http://x/i.png", None)]
    assert job_state("video", "v1", {"status": "completed"}, PATHS).media_urls == [
        ("/v1/videos/v1/content", "video/mp4")
    ]
    custom = JobPaths(video_content="/content/{id}.mp4", music_fetch="/m/{id}")
    assert job_state("video", "v1", {"status": "completed"}, custom).media_urls == [
        ("/content/v1.mp4", "video/mp4")
    ]
    assert custom.fetch("music", "42") == "/m/42" and custom.submit("imagine") == "/imgjob/submit/imagine"
    assert submitted_id("imagine", {"code": 1, "result": "123"}) == "123"
    assert submitted_id("imagine", {"code": 22, "result": "124", "description": "in queue"}) == "124"
    assert submitted_id("music", {"code": "success", "data": "m9"}) == "m9"
    assert submitted_id("video", {"id": "video_7", "status": "queued"}) == "video_7"
    with pytest.raises(JobError, match=r"code 23\): queue full"):
        submitted_id("imagine", {"code": 23, "description": "queue full", "result": None})
    with pytest.raises(JobError, match="quota exhausted"):
        submitted_id("music", {"code": "fail", "message": "quota exhausted", "data": None})
    with pytest.raises(JobError, match="without a task id"):
        submitted_id("video", {"object": "video"})


@pytest.mark.parametrize(
    "data, fmt",
    [
        (b"RIFF\0\0\0\0WAVEfmt ", "wav"),
        (b"ID3\x04\0", "mp3"),
        (b"\xff\xfb\x90\x00", "mp3"),
        (b"\xff\xf1\x50\x80", "aac"),
        (b"OggS\0\x02", "ogg"),
        (b"fLaC\0\0", "flac"),
        (b"\x89PNG\r\n", "png"),
        (b"\0\0\0\x18ftypmp42", "mp4"),
        (b"hello", None),
    ],
)
def test_sniff(data, fmt):
    assert (sniff(data) or (None,))[0] == fmt


def test_audio_format_prefers_bytes_then_content_type_then_request():
    assert Audio(b"fLaC\0", "audio/mpeg").format == "flac"  # the header lies; the bytes do not
    assert Audio(b"\0\0raw", "audio/wav").format == "wav"
    assert Audio(b"\0\0raw", "application/octet-stream", requested="pcm").format == "pcm"
    assert Audio(b"\0\0raw", None).mime == "application/octet-stream"


def test_reply_recognises_the_native_shapes_and_keeps_the_rest_raw():
    messages = Reply(
        {
            "type": "message",
            "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Hi"}],
            "usage": {"input_tokens": 1},
        }
    )
    assert (messages.text, messages.reasoning, messages.usage) == ("Hi", "hmm", {"input_tokens": 1})
    gc = Reply(
        {
            "candidates": [
                {"content": {"parts": [{"text": "plan", "thought": True}, {"text": "Bon"}, {"text": "jour"}]}}
            ],
            "usageMetadata": {"totalTokenCount": 3},
        }
    )
    assert (gc.text, gc.reasoning, gc.usage) == ("Bonjour", "plan", {"totalTokenCount": 3})
    odd = Reply({"result": {"weird": True}})
    assert (odd.text, odd.reasoning, odd.usage, odd.raw) == (None, None, None, {"result": {"weird": True}})


# -- the request programs, stepped by hand: no server, made-up responses ----------------

BASE = "http://gw.test"
KEY = "sk-test-programs-0123456789abcdef"
HI = [{"role": "user", "content": "hi"}]
COMPLETION = {
    "id": "c1",
    "object": "chat.completion",
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
RESPONSES_REPLY = {
    "id": "r1",
    "status": "completed",
    "model": "thinker",
    "output": [{"type": "message", "content": [{"type": "output_text", "text": "Forty-two."}]}],
    "usage": {"input_tokens": 4, "output_tokens": 6},
}
REFUSAL = {
    "error": {"message": "This model is only supported in v1/responses and not in v1/chat/completions."}
}


def programs(*, reasoning_patterns: Any = None, **options: Any) -> Programs:
    """Endpoints whose methods hand back their request program instead of running it, and
    which keep every outcome they are told of (in ``.outcomes``)."""
    made = Programs(BASE, KEY, options=Options.resolve(**options), reasoning_patterns=reasoning_patterns)
    made.outcomes = recording(made).outcomes  # type: ignore[attr-defined]
    return made


@pytest.fixture
def gw() -> Programs:
    return programs()


class Unread:
    """A body still on its connection, as a driver hands it over."""

    def __init__(self, content: bytes) -> None:
        self.content = content

    def __iter__(self) -> Iterator[bytes]:
        yield self.content

    def close(self) -> None:
        pass


def answer(
    command: Command,
    status: int = 200,
    json: Any = None,
    headers: dict | None = None,
    content: bytes = b"",
    *,
    unread: bool = False,
) -> Response:
    """A made-up response to the `Send` ``command`` (its body already read, unless ``unread``)."""
    assert isinstance(command, Send), command
    fields = dict(headers or {})
    if json is not None:
        content = pyjson.dumps(json).encode()
        fields.setdefault("content-type", "application/json")
    if unread:
        return Response(status, Headers(fields), command.request, body=Unread(content))  # type: ignore[arg-type]
    return Response(status, Headers(fields), command.request, content=content)


def finish(program: Any, value: Any) -> Any:
    """Send the last result; the program must return now. Its return value."""
    with pytest.raises(StopIteration) as done:
        program.send(value)
    return done.value.value


def sent(command: Command) -> tuple[str, str, Any]:
    assert isinstance(command, Send), command
    request = command.request
    return request.method, request.url, pyjson.loads(request.body) if request.body else None


def test_retries_wait_the_backoff_then_what_the_gateway_asks_then_give_up(gw):
    program = gw.chat("m", HI)
    first = next(program)
    assert sent(first) == (
        "POST",
        f"{BASE}/v1/chat/completions",
        {"model": "m", "messages": HI, "stream": False},
    )
    wait = program.send(answer(first, 503, {"error": {"message": "busy"}}))
    assert isinstance(wait, Sleep) and 0.375 <= wait.seconds <= 0.5  # backoff 0.5 s, jittered down
    second = program.send(None)
    assert sent(second) == sent(first)
    wait = program.send(answer(second, 429, {"error": {"message": "slow down"}}, {"retry-after": "2"}))
    assert isinstance(wait, Sleep) and wait.seconds == 2.0
    third = program.send(None)
    with pytest.raises(ServerError, match=r"^500 from POST /v1/chat/completions: down$"):
        program.send(answer(third, 500, {"error": {"message": "down"}}))  # max_retries=2: given up
    assert [type(o.error).__name__ for o in gw.outcomes] == ["ServerError"]


def test_connection_errors_are_retried_and_client_errors_are_not(gw):
    program = gw.models()
    for attempt in range(2):
        assert isinstance(next(program) if attempt == 0 else program.send(None), Send)
        wait = program.throw(TransportError("ConnectError: refused", kind="ConnectError"))
        assert isinstance(wait, Sleep)
    assert isinstance(program.send(None), Send)
    with pytest.raises(
        APIConnectionError, match=r"^connection error from GET /v1/models: ConnectError: refused$"
    ):
        program.throw(TransportError("ConnectError: refused", kind="ConnectError"))
    program = gw.chat("m", HI)
    with pytest.raises(BadRequestError):
        program.send(answer(next(program), 400, {"error": {"message": "bad"}}))


def test_a_refusal_on_chat_goes_to_responses_once_and_is_remembered(gw):
    program = gw.chat("thinker", [{"role": "system", "content": "Think."}, *HI], max_tokens=50)
    chat = next(program)
    retry = program.send(answer(chat, 400, REFUSAL))
    assert sent(retry) == (
        "POST",
        f"{BASE}/v1/responses",
        {
            "model": "thinker",
            "stream": False,
            "input": "hi",
            "instructions": "Think.",
            "max_output_tokens": 50,
        },
    )
    completion = finish(program, answer(retry, 200, RESPONSES_REPLY))
    assert completion.text == "Forty-two." and completion.meta.endpoint == "/v1/responses"
    assert completion.usage.total_tokens == 10
    again = gw.chat("thinker", HI)
    assert sent(next(again))[1] == f"{BASE}/v1/responses"  # no second refusal needed
    assert [(o.call.path, type(o.error).__name__) for o in gw.outcomes] == [
        ("/v1/chat/completions", "BadRequestError"),
        ("/v1/responses", "NoneType"),
    ]


def test_waiting_for_a_job_polls_until_it_is_done(gw):
    seen = []
    program = gw.imagine("a castle", wait=True, interval=0.25, on_progress=lambda j: seen.append(j.status))
    submit = next(program)
    assert sent(submit) == ("POST", f"{BASE}/imgjob/submit/imagine", {"prompt": "a castle"})
    wait = program.send(answer(submit, 200, {"code": 1, "result": "t1"}))
    assert isinstance(wait, Sleep) and wait.seconds == 0.25
    poll = program.send(None)
    assert sent(poll) == ("GET", f"{BASE}/imgjob/task/t1/fetch", None)
    assert isinstance(program.send(answer(poll, 200, {"status": "IN_PROGRESS", "progress": "40%"})), Sleep)
    poll = program.send(None)
    job = finish(program, answer(poll, 200, {"status": "SUCCESS", "imageUrl": f"{BASE}/files/a.png"}))
    assert (job.status, job.media_urls, seen) == (
        "succeeded",
        [(f"{BASE}/files/a.png", None)],
        ["running", "succeeded"],
    )
    assert [o.call.path for o in gw.outcomes] == ["/imgjob/submit/imagine", *["/imgjob/task/t1/fetch"] * 2]


def test_a_job_that_runs_out_of_time(gw):
    program = gw.video("v", "waves", wait=True, timeout=0)
    with pytest.raises(JobError, match=r"^video job v1 did not finish within 0 s"):
        program.send(answer(next(program), 200, {"id": "v1", "status": "queued"}))


# -- redirects ---------------------------------------------------------------------------


def test_a_same_origin_redirect_is_followed_with_the_body_and_the_key(gw):
    program = gw.chat("m", HI)
    first = next(program)
    second = program.send(answer(first, 307, headers={"location": "/v2/chat"}))
    assert sent(second) == ("POST", f"{BASE}/v2/chat", sent(first)[2])
    assert second.request.headers["authorization"] == f"Bearer {KEY}"
    assert finish(program, answer(second, 200, COMPLETION)).text == "Hello"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_request_with_a_body_never_goes_to_another_origin(gw, status):
    program = gw.chat("m", HI)
    with pytest.raises(
        APIError,
        match=rf"^{status} from POST /v1/chat/completions: redirect to "
        r"'http://evil\.test/collect' not followed: another origin",
    ):
        program.send(answer(next(program), status, headers={"location": "http://evil.test/collect"}))


@pytest.mark.parametrize(
    "location, why",
    [
        ("file:///etc/passwd", "not an http(s) address"),
        ("http://:8080/x", "not an http(s) address"),
        ("\x01nowhere", "not a valid address"),
        (
            f"http://evil.test/?k={KEY.upper()}",
            "another origin, and the request's body goes to its own gateway only",
        ),
    ],
)
def test_a_redirect_that_is_refused_says_why_in_one_line_without_the_key(gw, location, why):
    program = gw.chat("m", HI)
    with pytest.raises(APIError) as caught:
        program.send(answer(next(program), 307, headers={"location": location}))
    message = str(caught.value)
    assert message.endswith(f"not followed: {why}") and "\n" not in message
    assert KEY.lower() not in message.lower()


def test_a_body_less_request_follows_to_another_origin_without_any_credential(gw):
    program = gw.models()
    second = program.send(answer(next(program), 302, headers={"location": "http://mirror.test/models"}))
    assert sent(second) == ("GET", "http://mirror.test/models", None)
    assert not set(second.request.headers) & {"authorization", "x-goog-api-key", "cookie"}
    assert finish(program, answer(second, 200, {"data": [{"id": "a"}]})).ids == ["a"]


def test_303_continues_with_a_get_and_an_https_upgrade_is_the_same_origin(gw):
    program = gw.image("i", "a cat")
    see_other = program.send(answer(next(program), 303, headers={"location": "/result/1"}))
    assert sent(see_other) == ("GET", f"{BASE}/result/1", None)
    assert "content-type" not in see_other.request.headers
    upgrade = gw.generate_content("g", "x")
    first = next(upgrade)
    second = upgrade.send(
        answer(first, 308, headers={"location": "https://gw.test/v1beta/models/g:generateContent"})
    )
    assert sent(second)[1:] == ("https://gw.test/v1beta/models/g:generateContent", sent(first)[2])
    assert second.request.headers["x-goog-api-key"] == KEY and "authorization" not in second.request.headers


def test_a_streamed_redirect_is_read_before_the_next_send_and_loops_end(gw):
    program = gw.chat("m", HI, stream=True)
    send = next(program)
    for hop in range(10):
        read = program.send(answer(send, 302, headers={"location": f"/hop/{hop}"}, unread=True))
        assert isinstance(read, Read)
        send = program.send(None)
        assert sent(send)[1] == f"{BASE}/hop/{hop}"
    assert isinstance(program.send(answer(send, 302, headers={"location": "/again"}, unread=True)), Read)
    with pytest.raises(APIError, match="not followed: more than 10 redirects"):
        program.send(None)


# -- what goes in a request ---------------------------------------------------------------


def test_stream_usage_is_asked_for_only_when_chosen(monkeypatch):
    def body(**options: Any) -> Any:
        return sent(next(programs(**options).chat("m", HI, stream=True)))[2]

    assert "stream_options" not in body()
    assert body(stream_usage=True)["stream_options"] == {"include_usage": True}
    monkeypatch.setenv("GATECELL_STREAM_USAGE", "yes")
    assert body()["stream_options"] == {"include_usage": True}
    assert "stream_options" not in body(stream_usage=False)
    # a reasoning model's stream goes to /v1/responses, which has no stream_options
    assert "stream_options" not in body(reasoning_patterns=["m"])
    monkeypatch.setenv("GATECELL_STREAM_USAGE", "perhaps")
    with pytest.raises(ConfigError, match="^GATECELL_STREAM_USAGE must be one of 1, true"):
        programs()


def test_known_fields_and_extra_body_travel_in_the_body(gw):
    command = next(gw.chat("m", HI, seed=7, stop=["\n"], extra_body={"x_vendor": {"a": 1}}))
    assert sent(command)[2] == {
        "model": "m",
        "messages": HI,
        "stream": False,
        "seed": 7,
        "stop": ["\n"],
        "x_vendor": {"a": 1},
    }
    speech = next(gw.speech("tts", "alloy", "Hi", speed=1.5))
    assert sent(speech)[2] == {"model": "tts", "voice": "alloy", "input": "Hi", "speed": 1.5}


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda gw: gw.speech("t", "alloy", "Hi", format="mp3"),
            r"^format: not a parameter of speech\(\); did you mean response_format\?",
        ),
        (
            lambda gw: gw.chat("m", HI, temprature=0.5),
            r"^temprature: not a parameter of chat\(\); did you mean temperature\?",
        ),
        (lambda gw: gw.messages("m", HI, sytem="Be brief."), r"^sytem: .* did you mean system\?"),
        (
            lambda gw: gw.imagine("castle", wiat=True),
            r"^wiat: not a parameter of imagine\(\); did you mean wait\?",
        ),
        (lambda gw: gw.image("i", "cat", sise="64x64"), r"^sise: .* did you mean size\?"),
        (
            lambda gw: gw.chat("m", HI, timeout=5),
            r"^timeout: not a parameter of chat\(\); its parameters: model, messages",
        ),
    ],
)
def test_unknown_keyword_arguments_fail_before_sending(gw, call, message):
    with pytest.raises(InvalidRequest, match=message) as caught:
        call(gw)
    assert "\n" not in str(caught.value) and "extra_body={...}" in str(caught.value)
    assert gw.outcomes == []


CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "a"},
    {"role": "assistant", "content": "b"},
    {"role": "user", "content": "c"},
]
TURNS = CONVERSATION[1:]


@pytest.mark.parametrize(
    "api, url, body",
    [
        (
            "chat",
            "/v1/chat/completions",
            {
                "model": "m",
                "messages": CONVERSATION,
                "temperature": 0.5,
                "top_p": 0.9,
                "max_tokens": 20,
                "stream": False,
            },
        ),
        (
            "messages",
            "/v1/messages",
            {
                "model": "m",
                "messages": TURNS,
                "max_tokens": 20,
                "stream": False,
                "temperature": 0.5,
                "top_p": 0.9,
                "system": "Be brief.",
            },
        ),
        (
            "generate-content",
            "/v1beta/models/m:generateContent",
            {
                "contents": [
                    {"role": "user", "parts": [{"text": "a"}]},
                    {"role": "model", "parts": [{"text": "b"}]},
                    {"role": "user", "parts": [{"text": "c"}]},
                ],
                "generationConfig": {"temperature": 0.5, "topP": 0.9, "maxOutputTokens": 20},
                "systemInstruction": {"parts": [{"text": "Be brief."}]},
            },
        ),
        (
            "responses",
            "/v1/responses",
            {
                "model": "m",
                "input": TURNS,
                "instructions": "Be brief.",
                "max_output_tokens": 20,
                "temperature": 0.5,
                "top_p": 0.9,
                "stream": False,
                "reasoning": {"effort": "low"},
            },
        ),
    ],
)
def test_one_conversation_on_each_text_api(gw, api, url, body):
    effort = "low" if api == "responses" else None
    command = next(
        gw.converse(api, "m", CONVERSATION, temperature=0.5, top_p=0.9, max_tokens=20, effort=effort)
    )
    assert sent(command) == ("POST", BASE + url, body)


def test_a_lone_user_turn_is_the_responses_input_string_and_unknown_apis_fail(gw):
    command = next(gw.converse("responses", "m", HI, stream=True))
    assert sent(command)[2] == {"model": "m", "input": "hi", "stream": True}
    with pytest.raises(
        InvalidRequest, match=r"^api: must be one of chat, messages, generate-content, responses; got 'soap'$"
    ):
        gw.converse("soap", "m", HI)


def test_caps_by_kind_of_answer(monkeypatch):
    def caps(**options: Any) -> tuple[int, ...]:
        gw = programs(**options)
        calls = [
            Call("POST", "/v1/chat/completions"),
            Call("POST", "/v1/chat/completions", stream=True),
            Call("GET", "/f", media=True),
        ]
        return tuple(gw._build(call).max_bytes for call in calls)

    assert caps() == (JSON_CAP, JSON_CAP, MEDIA_CAP) == (64 * 2**20, 64 * 2**20, 512 * 2**20)
    assert caps(max_response_bytes=1000) == (1000, 1000, 1000)
    monkeypatch.setenv("GATECELL_MAX_RESPONSE_BYTES", "2e6")
    assert caps() == (2_000_000,) * 3
    monkeypatch.setenv("GATECELL_MAX_RESPONSE_BYTES", "1.5")
    with pytest.raises(
        ConfigError, match=r"^GATECELL_MAX_RESPONSE_BYTES must be a non-negative whole number, got '1.5'$"
    ):
        caps()


# -- outcomes ----------------------------------------------------------------------------


def test_every_call_reports_one_outcome_and_a_stream_when_it_ends(gw):
    program = gw.chat("m", HI)
    completion = finish(program, answer(next(program), 200, COMPLETION))
    (outcome,) = gw.outcomes
    assert outcome.result is completion and outcome.error is None and outcome.meta.status == 200
    assert pyjson.loads(outcome.call.body)["messages"] == HI and not outcome.partial

    events = (
        b"".join(
            encode(chunk)
            for chunk in (
                {"choices": [{"delta": {"content": "Hel"}}]},
                {"choices": [{"delta": {"content": "lo"}, "finish_reason": "stop"}]},
            )
        )
        + DONE
    )
    sse = {"content-type": "text/event-stream"}
    program = gw.chat("m", HI, stream=True)
    stream = finish(program, answer(next(program), 200, headers=sse, content=events))
    assert len(gw.outcomes) == 1  # not before the stream ends
    assert list(stream) == ["Hel", "lo"]
    assert gw.outcomes[-1].result is stream and gw.outcomes[-1].error is None and not gw.outcomes[-1].partial

    program = gw.chat("m", HI, stream=True)
    early = finish(program, answer(next(program), 200, headers=sse, content=events))
    for _ in early:
        break
    early.close()
    assert gw.outcomes[-1].result is early and gw.outcomes[-1].partial  # closed before its end

    program = gw.chat("m", HI, stream=True)
    cut = finish(
        program, answer(next(program), 200, headers=sse, content=events[: events.index(b"\n\n") + 2])
    )
    with pytest.raises(StreamError, match="ended before it finished"):
        cut.read()
    assert isinstance(gw.outcomes[-1].error, StreamError) and gw.outcomes[-1].partial
    assert len(gw.outcomes) == 4


# -- error bodies, request ids, usage, redaction ------------------------------------------


@pytest.mark.parametrize(
    "body, message",
    [
        ({"detail": "Not Found"}, "Not Found"),
        (
            {"detail": {"error": "Invalid model name passed in model=x"}},
            "Invalid model name passed in model=x",
        ),
        ({"detail": {"message": "quota exceeded", "code": 7}}, "quota exceeded"),
        (
            {
                "detail": [
                    {"loc": ["body", "model"], "msg": "Field required"},
                    {"loc": ["query", "n"], "msg": "not an int"},
                ]
            },
            "body.model: Field required; query.n: not an int",
        ),
        ({"error": {"message": "plain", "type": "x"}}, "plain"),
    ],
)
def test_error_bodies_read_as_one_line(body, message):
    assert error_message(body)[0] == message


def test_an_auth_shaped_400_gets_the_key_hint_and_request_ids_are_found(gw):
    program = gw.models()
    with pytest.raises(BadRequestError) as caught:
        program.send(
            answer(
                next(program),
                400,
                {"detail": "Authentication Error: invalid API key"},
                {"x-litellm-call-id": "call-9"},
            )
        )
    assert str(caught.value) == (
        "400 from GET /v1/models: Authentication Error: invalid API key (request id call-9). "
        "Check the API key (GATECELL_API_KEY or OPENAI_API_KEY)"
    )
    program = gw.models()
    with pytest.raises(BadRequestError) as plain:
        program.send(answer(next(program), 400, {"detail": "limit must be positive"}))
    assert plain.value.hint is None
    for header in ("x-litellm-call-id", "x-litellm-response-id", "apim-request-id"):
        assert request_id_of(Headers({header: "id-1"})) == "id-1"
    assert request_id_of(Headers({"x-litellm-response-id": "b", "x-request-id": "a"})) == "a"


@pytest.mark.parametrize(
    "raw, usage",
    [
        ({"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}, (1, 2, 3, None)),
        ({"input_tokens": 4, "output_tokens": 5}, (4, 5, 9, None)),
        (
            {
                "input_tokens": 4,
                "output_tokens": 6,
                "output_tokens_details": {"reasoning_tokens": 3},
                "total_tokens": 10,
            },
            (4, 6, 10, 3),
        ),
        (
            {"promptTokenCount": 2, "candidatesTokenCount": 1, "totalTokenCount": 5, "thoughtsTokenCount": 2},
            (2, 1, 5, 2),
        ),
        ({"weird": 1}, None),
        ("not usage", None),
        ({"prompt_tokens": "many"}, None),
    ],
)
def test_one_usage_type_for_every_shape(raw, usage):
    found = usage_of(raw)
    if usage is None:
        assert found is None
    else:
        details = getattr(found, "completion_tokens_details", None)
        reasoning = details["reasoning_tokens"] if details else None
        assert (found.prompt_tokens, found.completion_tokens, found.total_tokens, reasoning) == usage


def test_redaction_is_case_insensitive_and_stays_out_of_words():
    key = "sk-live-Abcdefgh12345678"
    assert redact(f"echo {key.upper()} and {key.lower()}", key) == "echo sk-…5678 and sk-…5678"
    assert redact("SK-OTHERKEYSHAPE999 and Sk-mixedCase0000") == "SK-…E999 and Sk-…0000"
    assert redact("task-abcdefghijkl and disk-usage-report") == "task-abcdefghijkl and disk-usage-report"


def test_the_sse_parser_caps_an_event_that_never_ends():
    parser = SSEParser(max_event=100)
    assert parser.feed(b"data: " + b"x" * 50) == []
    parser.feed(b"x" * 40)
    with pytest.raises(EventTooLarge):
        parser.feed(b"x" * 20)
    fine = SSEParser(max_event=100)
    assert [e.data for e in fine.feed(b"data: " + b"y" * 90 + b"\n\n" + b"data: z\n\n")] == ["y" * 90, "z"]


def test_a_media_url_httpx_cannot_use_is_a_one_line_error_before_any_connection():
    with Gateway("http://127.0.0.1:9", KEY) as gw:  # nothing listens there: nothing is reached
        media = gw._media_for("http://files.test/a\x00b.png", None)
        with pytest.raises(
            APIConnectionError, match=r"^connection error from GET http://files\.test/\S+: InvalidURL: "
        ):
            _ = media.data
