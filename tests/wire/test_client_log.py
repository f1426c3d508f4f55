"""The client logs every exchange in the store, records jobs, and answers from the cache.

Against the fault server's well-behaved gateway (``/s/ok/<token>``), whose address is each
client's own: a test reads exactly its client's rows, and counts the requests that reached
the gateway. The store is the run's (GATECELL_HOME of the root conftest.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import uuid

import pytest
from fault_server import KEY, PNG, WAV

from gatecell import store
from gatecell.journal import call_context
from gatecell.store.keys import gateway_address
from gatecell.wire.apis.streams import AsyncChatStream, ChatStream, TextStream
from gatecell.wire.transport.errors import APIError, InvalidRequest, StreamError

HI = [{"role": "user", "content": "Hello there"}]


def rows(gw) -> list[dict]:
    """This client's exchanges, oldest first."""
    st = store.default_store(log=True)
    assert st.flush(30)
    address = gateway_address(gw.base_url)
    return [r for r in reversed(st.logs(n=0)) if r["gateway"] == address]


def sent(fault, gw) -> int:
    return len(fault.seen(gw.token))


def test_every_endpoint_is_logged_as_it_went(make, fault):
    gw = make("ok")
    gw.chat("m", HI, temperature=0.5)
    "".join(gw.chat("m", HI, stream=True))
    gw.messages("claude", HI)
    gw.generate_content("gem", "Salut")
    gw.responses("deep-thinker", "Why?", effort="low")
    gw.image("img", "a kite", size="64x64")
    gw.speech("tts", "alloy", "Hello")
    gw.models()
    got = rows(gw)
    assert [(r["endpoint"], r["api"], r["model"]) for r in got] == [
        ("/v1/chat/completions", "chat", "m"),
        ("/v1/chat/completions", "chat", "m"),
        ("/v1/messages", "messages", "claude"),
        ("/v1beta/models/gem:generateContent", "generate-content", "gem"),
        ("/v1/responses", "responses", "deep-thinker"),
        ("/v1/images/generations", "image", "img"),
        ("/v1/audio/speech", "speech", "tts"),
        ("/v1/models", "models", None),
    ]
    chat, stream, messages, gc, responses, image, speech, models = got
    assert chat["prompt"] == "Hello there" and chat["response"] == "Hello world"
    assert chat["params"]["temperature"] == 0.5 and chat["messages"] == HI
    assert chat["usage"] == {
        "prompt_tokens": 3,
        "completion_tokens": 2,
        "reasoning_tokens": None,
        "total_tokens": 5,
    }
    assert chat["request_id"] == "req-1" and chat["status"] == 200 and chat["latency"] > 0
    assert stream["response"] == "Hello world" and stream["usage"]["total_tokens"] == 5
    assert not stream["partial"] and stream["error"] is None
    assert messages["response"] == "Hi there" and messages["usage"]["total_tokens"] == 5
    assert gc["prompt"] == "Salut" and gc["response"] == "Bonjour" and gc["usage"]["total_tokens"] == 3
    assert responses["response"] == "Forty-two." and responses["reasoning"] == "Thought briefly."
    assert responses["usage"]["reasoning_tokens"] == 3 and responses["params"]["reasoning"] == {
        "effort": "low"
    }
    # media: prompt, type, size and a hash of the bytes; no bytes (log_media is off)
    assert image["prompt"] == "a kite"
    assert image["media"] == {
        "type": "image/png",
        "size": len(PNG),
        "sha256": hashlib.sha256(PNG).hexdigest(),
    }
    assert speech["prompt"] == "Hello"
    assert speech["media"] == {
        "type": "audio/wav",
        "size": len(WAV),
        "sha256": hashlib.sha256(WAV).hexdigest(),
    }
    assert models["error"] is None and models["status"] == 200
    media = _column(gw, "media")
    assert media == [None] * 8  # bytes kept only with log_media


def _column(gw, name: str) -> list:
    address = gateway_address(gw.base_url)
    with sqlite3.connect(store.default_store(log=True).path) as conn:
        return [
            row[0]
            for row in conn.execute(f"SELECT {name} FROM exchanges WHERE gateway = ? ORDER BY id", (address,))
        ]


def test_log_media_keeps_the_bytes(make):
    gw = make("ok", log_media=True)
    gw.speech("tts", "alloy", "Hello")
    assert rows(gw)[0]["media"]["size"] == len(WAV)
    assert _column(gw, "media") == [WAV]


def test_the_async_client_is_logged_too(make):
    gw = make("ok", asynchronous=True)

    async def main() -> None:
        await gw.chat("m", HI)
        stream = await gw.chat("m", HI, stream=True)
        assert isinstance(stream, AsyncChatStream)
        assert "".join([fragment async for fragment in stream]) == "Hello world"
        await gw.generate_content("gem", "Salut", stream=True)  # never read: nothing logged yet
        await gw.aclose()

    asyncio.run(main())
    assert [(r["endpoint"], r["response"], r["partial"]) for r in rows(gw)] == [
        ("/v1/chat/completions", "Hello world", False),
        ("/v1/chat/completions", "Hello world", False),
    ]


def test_streams_are_logged_when_they_end_and_interrupted_ones_as_partial(make):
    gw = make("ok")
    stream = gw.chat("m", HI, stream=True)
    assert rows(gw) == []  # not before its end
    first = next(iter(stream))
    stream.close()  # the reader stopped early
    cut = make("cut")
    with pytest.raises(StreamError) as failed:
        "".join(cut.chat("m", HI, stream=True))
    (closed,) = rows(gw)
    assert closed["partial"] and closed["response"] == first == "Hello" and closed["error"] is None
    (broken,) = rows(cut)
    assert broken["partial"] and broken["response"] == failed.value.partial_text == "Hello world"
    assert "broke mid-stream" in broken["error"] and broken["status"] == 200


def test_errors_are_logged_with_their_line(make, fault):
    gw = make("400")
    with pytest.raises(APIError) as failed:
        gw.chat("m", HI)
    (row,) = rows(gw)
    assert row["status"] == 400 and row["error"] == str(failed.value) and row["response"] is None
    from gatecell import Gateway

    with Gateway(f"http://127.0.0.1:9/{uuid.uuid4().hex}", KEY, max_retries=0) as down:  # its own address
        with pytest.raises(Exception) as refused:
            down.chat("m", HI)
    (row,) = rows(down)
    assert row["status"] is None and row["error"] == str(refused.value) and "Connect" in row["error"]


def test_log_off_logs_nothing(make, monkeypatch):
    off = make("ok", log=False)
    off.chat("m", HI)
    monkeypatch.setenv("GATECELL_LOG", "0")
    env_off = make("ok")
    env_off.chat("m", HI)
    assert not off.log and not env_off.log
    assert rows(off) == rows(env_off) == []
    on = make("ok", log=True)  # an explicit argument wins over the environment
    on.chat("m", HI)
    assert len(rows(on)) == 1
    on.log = False  # and it can be switched at any time
    on.chat("m", HI)
    assert len(rows(on)) == 1


def test_the_key_is_never_in_the_log(make, tmp_path):
    gw = make("echo-key")
    for call in (lambda: gw.chat("m", HI), lambda: "".join(gw.chat("m", HI, stream=True))):
        with pytest.raises((APIError, StreamError)):
            call()
    got = rows(gw)
    assert len(got) == 2 and all(KEY not in json.dumps(r) for r in got)
    assert "sk-…" in got[0]["error"]
    st = store.default_store(log=True)
    for name in ("gatecell.db", "gatecell.db-wal"):
        path = st.path.parent / name
        if path.exists():
            assert KEY.encode() not in path.read_bytes()


def test_conversation_and_notebook_come_from_the_call_context(make, monkeypatch):
    gw = make("ok")
    with call_context(conversation="trip", notebook="/work/a.ipynb"):
        gw.chat("m", HI)
        stream = gw.chat("m", HI, stream=True)
    "".join(stream)  # read outside the block: logged with the context of its call
    monkeypatch.setenv("JPY_SESSION_NAME", "/srv/b.ipynb")  # a Jupyter Server kernel's
    gw.chat("m", HI)
    assert [(r["conversation"], r["notebook"]) for r in rows(gw)] == [
        ("trip", "/work/a.ipynb"),
        ("trip", "/work/a.ipynb"),
        (None, "/srv/b.ipynb"),
    ]


# -- the cache ------------------------------------------------------------------------------


def test_a_cache_hit_sends_nothing_and_says_so(make, fault):
    gw = make("ok", cache=True)
    first = gw.chat("m", HI)
    again = gw.chat("m", HI)
    assert sent(fault, gw) == 1
    assert again.text == first.text == "Hello world" and again.usage.total_tokens == 5
    assert again.meta.cached and not first.meta.cached and again.meta.request_id == first.meta.request_id
    other = gw.chat("m", HI, temperature=0.3)  # another request: sent
    assert sent(fault, gw) == 2 and not other.meta.cached
    logged = rows(gw)
    assert [r["cached"] for r in logged] == [False, True, False]
    assert logged[1]["request_id"] == "req-1"


def test_a_streamed_request_replays_as_a_stream(make, fault):
    gw = make("ok", cache=True)
    plain = gw.chat("m", HI)
    stream = gw.chat("m", HI, stream=True)
    assert isinstance(stream, ChatStream) and stream.meta.cached
    assert list(stream) == ["Hello world"] and stream.text == plain.text and stream.usage.total_tokens == 5
    assert sent(fault, gw) == 1
    native = gw.messages("claude", HI, stream=True)
    "".join(native)
    replayed = gw.messages("claude", HI, stream=True)  # a stream answers a stream, too
    assert isinstance(replayed, TextStream) and replayed.read() == "Hi there" and replayed.meta.cached
    assert sent(fault, gw) == 2


@pytest.mark.parametrize(
    ("call", "text", "reasoning"),
    [
        (lambda gw, stream: gw.chat("m", HI, stream=stream), "Hello world", None),
        (lambda gw, stream: gw.messages("claude", HI, stream=stream), "Hi there", None),
        (lambda gw, stream: gw.generate_content("gem", "Salut", stream=stream), "Bonjour", None),
        (lambda gw, stream: gw.responses("deep-thinker", "Why?", stream=stream), "Forty-two.", "Thought."),
    ],
    ids=["chat", "messages", "generate-content", "responses"],
)
def test_a_streamed_reply_answers_a_plain_request_in_the_endpoint_shape(make, fault, call, text, reasoning):
    gw = make("ok", cache=True)
    assert "".join(call(gw, True)) == text
    reply = call(gw, False)
    assert sent(fault, gw) == 1 and reply.meta.cached and reply.text == text
    if reasoning:
        assert reply.reasoning == reasoning
    if hasattr(reply, "raw"):  # a native reply keeps its endpoint's shape
        assert set(reply.raw) & {"content", "candidates", "output"}


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_reasoning_summary_sent_only_in_the_completed_response_is_kept(make, asynchronous):
    """Some gateways stream no ``reasoning_summary_text`` deltas: the summary is only in the
    response of ``response.completed``. The stream, a chat stream routed there, and the log
    keep it."""
    gw = make("summary-at-end", asynchronous=asynchronous, reasoning_patterns=["deep-*"])
    if asynchronous:

        async def both() -> list[tuple[str, str | None]]:
            streams = [
                await gw.responses("deep-thinker", "Why?", stream=True),
                await gw.chat("deep-thinker", HI, stream=True),
            ]
            return [(await s.aread(), s.reasoning) for s in streams]

        got = asyncio.run(both())
    else:
        streams = [
            gw.responses("deep-thinker", "Why?", stream=True),
            gw.chat("deep-thinker", HI, stream=True),
        ]
        got = [(s.read(), s.reasoning) for s in streams]
    assert got == [("Forty-two.", "Thought briefly.")] * 2
    rows = store.default_store().logs(n=2)
    assert [(r["endpoint"], r["reasoning"]) for r in rows] == [("/v1/responses", "Thought briefly.")] * 2


def test_errors_and_partial_replies_are_never_cached(make, fault):
    gw = make("400", cache=True)
    for _ in range(2):
        with pytest.raises(APIError):
            gw.chat("m", HI)
    assert sent(fault, gw) == 2
    cut = make("cut", cache=True)
    for _ in range(2):
        with pytest.raises(StreamError):
            "".join(cut.chat("m", HI, stream=True))
    assert sent(fault, cut) == 2


def test_cache_off_by_default_and_on_by_environment_or_context(make, fault, monkeypatch):
    gw = make("ok")
    gw.chat("m", HI)
    gw.chat("m", HI)
    assert not gw.cache and sent(fault, gw) == 2
    with call_context(cache=True):  # a magic's --cache
        assert gw.chat("m", HI).meta.cached
    assert sent(fault, gw) == 2
    monkeypatch.setenv("GATECELL_CACHE", "1")
    assert make("ok").cache
    with call_context(cache=False):
        assert not make("ok", cache=True).chat("m", HI).meta.cached


def test_media_and_jobs_are_never_answered_from_the_cache(make, fault):
    gw = make("ok", cache=True)
    gw.image("img", "a kite")
    gw.image("img", "a kite")
    gw.imagine("a castle")
    gw.imagine("a castle")
    assert sent(fault, gw) == 4


# -- jobs -----------------------------------------------------------------------------------


def test_jobs_are_recorded_on_submit_and_each_poll(make):
    gw = make("ok", job_interval=0.01)
    job = gw.imagine("a castle --ar 16:9", wait=True, timeout=10)
    st = store.default_store(log=True)
    assert st.flush(30)
    recorded = st.job(job.id, gateway=gw.base_url)
    assert recorded.kind == "imagine" and recorded.state == "succeeded" and recorded.progress == 100
    assert recorded.prompt == "a castle --ar 16:9" and recorded.body["status"] == "SUCCESS"
    # the submit is an exchange; the polls only update the job's record
    assert [r["endpoint"] for r in rows(gw)] == ["/imgjob/submit/imagine"]


def test_a_job_is_picked_up_by_its_id_alone(make, fault):
    gw = make("ok")
    submitted = gw.music("a calm tune", style="ambient")
    later = make("ok")  # another client (a new kernel) knows only the id ...
    with pytest.raises(InvalidRequest) as elsewhere:
        later.job(submitted.id)  # ... but another gateway address: said so
    assert gateway_address(gw.base_url) in str(elsewhere.value)
    assert gw.job(submitted.id).kind == "music"  # the kind comes from the log
    with pytest.raises(InvalidRequest, match="kind"):
        gw.job("never-submitted")


def test_the_async_client_answers_from_the_cache_too(make, fault):
    gw = make("ok", asynchronous=True, cache=True)

    async def main() -> list:
        first = await gw.chat("m", HI)
        again = await gw.chat("m", HI)
        stream = await gw.chat("m", HI, stream=True)
        fragments = [fragment async for fragment in stream]
        await gw.aclose()
        return [first.meta.cached, again.meta.cached, again.text, stream.meta.cached, fragments]

    assert asyncio.run(main()) == [False, True, "Hello world", True, ["Hello world"]]
    assert sent(fault, gw) == 1
