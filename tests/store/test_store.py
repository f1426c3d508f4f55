"""The store in one process: the writer off the caller's path, the cache, jobs, queries,
redaction, migrations and settings, against real SQLite files."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from store_helpers import chat_body, clean_env, run_child

import gatecell.store.checkpoints
import gatecell.store.records
import gatecell.store.store
from gatecell import Secret
from gatecell.store import Store, cache_key, default_store, settings
from gatecell.store.prices import Price, load_prices
from gatecell.store.report import usage_cells
from gatecell.store.store import connect
from gatecell.store.tables import VERSION, fts5_available, migrate
from gatecell.wire.transport.errors import ConfigError

CHAT = "/v1/chat/completions"
GW = "http://127.0.0.1:9"
T0 = 1_790_000_000.0  # 2026-09-21, a fixed time so days and order are known


def count(path: Path, table: str = "exchanges") -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_log_returns_while_the_file_is_locked_and_commits_in_batches(store: Store):
    store.record_exchange(CHAT, "m", chat_body("first"), text="one")
    assert store.flush(30)
    locker = sqlite3.connect(store.path, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")  # another process's write transaction, held open
    try:
        for i in range(200):
            store.record_exchange(CHAT, "m", chat_body(f"prompt {i}"), text=f"reply {i}")
        # Every log() returned while no write could happen: nothing of them is in the file yet.
        assert locker.execute("SELECT count(*) FROM exchanges").fetchone()[0] == 1
    finally:
        locker.execute("COMMIT")
        locker.close()
    assert store.flush(60)
    assert count(store.path) == 201
    assert store.rows == 201
    assert store.batches <= 4  # 201 rows in a handful of transactions, not one each


def test_logging_after_close_starts_a_new_writer(store: Store):
    store.record_exchange(CHAT, "m", chat_body("before close"), text="one")
    store.close()
    assert count(store.path) == 1  # close flushed
    store.record_exchange(CHAT, "m", chat_body("after close"), text="two")
    store.close()
    store.record_exchange(CHAT, "m", chat_body("after the second close"), text="three")
    assert store.flush(30)
    assert [r["response"] for r in store.logs()] == ["three", "two", "one"]


def test_an_entry_that_cannot_be_logged_costs_only_itself(store: Store, capsys: pytest.CaptureFixture[str]):
    store.record_exchange(CHAT, "m", chat_body("fine before"), text="one")
    store.record_exchange("/v1/images/generations", "img", {"prompt": "odd"}, media="not bytes")  # type: ignore[arg-type]
    store.record_exchange(CHAT, "m", chat_body("fine after"), text="two")
    assert store.flush(30) and store.off is None
    assert [r["prompt"] for r in store.logs()] == ["fine after", "fine before"]
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gatecell: an exchange could not be logged (TypeError: ")
    store.record_exchange(CHAT, "m", chat_body("still logging"), text="three")
    assert store.flush(30) and len(store.logs()) == 3


def test_values_the_fast_json_encoder_refuses_are_still_logged(store: Store):
    store.record_exchange(
        CHAT, "m", {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tag": b"\xff"}, text="ok"
    )
    assert store.flush(30) and store.off is None
    [row] = store.logs()
    assert row["prompt"] == "hi" and row["params"] == {"tag": "b'\\xff'"}


def test_redaction_and_serialising_happen_off_the_recording_call(store: Store, monkeypatch):
    """Recording returns at once; the work is the writer's, or that of whoever waits for the
    commit while the writer is idle (`Store.wait`: no thread switch)."""
    threads: list[str] = []
    real = gatecell.store.records.redact

    def spy(text: str, *secrets: object) -> str:
        threads.append(threading.current_thread().name)
        return real(text, *secrets)  # type: ignore[arg-type]

    monkeypatch.setattr(gatecell.store.records, "redact", spy)
    store.record_exchange(
        CHAT, "m", chat_body("hello"), text="world"
    )  # nothing like a key: not even scanned twice
    store.record_exchange(CHAT, "m", chat_body("hello"), text="your key sk-live-0123456789abcdef is echoed")
    assert threads == []  # recording did none of it
    assert store.flush(30)
    assert threads and set(threads) <= {"gatecell-store", threading.current_thread().name}
    assert [r["response"] for r in store.logs()] == ["your key sk-…cdef is echoed", "world"]


def test_the_writer_reads_a_snapshot_of_the_callers_dict(store: Store):
    body = {"model": "m", "messages": [{"role": "user", "content": "original"}]}
    store.record_exchange(CHAT, "m", body, text="reply")
    body["messages"].append({"role": "assistant", "content": "later"})
    body["messages"][0]["content"] = "changed"
    assert store.flush(30)
    [row] = store.logs()
    assert row["messages"] == [{"role": "user", "content": "original"}]


def test_lookup_gives_the_newest_complete_answer_never_an_error_partial_or_replay(store: Store):
    body = chat_body("What is 2+2?")
    key = cache_key(CHAT, "gpt-test", body, GW)
    common = dict(gateway=GW, status=200, latency=0.5)
    usage = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
    raw = {"id": "cmpl-2", "choices": [{"message": {"role": "assistant", "content": "4"}}], "usage": usage}
    store.record_exchange(CHAT, "gpt-test", body, text="four", request_id="req-1", at=T0, **common)
    store.record_exchange(
        CHAT, "gpt-test", body, text="4", reasoning="added", usage=usage, response=raw, request_id="req-2",
        at=T0 + 1, **common,
    )  # fmt: skip
    store.record_exchange(
        CHAT, "gpt-test", body, text="4 and m", partial=True, request_id="req-3", at=T0 + 2, **common
    )
    store.record_exchange(
        CHAT, "gpt-test", body, error="500 from POST: boom", status=500, at=T0 + 3, gateway=GW
    )
    store.record_exchange(
        CHAT, "gpt-test", body, text="4", cached=True, request_id="req-2", at=T0 + 4, **common
    )
    assert store.flush(30)

    hit = store.lookup(key)
    assert hit is not None
    assert (hit.text, hit.reasoning, hit.request_id) == ("4", "added", "req-2")
    assert hit.usage == usage and hit.response == raw
    assert hit.time.startswith("2026-09-21T") and hit.model == "gpt-test" and hit.latency == 0.5
    assert store.lookup(cache_key(CHAT, "gpt-test", chat_body("What is 3+3?"), GW)) is None


def test_errors_and_partial_replies_are_never_answers(store: Store):
    body = chat_body("never cached")
    store.record_exchange(
        CHAT, "gpt-test", body, gateway=GW, error="429 from POST /v1/chat/completions: slow down"
    )
    store.record_exchange(CHAT, "gpt-test", body, gateway=GW, status=503)  # an error status without a line
    store.record_exchange(CHAT, "gpt-test", body, gateway=GW, text="half a rep", partial=True)
    assert store.flush(30)
    assert store.lookup(cache_key(CHAT, "gpt-test", body, GW)) is None
    assert [r["error"] for r in store.logs(n=0) if r["error"]] == [
        "HTTP 503",
        "429 from POST /v1/chat/completions: slow down",
    ]


def test_a_streamed_reply_answers_the_same_request_unstreamed(store: Store):
    store.record_exchange(
        CHAT, "gpt-test", chat_body("stream me", stream=True), gateway=GW, text="streamed text"
    )
    assert store.flush(30)
    hit = store.lookup(cache_key(CHAT, "gpt-test", chat_body("stream me"), GW))
    assert hit is not None and hit.text == "streamed text" and hit.response is None


def test_a_lookup_sees_what_this_process_logged_just_before(store: Store):
    body = chat_body("just now")
    for i in range(50):
        store.record_exchange(CHAT, "gpt-test", chat_body(f"filler {i}"), gateway=GW, text="x")
    store.record_exchange(CHAT, "gpt-test", body, gateway=GW, text="fresh")
    hit = store.lookup(cache_key(CHAT, "gpt-test", body, GW))  # no flush in between
    assert hit is not None and hit.text == "fresh"


def test_a_lookup_waits_only_for_pending_writes_that_could_answer_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(gatecell.store.store, "_LOOKUP_WAIT", 600.0)  # a wait would be a hang
    answered = chat_body("answered before")
    store.record_exchange(CHAT, "gpt-test", answered, gateway=GW, text="logged")
    assert store.flush(30)
    key = cache_key(CHAT, "gpt-test", answered, GW)
    locker = sqlite3.connect(store.path, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")  # the writer cannot commit while this is held
    try:
        # A replay of that answer, and a failure, are pending: neither can answer anything ...
        store.record_exchange(
            CHAT, "gpt-test", answered, gateway=GW, text="logged", cached=True, cache_key=key
        )
        store.record_exchange(
            CHAT, "gpt-test", chat_body("failed"), gateway=GW, error="500 from gateway", status=500
        )
        found: list = []
        lookup = threading.Thread(target=lambda: found.append(store.lookup(key)))
        lookup.start()
        lookup.join(30)  # ... so the lookup does not wait for them (it would, until COMMIT below)
        assert not lookup.is_alive() and found[0] is not None and found[0].text == "logged"
        assert locker.execute("SELECT count(*) FROM exchanges").fetchone()[0] == 1  # still pending
        # One that could be the answer (its key not known yet) is waited for: until the COMMIT.
        fresh = chat_body("fresh")
        store.record_exchange(CHAT, "gpt-test", fresh, gateway=GW, text="new")
        waiting = threading.Thread(
            target=lambda: found.append(store.lookup(cache_key(CHAT, "gpt-test", fresh, GW)))
        )
        waiting.start()
        waiting.join(0.5)
        assert waiting.is_alive()
    finally:
        locker.execute("COMMIT")
        locker.close()
    waiting.join(30)
    assert not waiting.is_alive() and found[1] is not None and found[1].text == "new"
    assert count(store.path) == 4


def _file_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


def test_no_key_reaches_the_file(store: Store):
    custom = Secret("gw-live-Zq9XbT4mW2pL7vRk")  # not shaped like a key: masked because it is given
    shaped = "sk-proj-Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8"  # not given: masked because of its shape
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": f"is {shaped} or {custom.reveal()} my key?"}],
        "metadata": {"note": custom.reveal()},
    }
    store.record_exchange(
        CHAT,
        "m",
        body,
        text=f"your key {custom.reveal()} leaked",
        reasoning=f"it said {shaped}",
        error=f"401: bad key {shaped}",
        response={"echo": custom.reveal(), "headers": {"authorization": f"Bearer {shaped}"}},
        usage={"prompt_tokens": 1, "note": shaped},
        request_id=f"req-{custom.reveal()}",
        conversation=f"c-{shaped}",
        notebook=f"/home/u/{shaped}.ipynb",
        gateway=f"https://user:{custom.reveal()}@gw.example/v1?key={shaped}",
        secrets=(custom,),
    )
    store.record_job(
        "video",
        "job-1",
        gateway=f"https://user:{custom.reveal()}@gw.example",
        prompt=f"waves {shaped}",
        error=f"failed for {custom.reveal()}",
        body={"key": custom.reveal()},
        secrets=(custom,),
    )
    assert store.flush(30)
    [row] = store.logs()
    assert row["prompt"].startswith("is sk-…") and custom.masked in row["prompt"]  # it was written, masked
    everything = _file_bytes(store.path) + json.dumps(row).encode() + repr(store.jobs()).encode()
    for secret in (custom.reveal(), shaped, shaped[3:]):
        assert secret.encode() not in everything
    with sqlite3.connect(store.path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert custom.reveal().encode() not in _file_bytes(store.path)
    assert shaped.encode() not in _file_bytes(store.path)


def test_media_bytes_only_with_log_media(home: Path):
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    image_reply = {"data": [{"b64_json": "aGVsbG8="}]}
    for log_media in (False, True):
        s = Store(home / f"media-{log_media}.db", log_media=log_media)
        s.record_exchange(
            "/v1/images/generations",
            "img",
            {"model": "img", "prompt": "a lighthouse"},
            media=png,
            media_type="image/png",
            response=image_reply,
        )
        assert s.flush(30)
        s.close()
        with sqlite3.connect(s.path) as conn:
            columns = "api, prompt, media_type, media_size, media_sha256, media, response_json"
            api, prompt, mtype, size, sha, blob, raw = conn.execute(
                f"SELECT {columns} FROM exchanges"
            ).fetchone()
        assert (api, prompt, mtype, size) == ("image", "a lighthouse", "image/png", len(png))
        import hashlib

        assert sha == hashlib.sha256(png).hexdigest()
        assert (blob, raw) == (
            (png, json.dumps(image_reply, separators=(",", ":"))) if log_media else (None, None)
        )


def test_jobs_insert_update_and_are_found_by_id_alone(store: Store):
    store.record_job("video", "v-1", gateway="http://a", model="vid", prompt="waves", state="queued", at=T0)
    store.record_job("video", "v-1", gateway="http://a", state="running", progress=40, at=T0 + 10)
    store.record_job("video", "v-1", gateway="http://a", state="queued", progress=5, at=T0 + 5)  # late, older
    store.record_job(
        "music", "m-1", gateway="http://a", prompt="calm", state="succeeded", body={"x": 1}, at=T0 + 1
    )
    store.record_job("imagine", "shared", gateway="http://a", prompt="old", state="failed", at=T0 + 2)
    store.record_job("imagine", "shared", gateway="http://b", prompt="new", state="running", at=T0 + 3)
    assert store.flush(30)

    video = store.job("v-1")
    assert video is not None
    assert (video.kind, video.state, video.progress, video.prompt, video.model) == (
        "video", "running", 40.0, "waves", "vid",
    )  # fmt: skip
    assert video.created < video.updated and video.updated.startswith("2026-09-21T")
    shared = store.job("shared")
    assert shared is not None and (shared.gateway, shared.prompt) == ("http://b", "new")
    assert store.job("nope") is None
    assert [j.job_id for j in store.jobs()] == ["v-1", "shared", "shared", "m-1"]
    assert [j.job_id for j in store.jobs(limit=2)] == ["v-1", "shared"]
    assert store.jobs(kind="music")[0].body == {"x": 1}
    assert count(store.path, "jobs") == 4


def _fill_for_queries(store: Store) -> None:
    rows = [
        ("gpt-a", "Describe a lighthouse at night", "A tall tower of light.", "trip"),
        ("gpt-b", "What is 2+2?", "4", None),
        ("gpt-a", "And in the morning?", "The lighthouse sleeps.", "trip"),
        ("gpt-a", "Name three colours", "red, green, blue", None),
    ]
    for i, (model, prompt, reply, conv) in enumerate(rows):
        store.record_exchange(
            CHAT, model, chat_body(prompt, model=model), text=reply, conversation=conv, at=T0 + i
        )
    store.record_exchange(
        CHAT, "gpt-a", chat_body("broken", model="gpt-a"), error="500: down", conversation="trip", at=T0 + 9
    )
    assert store.flush(30)


def test_logs_filter_and_order_newest_first(store: Store):
    _fill_for_queries(store)
    assert [r["prompt"] for r in store.logs(n=2)] == ["broken", "Name three colours"]
    assert len(store.logs(n=0)) == 5
    assert [r["prompt"] for r in store.logs(q="lighthouse")] == [
        "And in the morning?",
        "Describe a lighthouse at night",
    ]
    assert [r["prompt"] for r in store.logs(q="light tower")] == [
        "Describe a lighthouse at night"
    ]  # all words
    assert [r["prompt"] for r in store.logs(q="LIGHTHOUSE morning")] == ["And in the morning?"]
    assert [r["response"] for r in store.logs(q="2+2")] == ["4"]
    assert store.logs(q='"unbalanced') == [] and store.logs(q="zebra") == []
    assert {r["model"] for r in store.logs(model="gpt-b")} == {"gpt-b"}
    assert [r["prompt"] for r in store.logs(conversation="trip", n=0)] == [
        "broken",
        "And in the morning?",
        "Describe a lighthouse at night",
    ]


@pytest.mark.skipif(not fts5_available(), reason="this SQLite has no FTS5")
def test_rows_are_indexed_when_searched_not_when_written(store: Store):
    _fill_for_queries(store)

    def indexed() -> int:
        with sqlite3.connect(store.path) as conn:
            return conn.execute("SELECT count(*) FROM exchanges_fts_docsize").fetchone()[0]

    assert indexed() == 0  # the writer left the index alone
    assert [r["prompt"] for r in store.logs(q="lighthouse", n=1)] == ["And in the morning?"]
    assert indexed() == 5
    store.record_exchange(CHAT, "gpt-a", chat_body("a lighthouse keeper"), text="kept")
    assert store.flush(30) and indexed() == 5
    assert [r["prompt"] for r in store.logs(q="keeper")] == ["a lighthouse keeper"]
    assert indexed() == 6


def test_search_without_fts5_falls_back_to_like(home: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(gatecell.store.tables, "fts5_available", lambda: False)  # a SQLite built without it
    s = Store(home / "plain.db")
    _fill_for_queries(s)
    with sqlite3.connect(s.path) as conn:
        assert (
            conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'exchanges_fts'").fetchone()[0] == 0
        )
    assert [r["prompt"] for r in s.logs(q="lighthouse", n=0)] == [
        "And in the morning?",
        "Describe a lighthouse at night",
    ]
    assert [r["prompt"] for r in s.logs(q="light TOWER", n=0)] == ["Describe a lighthouse at night"]
    assert s.logs(q="50%", n=0) == []  # % is a character here, not a wildcard
    s.close()


def test_conversation_turns_in_order_without_failures(store: Store):
    _fill_for_queries(store)
    store.record_exchange(
        CHAT,
        "gpt-a",
        chat_body("cut short", model="gpt-a"),
        text="I was say",
        partial=True,
        conversation="trip",
        at=T0 + 10,
    )
    assert store.flush(30)
    turns = store.conversation("trip")
    assert [(t["prompt"], t["response"], t["partial"]) for t in turns] == [
        ("Describe a lighthouse at night", "A tall tower of light.", False),
        ("And in the morning?", "The lighthouse sleeps.", False),
        ("cut short", "I was say", True),
    ]
    assert turns[0]["messages"] == [{"role": "user", "content": "Describe a lighthouse at night"}]
    assert store.conversation("nobody") == []


USAGES = {  # endpoint -> (usage as that API sends it, (prompt, completion, reasoning, total))
    "/v1/chat/completions": (
        {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30,
         "completion_tokens_details": {"reasoning_tokens": 5}},
        (10, 20, 5, 30),
    ),
    "/v1/messages": ({"input_tokens": 7, "output_tokens": 3}, (7, 3, None, 10)),
    "/v1/responses": (
        {"input_tokens": 4, "output_tokens": 9, "total_tokens": 13,
         "output_tokens_details": {"reasoning_tokens": 6}},
        (4, 9, 6, 13),
    ),
    "/v1beta/models/gem:generateContent": (
        {"promptTokenCount": 8, "candidatesTokenCount": 2, "thoughtsTokenCount": 3, "totalTokenCount": 13},
        (8, 5, 3, 13),
    ),
}  # fmt: skip


def test_usage_shapes_are_read_into_the_token_columns(store: Store):
    for endpoint, (usage, _) in USAGES.items():
        store.record_exchange(endpoint, "m", {"model": "m"}, text="ok", usage=usage)
    assert store.flush(30)
    by_endpoint = {r["endpoint"]: r["usage"] for r in store.logs(n=0)}
    for endpoint, (_, (p, c, r, t)) in USAGES.items():
        expected = {"prompt_tokens": p, "completion_tokens": c, "reasoning_tokens": r, "total_tokens": t}
        assert by_endpoint[endpoint] == expected, endpoint


def test_usage_per_model_per_day_with_costs_only_where_priced(store: Store, tmp_path: Path):
    day = 86400
    plan = [  # (time, model, prompt, completion, cached, error)
        (T0, "gpt-a", 100, 50, False, None),
        (T0 + 60, "gpt-a", 200, 10, False, None),
        (T0 + 120, "gpt-a", 1000, 1000, True, None),  # a cache hit: costs nothing, not counted
        (T0 + 180, "gpt-b", 0, 0, False, "500: down"),
        (T0 + day, "gpt-a", 5, 5, False, None),
    ]
    for at, model, p, c, cached, error in plan:
        usage = None if error else {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        store.record_exchange(
            CHAT, model, {"model": model}, text="x", usage=usage, cached=cached, error=error, at=at
        )
    assert store.flush(30)
    prices_file = tmp_path / "prices.json"
    prices_file.write_text(json.dumps({"gpt-a": {"input": 2.5, "output": 10}}))
    rows = store.usage(prices=load_prices(prices_file))
    assert [(r.day, r.model, r.requests, r.errors, r.prompt_tokens, r.completion_tokens) for r in rows] == [
        ("2026-09-21", "gpt-a", 2, 0, 300, 60),
        ("2026-09-21", "gpt-b", 1, 1, 0, 0),
        ("2026-09-22", "gpt-a", 1, 0, 5, 5),
    ]
    assert rows[0].cost == pytest.approx((300 * 2.5 + 60 * 10) / 1e6)
    assert rows[1].cost is None  # no price given: unknown, never guessed
    assert [r.day for r in store.usage(since="2026-09-22")] == ["2026-09-22"]
    assert all(r.cost is None for r in store.usage(prices={}))


def test_prices_from_toml_and_clear_errors_for_bad_files(tmp_path: Path):
    toml = tmp_path / "prices.toml"
    toml.write_text('["gpt-4o"]\ninput = 2.5\noutput = 10\n')
    assert load_prices(toml)["gpt-4o"].cost(1_000_000, 100_000) == pytest.approx(3.5)
    bad = {
        "broken.json": "{not json",
        "list.json": "[1, 2]",
        "missing.json": '{"m": {"input": 1}}',
        "negative.toml": "[m]\ninput = -1\noutput = 1\n",
    }
    for name, text in bad.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ConfigError, match=r"^GATECELL_PRICES \(") as info:
            load_prices(tmp_path / name)
        assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="No such file"):
        load_prices(tmp_path / "absent.json")


def test_usage_adds_the_logged_costs_and_prices_the_rest_with_their_sources(store: Store):
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}
    plan = [  # (model, cost logged, its source)
        ("gpt-a", 0.5, "gateway"),
        ("gpt-a", 0.25, "model-info"),
        ("gpt-a", None, None),  # priced by the prices given, if any
        ("gpt-b", 0.125, "gateway"),
        ("gpt-b", None, None),  # no price for gpt-b: unknown
    ]
    for model, cost, source in plan:
        store.record_exchange(
            CHAT, model, {"model": model}, usage=usage, at=T0, cost=cost, cost_source=source
        )
    assert store.flush(30)
    priced = {
        r.model: (r.cost, r.cost_source, r.unpriced) for r in store.usage(prices={"gpt-a": Price(100, 1000)})
    }
    assert priced == {
        "gpt-a": (pytest.approx(0.5 + 0.25 + 0.2), "gateway+model-info+prices", 0),
        "gpt-b": (pytest.approx(0.125), "gateway", 1),
    }
    bare = {r.model: (r.cost, r.cost_source, r.unpriced) for r in store.usage(prices={})}
    assert bare["gpt-a"] == (pytest.approx(0.75), "gateway+model-info", 1)
    header, cells = usage_cells(store.usage(prices={}), with_cost=False)  # a cost is known: shown
    assert header[-2:] == ["cost ($)", "source"]
    assert [row[-2:] for row in cells] == [
        ["0.750000", "gateway+model-info, 1 unknown"],
        ["0.125000", "gateway, 1 unknown"],
    ]


def test_a_database_made_by_migration_1_is_brought_forward_with_its_rows(home: Path):
    path = home / "gatecell.db"
    path.parent.mkdir(parents=True)
    old = sqlite3.connect(path, isolation_level=None)
    assert migrate(old, target=1) == 1
    columns = "time, endpoint, model, prompt, response, prompt_tokens, cached, partial, cache_key"
    old.executemany(  # rows as the first version of gatecell wrote them
        f"INSERT INTO exchanges ({columns}) VALUES (?, ?, ?, ?, ?, ?, 0, 0, ?)",
        [
            ("2026-01-02T03:04:05.000000Z", CHAT, "gpt-a", "old lighthouse prompt", "old reply", 12, "k1"),
            ("2026-01-03T00:00:00.000000Z", "/v1/messages", "claude", "second", "another reply", 3, None),
        ],
    )
    old.execute(
        "INSERT INTO jobs (gateway, kind, job_id, state, created, updated)"
        " VALUES ('http://g', 'video', 'v9', 'running', '2026-01-02T00:00:00Z', '2026-01-02T00:00:00Z')"
    )
    before = old.execute("SELECT * FROM exchanges ORDER BY id").fetchall()
    old.close()

    s = Store(path)
    assert [r["prompt"] for r in s.logs(q="lighthouse")] == ["old lighthouse prompt"]  # found via FTS5
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == VERSION
        after = conn.execute("SELECT * FROM exchanges ORDER BY id").fetchall()
        assert [row[: len(before[0])] for row in after] == before  # kept; the new columns empty
        assert all(value is None for row in after for value in row[len(before[0]) :])
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert ("exchanges_fts" in tables) == fts5_available() and "model_prices" in tables
    assert {"exchanges_answers", "exchanges_time", "exchanges_conversation"} <= indexes
    assert "exchanges_model" not in indexes  # step 5: one index fewer for each insert to keep up
    assert s.lookup("k1") is not None and s.lookup("k1").text == "old reply"  # type: ignore[union-attr]
    job = s.job("v9")
    assert job is not None and job.state == "running"
    s.record_exchange(CHAT, "gpt-a", chat_body("new"), text="new reply")
    assert s.flush(30)
    assert [r["prompt"] for r in s.logs(n=0)] == ["new", "second", "old lighthouse prompt"]
    s.close()


def test_a_file_from_a_newer_gatecell_is_used_as_it_is(store: Store):
    conn = connect(store.path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    store.record_exchange(CHAT, "m", chat_body("still works"), text="yes")
    assert store.flush(30) and store.off is None
    assert [r["prompt"] for r in store.logs()] == ["still works"]
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 99


def test_the_file_is_wal_with_a_busy_timeout(store: Store):
    store.record_exchange(CHAT, "m", chat_body("x"), text="y")
    assert store.flush(30)
    conn = connect(store.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    conn.close()


def test_settings_switches(home: Path, monkeypatch: pytest.MonkeyPatch):
    assert settings().path == home / "gatecell.db"
    assert (settings().log, settings().cache, settings().log_media) == (True, False, False)
    monkeypatch.setenv("GATECELL_CACHE", "1")
    monkeypatch.setenv("GATECELL_LOG_MEDIA", "yes")
    assert (settings().cache, settings().log_media) == (True, True)
    monkeypatch.setenv("GATECELL_LOG", "maybe")
    with pytest.raises(ConfigError, match="^GATECELL_LOG must be one of 1, true, yes, on, 0, false, no, off"):
        settings()
    monkeypatch.setenv("GATECELL_LOG", "0")
    off = default_store()
    off.record_exchange(CHAT, "m", chat_body("not logged"), text="no")
    off.record_job("video", "j", prompt="no")
    assert off.flush(5) and not home.exists()  # nothing written, no file made
    monkeypatch.setenv("GATECELL_LOG", "1")
    assert default_store() is not off and default_store() is default_store()


def test_default_home_is_the_platform_user_data_folder(tmp_path: Path):
    # On Linux, platformdirs' user data folder is $XDG_DATA_HOME/<app>.
    out = run_child(
        "from gatecell.store import settings; print(settings().path)", clean_env(XDG_DATA_HOME=str(tmp_path))
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(tmp_path / "gatecell" / "gatecell.db")


def test_gatecell_logs_is_a_lazy_export(home: Path):
    s = Store(home / "gatecell.db")
    s.record_exchange(CHAT, "m", chat_body("via gatecell.logs"), text="found")
    assert s.flush(30)
    s.close()
    script = """
        import sys
        import gatecell
        assert "gatecell.store" not in sys.modules and "sqlite3" not in sys.modules
        print(gatecell.logs(n=1)[0]["prompt"])
    """
    out = run_child(script, clean_env(GATECELL_HOME=str(home)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "via gatecell.logs"


def test_the_wal_is_copied_into_the_file_by_a_thread_of_its_own(
    store: Store, monkeypatch: pytest.MonkeyPatch
):
    """The writer's connection never checkpoints (a commit would wait for it): a thread of
    its own does, every so many transactions, beside the commits."""
    monkeypatch.setattr(gatecell.store.checkpoints, "TRANSACTIONS", 3)
    store.record_exchange(CHAT, "m", chat_body("first"), text="one")
    assert store.flush(30)
    before = store.path.stat().st_size  # the tables are in the WAL, not yet in the file
    for i in range(6):  # a transaction each: the call waits for its commit
        store.record_exchange(CHAT, "m", chat_body(f"prompt {i}" * 500), text="x" * 2000)
        assert store.flush(30)
    deadline = time.monotonic() + 30
    while store.path.stat().st_size <= before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.path.stat().st_size > before
    assert "gatecell-checkpoint" in {thread.name for thread in threading.enumerate()}


@pytest.mark.parametrize("chunk", [5, 5000])
def test_kept_vectors_are_found_across_queries_and_answers(store: Store, monkeypatch, chunk: int):
    import hashlib

    import numpy as np

    import gatecell.store.vectors

    monkeypatch.setattr(gatecell.store.vectors, "_CHUNK", chunk)
    hashes = [hashlib.sha256(str(i).encode()).digest() for i in range(15)]
    matrix = np.arange(15 * 3, dtype=np.float32).reshape(15, 3)
    for start in range(0, 12, 4):  # three answers of four texts; the last three never kept
        ticket = store.record_vectors("g", "m", None, hashes[start : start + 4], matrix[start : start + 4])
    store.wait(ticket)
    found = store.vectors("g", "m", None, hashes)
    assert sorted(found) == sorted(hashes[:12])
    assert all(found[hashes[i]] == matrix[i].astype("<f4").tobytes() for i in range(12))
    assert store.vectors("g", "m", 8, hashes) == {}  # other dimensions: other vectors
