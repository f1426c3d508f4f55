"""What a hostile or careless gateway cannot do to the client (issue 9, items 8, 13, 14):
fill its memory, pull the prompt or the key to another host, or get the key into a log.
Also what LiteLLM's proxy sends (request ids, FastAPI error bodies), and that every call,
sync or async, streamed or not, ends in one recorded outcome. All against the fault server."""

from __future__ import annotations

import asyncio
import logging
import re
import tracemalloc
import uuid
from typing import Any

import pytest
from fault_server import KEY
from recording import recording

from gatecell.gateway import AsyncGateway, Gateway
from gatecell.wire.calls import Outcome
from gatecell.wire.transport.errors import (
    APIError,
    AuthenticationError,
    BadRequestError,
    InvalidRequest,
    NotFoundError,
    ResponseTooLargeError,
    StreamError,
    StreamTooLargeError,
)
from gatecell.wire.util import secret

HI = [{"role": "user", "content": "hi"}]
CAP = 2**20  # 1 MiB for these tests
MESSAGE = r"passed 1 MiB; raise max_response_bytes= or GATECELL_MAX_RESPONSE_BYTES to accept more$"


def _run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


# -- item 8: a cap on what a response may hold ---------------------------------------------


def test_an_endless_json_body_stops_at_the_cap_while_it_streams(make, fault):
    gw = make("huge-json", max_response_bytes=CAP, max_retries=0)
    tracemalloc.start()
    try:
        with pytest.raises(
            ResponseTooLargeError,
            match=r"^response too large from POST /v1/"
            r"images/generations: the body " + MESSAGE,
        ) as caught:
            gw.image("i", "a cat")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "\n" not in str(caught.value)
    # The body never ends, so raising at all means the cap held while it streamed; and what
    # the client held at its peak stayed within a few times the cap.
    assert peak < 4 * CAP
    assert len(fault.seen(gw.token)) == 1  # not retried


def test_a_declared_length_over_the_cap_is_refused_before_reading(make):
    # The server sends its head and then nothing: reading would end in the 10 s read
    # timeout, not in this error.
    gw = make("huge-declared", max_response_bytes=CAP, max_retries=0)
    with pytest.raises(ResponseTooLargeError, match=MESSAGE):
        gw.models()


def test_an_endless_stream_and_an_endless_line_stop_with_their_text(make):
    stream = make("huge-stream", max_response_bytes=CAP).chat("m", HI, stream=True)
    with pytest.raises(
        StreamTooLargeError,
        match=r"^stream too large from POST /v1/chat/completions: "
        r"the body " + MESSAGE,
    ) as caught:
        stream.read()
    assert isinstance(caught.value, ResponseTooLargeError) and isinstance(caught.value, StreamError)
    assert (
        caught.value.partial_text.startswith("more text more text")
        and stream.text == caught.value.partial_text
    )
    line = make("endless-line", max_response_bytes=CAP).chat("m", HI, stream=True)
    with pytest.raises(StreamTooLargeError, match=r": one event passed 512 KiB; raise max_response_bytes="):
        list(line)


def test_the_async_client_reads_through_the_same_caps(make):
    async def main() -> tuple[BaseException, BaseException]:
        async with make("huge-json", asynchronous=True, max_response_bytes=CAP, max_retries=0) as gw:
            with pytest.raises(ResponseTooLargeError) as body:
                await gw.image("i", "a cat")
        async with make("huge-stream", asynchronous=True, max_response_bytes=CAP) as gw:
            stream = await gw.chat("m", HI, stream=True)
            with pytest.raises(StreamTooLargeError) as streamed:
                await stream.aread()
        return body.value, streamed.value

    body, streamed = _run(main())
    assert re.search(MESSAGE, str(body)) and re.search(MESSAGE, str(streamed))


def test_the_cap_comes_from_the_environment(make, monkeypatch):
    monkeypatch.setenv("GATECELL_MAX_RESPONSE_BYTES", str(CAP))
    with Gateway(make("huge-json").base_url, KEY, max_retries=0) as gw:
        with pytest.raises(ResponseTooLargeError, match=MESSAGE):
            gw.image("i", "a cat")


def test_no_compression_is_asked_for_and_a_compressed_body_is_refused(make, fault):
    gw = make("compressed", max_retries=0)
    with pytest.raises(
        APIError,
        match=r"^200 from POST /v1/chat/completions: the body came "
        r"compressed \(gzip\) though the client asked for none",
    ):
        gw.chat("m", HI)
    assert fault.seen(gw.token)[0].headers["accept-encoding"] == "identity"


# -- item 13: redirects --------------------------------------------------------------------


def _ok_requests(fault, gw) -> list[Any]:
    return [r for r in fault.requests if r.token == gw.token and r.scenario == "ok"]


@pytest.mark.parametrize("scenario", ["redirect-other-307", "redirect-other-308", "redirect-other-302"])
def test_a_prompt_is_never_posted_to_another_origin(make, fault, scenario):
    gw = make(scenario)
    with pytest.raises(
        APIError, match=r"redirect to 'http://localhost:\d+/\S+' not followed: another origin"
    ):
        gw.chat("m", HI)
    with pytest.raises(APIError, match="not followed: another origin"):
        gw.generate_content("g", "x")
    assert _ok_requests(fault, gw) == []  # the other origin never heard of it


def test_a_same_origin_redirect_is_followed_with_its_body_and_key(make, fault):
    gw = make("redirect-same-307")
    assert gw.chat("m", HI).text == "Hello world"
    assert gw.generate_content("g", "Say hello").text == "Bonjour"
    chat, gc = _ok_requests(fault, gw)
    assert chat.json()["messages"] == HI and chat.headers["authorization"] == f"Bearer {KEY}"
    assert gc.headers["x-goog-api-key"] == KEY and "authorization" not in gc.headers


def test_a_get_to_another_origin_goes_without_the_key(make, fault):
    gw = make("redirect-other-302")
    with pytest.raises(AuthenticationError):  # the "ok" scenario wants the key it was not given
        gw.models()
    (followed,) = _ok_requests(fault, gw)
    assert followed.path == "/v1/models" and "authorization" not in followed.headers
    assert followed.host.startswith("localhost:")


# -- item 14: the key in no log line, in any case ------------------------------------------


def test_a_key_echoed_in_headers_and_upper_cased_shows_nowhere(make, caplog):
    caplog.set_level(logging.DEBUG)  # every logger: httpx and httpcore log response headers
    gw = make("echo-key-header")
    assert gw.chat("m", HI).text == "Hello world"
    with pytest.raises(AuthenticationError) as caught:
        gw.models()
    assert any("x-echo-key" in m for m in caplog.messages)  # the header lines were logged ...
    assert KEY.lower() not in caplog.text.lower()  # ... masked
    error = caught.value
    assert KEY.lower() not in f"{error} {error.body} {error.message}".lower()
    assert error.message == f"KEY {secret.Secret(KEY).masked} IS NOT VALID"


def test_the_log_filter_masks_arguments_children_and_stays_idle_when_logging_is_off(
    make, monkeypatch, caplog
):
    make("ok")  # a client installs the filter
    make("ok")  # ... once
    for name in secret.LOGGERS:
        assert sum(isinstance(f, type(secret._FILTER)) for f in logging.getLogger(name).filters) == 1
    caplog.set_level(logging.DEBUG)
    logging.getLogger("httpcore.http11").debug("headers %r", [(b"x-k", KEY.upper().encode())])
    logging.getLogger("gatecell").warning("key=%s other=%s", KEY, "sk-someotherkey1234")
    masked = secret.Secret(KEY).masked
    assert caplog.text.count(masked) == 2 and KEY.lower() not in caplog.text.lower()
    assert "sk-someotherkey1234" not in caplog.text
    calls = []
    monkeypatch.setattr(secret._FILTER, "filter", lambda record: calls.append(record) or True)
    caplog.set_level(logging.WARNING)
    logging.getLogger("httpcore.http11").debug("not enabled: %s", KEY)
    assert calls == []  # with DEBUG off the filter is never asked


# -- what LiteLLM's proxy sends ------------------------------------------------------------


def test_litellm_request_ids_and_fastapi_error_bodies(make):
    gw = make("litellm", max_retries=0)
    assert gw.chat("m", HI).meta.request_id == "call-1"  # then call-2: its /model/info, asked once
    with pytest.raises(APIError) as validation:
        gw.models()
    assert str(validation.value) == (
        "422 from GET /v1/models: query.limit: Input should be a valid integer; query.page: Field required "
        "(request id call-3)"
    )
    with pytest.raises(NotFoundError, match=r"^404 from POST /v1/messages: Not Found \(request id call-4\)$"):
        gw.messages("m", HI)
    with pytest.raises(BadRequestError) as auth:
        gw.generate_content("g", "x")
    assert str(auth.value).endswith(
        "Authentication Error - invalid proxy key (request id call-5). "
        "Check the API key (GATECELL_API_KEY or OPENAI_API_KEY)"
    )


# -- one outcome per call, in both clients ---------------------------------------------------


def summary(outcomes: list[Outcome]) -> list[tuple[str, str, str | None, bool]]:
    return [
        (o.call.path, type(o.result).__name__, type(o.error).__name__ if o.error else None, o.partial)
        for o in outcomes
    ]


EXPECTED = [
    ("/v1/chat/completions", "ChatCompletion", None, False),
    ("/v1/chat/completions", "{stream}", None, False),
    ("/v1/messages", "{text}", None, True),  # closed early by the caller
    ("/v1/models", "ModelList", None, False),
    ("/v1/audio/speech", "Audio", None, False),
    ("/imgjob/submit/imagine", "Job", None, False),
    ("/imgjob/task/task-1/fetch", "Job", None, False),
    ("/imgjob/task/task-1/fetch", "Job", None, False),
    ("/v1/chat/completions", "NoneType", "AuthenticationError", False),
]


def test_every_call_of_the_sync_client_ends_in_one_outcome(fault, caplog):
    caplog.set_level(logging.DEBUG, logger="gatecell")
    with Gateway(f"{fault.url}/s/ok/outcomes-sync", KEY) as gw:
        recorder = recording(gw)
        gw.chat("m", HI)
        gw.chat("m", HI, stream=True).read()
        with gw.messages("m", HI, stream=True) as early:
            next(iter(early))
        gw.models()
        gw.speech("t", "alloy", "hi")
        gw.imagine("castle", wait=True, interval=0.01)
        gw.api_key = "sk-wrong-key-000000000"
        with pytest.raises(AuthenticationError):
            gw.chat("m", HI)
        found = summary(recorder.outcomes)
    assert found == [(p, r.format(stream="ChatStream", text="TextStream"), e, x) for p, r, e, x in EXPECTED]
    lines = [m for m in caplog.messages if " -> " in m]  # the one DEBUG line of each outcome
    assert len(lines) == len(EXPECTED)
    assert re.fullmatch(
        r"POST /v1/chat/completions model=m -> 200 in [\d.]+s \(request id None\), stream complete", lines[1]
    )
    assert lines[2].endswith(", stream closed early")
    assert re.fullmatch(
        r"POST /v1/chat/completions model=m -> 401 from POST /v1/chat/completions: "
        r"missing or bad key\. Check .*",
        lines[-1],
    )


def test_every_call_of_the_async_client_ends_in_one_outcome_and_a_cut_stream_too(fault):
    async def main() -> list[Outcome]:
        async with AsyncGateway(f"{fault.url}/s/ok/outcomes-async", KEY) as gw:
            recorder = recording(gw)
            await gw.chat("m", HI)
            await (await gw.chat("m", HI, stream=True)).aread()
            early = await gw.messages("m", HI, stream=True)
            async with early:
                async for _ in early:
                    break
            await gw.models()
            await gw.speech("t", "alloy", "hi")
            await gw.imagine("castle", wait=True, interval=0.01)
            gw.api_key = "sk-wrong-key-000000000"
            with pytest.raises(AuthenticationError):
                await gw.chat("m", HI)
            outcomes = recorder.outcomes
        async with AsyncGateway(f"{fault.url}/s/cut/outcomes-cut", KEY) as cut:
            cut_recorder = recording(cut)
            stream = await cut.chat("m", HI, stream=True)
            with pytest.raises(StreamError):
                await stream.aread()
            return outcomes + cut_recorder.outcomes

    found = summary(_run(main()))
    expected = [
        (p, r.format(stream="AsyncChatStream", text="AsyncTextStream"), e, x) for p, r, e, x in EXPECTED
    ]
    assert found == [*expected, ("/v1/chat/completions", "AsyncChatStream", "StreamError", True)]


# -- where requests go: the base address's query, job ids -------------------------------------


def test_a_base_address_with_a_query_keeps_it_on_every_request(fault):
    token = uuid.uuid4().hex[:12]
    with Gateway(f"{fault.url}/s/ok/{token}/v1?api-version=2024-06-01", KEY, max_retries=0) as gw:
        assert gw.base_url == f"{fault.url}/s/ok/{token}"
        gw.chat("m", HI)
        gw.models()
        gw.generate_content("g", "x", stream=True).read()
        assert gw.map("say {item}", ["a"], model="m", progress=False, cache=False).errors == {}
    assert [r.path for r in fault.seen(token)] == [
        "/v1/chat/completions?api-version=2024-06-01",
        "/v1/models?api-version=2024-06-01",
        "/v1beta/models/g:streamGenerateContent?alt=sse&api-version=2024-06-01",
        "/v1/chat/completions?api-version=2024-06-01",
    ]


@pytest.mark.parametrize(
    "job_id, path",
    [
        ("../../admin/keys?x=1#f", "/v1/videos/..%2F..%2Fadmin%2Fkeys%3Fx%3D1%23f"),
        ("a/../../b", "/v1/videos/a%2F..%2F..%2Fb"),
        ("v 1\r\nx: y", "/v1/videos/v%201%0D%0Ax%3A%20y"),
    ],
)
def test_a_job_id_changes_neither_the_path_nor_the_query(make, fault, job_id, path):
    gw = make("ok", max_retries=0)
    with pytest.raises(NotFoundError):
        gw.job(job_id, kind="video")
    (request,) = fault.seen(gw.token)
    assert (request.method, request.path) == ("GET", path)
    for dots in (".", "..", ""):
        with pytest.raises(InvalidRequest, match=r"^id: not a job id"):
            gw.job(dots, kind="video")
    assert len(fault.seen(gw.token)) == 1
