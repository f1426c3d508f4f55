"""``gw.map`` against real servers on loopback: the embedded gateway, and `RowServer`s that
count what they receive and answer 429, 5xx or 400 on purpose."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pandas as pd
import pytest
from rowserver import KEY, RowServer, reply_to

from gatecell import AsyncGateway, Gateway
from gatecell.batch import BatchError
from gatecell.batch.pacing import Schedule
from gatecell.wire.transport.errors import InvalidRequest


def test_a_dataframe_gives_a_series_aligned_to_its_index(local_gateway):
    frame = pd.DataFrame({"a": [1, 2, 30, 4], "b": [5, 6, 7, 40]}, index=pd.Index([13, 2, 7, -1], name="id"))
    gw = Gateway(base_url=local_gateway.base_url, api_key=local_gateway.api_key)
    batch = gw.map("What is {a} + {b}?", frame, concurrency=3, progress=False)
    assert (batch.done, batch.failed) == (4, 0)
    assert batch.text.index.equals(frame.index)
    assert batch.text.to_dict() == {13: "1 + 5 = 6", 2: "2 + 6 = 8", 7: "30 + 7 = 37", -1: "4 + 40 = 44"}
    table = batch.to_pandas()
    assert table.index.equals(frame.index)
    assert list(table.columns[:2]) == ["text", "error"] and table["total_tokens"].gt(0).all()
    assert batch.usage["total_tokens"] == table["total_tokens"].sum() > 0
    assert "4/4 done" in repr(batch)


def test_each_row_gets_its_own_reply_in_order(row_server, gateway):
    server = row_server()
    frame = pd.DataFrame({"name": [f"n{i}" for i in range(40)]}, index=[f"k{39 - i}" for i in range(40)])
    batch = gateway(server).map("Hello {name}!", frame, concurrency=8, progress=False)
    assert list(batch.text) == [reply_to(f"Hello n{i}!") for i in range(40)]
    assert list(batch.text.index) == list(frame.index)
    assert sorted(server.prompts) == sorted(f"Hello n{i}!" for i in range(40))
    assert server.max_in_flight <= 8


def test_a_map_row_and_gw_chat_both_follow_a_same_origin_307(row_server, gateway):
    def moved(prompt: str, server: RowServer) -> tuple[int, dict[str, str]] | None:
        if server.paths[-1].startswith("/moved/"):
            return None
        return 307, {"Location": "/moved/v1/chat/completions"}  # the case a server chose

    server = row_server(moved)
    gw = gateway(server)
    assert gw.chat("m", [{"role": "user", "content": "hi"}]).text == reply_to("hi")
    batch = gw.map("say {item}", ["a", "b"], model="m", progress=False)
    assert batch.errors == {} and batch.text == [reply_to("say a"), reply_to("say b")]
    sent = list(zip(server.prompts, server.paths, strict=True))
    for prompt in ("hi", "say a", "say b"):
        assert [path for said, path in sent if said == prompt] == [
            "/v1/chat/completions",
            "/moved/v1/chat/completions",
        ]


def test_series_lists_of_values_and_of_dicts(row_server, gateway):
    server = row_server()
    gw = gateway(server)
    series = pd.Series(["x", "y"], index=["a", "b"], name="word")
    assert gw.map("say {word}", series, progress=False).text.to_dict() == {"a": "re: say x", "b": "re: say y"}
    assert gw.map("say {item}", series, progress=False).text.to_dict() == {"a": "re: say x", "b": "re: say y"}
    assert gw.map("say {item!r}", [1, "two"], progress=False).text == ["re: say 1", "re: say 'two'"]
    rows = [{"w": "a", "n": 1.5}, {"w": "b", "n": 2.25}]
    batch = gw.map("{w}={n:.1f} {{literal}}", rows, progress=False)
    assert batch.text == ["re: a=1.5 {literal}", "re: b=2.2 {literal}"]
    assert batch.errors == {}


def test_a_generator_is_pulled_only_as_slots_free_up(row_server):
    """100,000 pending rows never become 100,000 tasks: while the server holds the first
    answers, the batch has taken no more rows than it has requests in flight."""
    server = row_server(lambda prompt, srv: srv.hold())
    pulled = 0

    def rows():
        nonlocal pulled
        for i in range(100_000):
            pulled += 1
            yield i

    async def main() -> int:
        gw = AsyncGateway(base_url=server.url, api_key=KEY)
        batch = asyncio.ensure_future(gw.map("row {item}", rows(), concurrency=4, progress=False))
        while server.in_flight < 4:
            await asyncio.sleep(0.01)
        seen = pulled
        batch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await batch
        await gw.aclose()
        return seen

    assert asyncio.run(main()) <= 4 + 1  # the rows in flight, and at most the next one
    assert len(server.prompts) == 4


def test_a_429_pauses_the_whole_batch_and_no_row_fails(row_server, gateway):
    failed_once: set[str] = set()

    def rule(prompt, srv):
        if len(srv.prompts) == 6:
            return 429, {"retry-after": "1"}
        if int(prompt.split()[1]) % 7 == 3 and prompt not in failed_once:  # now and then, once
            failed_once.add(prompt)
            return 503, {}
        return None

    server = row_server(rule)
    batch = gateway(server, backoff=0.01).map("row {item}", range(40), concurrency=4, progress=False)
    assert (batch.done, batch.failed) == (40, 0)
    assert batch.text == [reply_to(f"row {i}") for i in range(40)]
    assert server.statuses.count(429) == 1 and batch.rate_limited == 1
    assert server.statuses.count(503) == 6
    # The pause is the batch's: after the 429 only the requests already on their way arrive
    # within the second the gateway asked for (3 others were in flight).
    limited_at = server.times[server.statuses.index(429)]
    during = [t for t in server.times if limited_at < t < limited_at + 0.9]
    assert len(during) <= 3
    assert len(server.prompts) == 40 + 1 + server.statuses.count(503)


class Window:
    """A rule: at most ``limit`` answers per ``seconds`` window (fixed windows from the first
    request), then 429 with a Retry-After to the window's end."""

    def __init__(self, limit: int, seconds: float) -> None:
        self.limit, self.seconds = limit, seconds
        self.start, self.count = None, 0

    def __call__(self, prompt, srv):
        now = time.monotonic()
        if self.start is None or now - self.start >= self.seconds:
            self.start, self.count = now, 0
        if self.count >= self.limit:
            return 429, {"retry-after-ms": str(int((self.start + self.seconds - now) * 1000) + 1)}
        self.count += 1
        return None


def test_rpm_keeps_under_a_gateways_limit_and_without_it_429s_pause_the_batch(row_server, gateway):
    paced = row_server(Window(limit=10, seconds=1.0))
    batch = gateway(paced).map("row {item}", range(24), rpm=480, concurrency=8, progress=False)  # 8/s
    assert (batch.done, batch.failed) == (24, 0)
    assert paced.statuses.count(429) == 0 and len(paced.prompts) == 24

    unpaced = row_server(Window(limit=10, seconds=1.0))
    batch = gateway(unpaced).map("row {item}", range(24), concurrency=8, progress=False)
    assert (batch.done, batch.failed) == (24, 0)
    assert 0 < unpaced.statuses.count(429) == batch.rate_limited
    assert unpaced.answered == 24


def test_a_schedule_books_cost_in_order_and_takes_corrections():
    schedule = Schedule(per_minute=60)  # one unit per second
    assert schedule.book(1, now=100.0) == 100.0
    assert schedule.book(1, now=100.0) == 101.0
    assert schedule.book(3, now=100.5) == 102.0  # after the booking before it
    schedule.correct(-2)  # that one cost 1, not 3
    assert schedule.book(1, now=100.5) == 103.0
    assert schedule.book(1, now=200.0) == 200.0  # an idle schedule saves up no burst


def test_rows_that_fail_for_good_keep_their_error_and_the_batch_goes_on(row_server, gateway):
    server = row_server(lambda prompt, srv: (400, {}) if "bad" in prompt else None)
    frame = pd.DataFrame({"w": ["ok", "bad", "fine", "bad too"]}, index=list("abcd"))
    gw = gateway(server)
    batch = gw.map("{w}", frame, progress=False)
    assert (batch.done, batch.failed) == (2, 2)
    assert batch.text.to_dict() == {"a": "re: ok", "b": None, "c": "re: fine", "d": None}
    assert batch.errors.to_dict() == {
        "b": "400 from POST /v1/chat/completions: no: 400",
        "d": "400 from POST /v1/chat/completions: no: 400",
    }
    assert "first error (row 'b'): 400" in repr(batch)
    with pytest.raises(BatchError, match="row 'b': 400 from POST") as raised:
        gw.map("again {w}", frame, concurrency=1, progress=False, on_error="raise")
    assert raised.value.batch.failed == 1 and raised.value.batch.text["a"] == "re: again ok"


def test_a_row_lacking_a_field_fails_alone(row_server, gateway):
    server = row_server()
    batch = gateway(server).map("{a} and {b}", [{"a": 1, "b": 2}, {"a": 3}], progress=False)
    assert batch.text == ["re: 1 and 2", None]
    assert batch.errors == {1: "{b}: this row has no field 'b'"}
    assert server.prompts == ["1 and 2"]


def test_a_second_run_is_answered_from_the_log(row_server, gateway, home: Path):
    server = row_server()
    gw = gateway(server)
    first = gw.map("row {item}", range(10), progress=False)
    assert len(server.prompts) == 10 and first.cached == 0
    again = gw.map("row {item}", range(12), progress=False)
    assert len(server.prompts) == 12 and again.cached == 10  # only the two new rows went out
    assert again.text == [reply_to(f"row {i}") for i in range(12)]
    gw.map("row {item}", range(3), cache=False, progress=False)
    assert len(server.prompts) == 15
    with sqlite3.connect(home / "gatecell.db") as db:
        rows = db.execute("select count(*), sum(cached) from exchanges").fetchone()
    assert rows == (25, 10)


def test_a_batch_says_what_its_rows_cost(row_server, gateway, home: Path, tmp_path: Path, monkeypatch):
    """A row's cost as its gateway said (LiteLLM's header), else by the user's prices; a row
    from the log cost nothing. Each row has it, so do `usage`, `to_pandas` and the log."""
    pd = pytest.importorskip("pandas")
    server = row_server(
        lambda prompt, srv: (200, {"x-litellm-response-cost": "0.001"}) if "paid" in prompt else None
    )
    prices = tmp_path / "prices.json"
    prices.write_text('{"m": {"input": 1000, "output": 1000}}')  # 3 + 2 tokens a reply: $0.005
    monkeypatch.setenv("GATECELL_PRICES", str(prices))
    gw = gateway(server)
    batch = gw.map("{item}", ["paid 1", "paid 2", "plain"], model="m", progress=False)
    assert [(r.cost, r.cost_source) for r in batch.rows] == [(0.001, "gateway")] * 2 + [
        (pytest.approx(0.005), "prices")
    ]
    usage = batch.usage
    assert (usage["cost"], usage["cost_source"], usage["unpriced_rows"]) == (
        pytest.approx(0.007),
        "gateway+prices",
        0,
    )
    frame = batch.to_pandas()
    assert frame["cost"].tolist() == pytest.approx([0.001, 0.001, 0.005])
    assert frame["cost_source"].tolist() == ["gateway", "gateway", "prices"]
    again = gw.map("{item}", ["paid 1", "paid 2", "plain"], model="m", progress=False)
    assert again.cached == 3 and again.usage["cost"] is None and again.usage["unpriced_rows"] == 0
    logged = [(r["prompt"], r["cost"], r["cost_source"]) for r in reversed(gw.journal.store.logs(n=6))]
    assert sorted(logged[:3]) == [  # rows in flight together: logged in the order they started
        ("paid 1", 0.001, "gateway"),
        ("paid 2", 0.001, "gateway"),
        ("plain", pytest.approx(0.005), "prices"),
    ]
    assert {(cost, source) for _, cost, source in logged[3:]} == {(None, None)}  # from the log
    assert isinstance(frame, pd.DataFrame)


@pytest.mark.parametrize(
    ("api", "path"),
    [("messages", "/v1/messages"), ("generate-content", ":generateContent"), ("responses", "/v1/responses")],
)
def test_every_text_api(row_server, gateway, api, path):
    seen = []
    server = row_server(lambda prompt, srv: seen.append(prompt))
    batch = gateway(server).map("q {item}", ["a", "b"], api=api, system="be brief", progress=False)
    assert batch.text == ["re: q a", "re: q b"] and batch.usage["total_tokens"] == 10
    assert all(r.endpoint and path in r.endpoint for r in batch.results)


def test_a_reasoning_model_goes_to_responses(row_server, gateway):
    server = row_server()
    batch = gateway(server).map("q {item}", ["a"], model="o3-pro-mini", progress=False)
    assert batch.text == ["re: q a"] and batch.results[0].endpoint == "/v1/responses"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"template": "no fields"}, "template: has no {field}"),
        ({"template": "{missing}"}, "template: {missing} is not a field of the rows (they have: w)"),
        ({"concurrency": 0}, "concurrency: must be a positive whole number"),
        ({"rpm": -5}, "rpm: must be a positive number"),
        ({"tpm": "many"}, "tpm: must be a positive number"),
        ({"api": "completions"}, "api: must be one of chat, messages, generate-content, responses"),
        ({"on_error": "ignore"}, "on_error: must be 'record' or 'raise'"),
        ({"temperature": 3}, "temperature"),
        ({"data": "a string"}, "data: must be a DataFrame"),
        ({"data": {"w": [1]}}, "got a dict"),
        ({"max_retries": -1}, "max_retries"),
        ({"concurency": 4}, "concurency: is not an option of map; did you mean concurrency?"),
    ],
)
def test_bad_input_is_refused_before_any_request(row_server, gateway, options, message):
    server = row_server()
    arguments = {"template": "{w}", "data": [{"w": 1}], "progress": False, **options}
    with pytest.raises(InvalidRequest, match=".*".join(map(__import__("re").escape, message.split("*")))):
        gateway(server).map(arguments.pop("template"), arguments.pop("data"), **arguments)
    assert server.prompts == []


def test_the_key_stays_out_of_errors_and_the_log(row_server, gateway, home: Path):
    server = row_server(lambda prompt, srv: (401, {}, f"bad key {KEY}") if "1" in prompt else None)
    batch = gateway(server).map("row {item}", range(3), progress=False)
    assert batch.failed == 1 and "bad key sk-" in batch.errors[1]
    shown = repr(batch) + str(batch.errors) + str(batch.to_pandas().to_dict())
    assert KEY not in shown and KEY[-4:] in shown  # masked as sk-…wxyz
    dump = "\n".join(sqlite3.connect(home / "gatecell.db").iterdump())
    assert "row 0" in dump and "bad key" in dump and KEY not in dump


def test_limits_from_the_environment(row_server, gateway, monkeypatch):
    server = row_server(lambda prompt, srv: asyncio.sleep(0.01))  # answers overlap
    monkeypatch.setenv("GATECELL_MAP_CONCURRENCY", "2")
    batch = gateway(server).map("row {item}", range(20), progress=False)
    assert batch.done == 20 and server.max_in_flight == 2
    monkeypatch.setenv("GATECELL_RPM", "fast")
    with pytest.raises(Exception, match="GATECELL_RPM must be a non-negative number, got 'fast'"):
        gateway(server).map("row {item}", range(3), progress=False)
    assert len(server.prompts) == 20


def test_a_gateway_that_never_answers_times_the_row_out(row_server, gateway):
    server = row_server(lambda prompt, srv: srv.hold() if prompt == "row 1" else None)
    gw = gateway(server, request_timeout=1, max_retries=0)
    batch = gw.map("row {item}", range(4), concurrency=2, progress=False)
    assert batch.text == ["re: row 0", None, "re: row 2", "re: row 3"]
    assert batch.errors == {
        1: "timeout from POST /v1/chat/completions: ReadTimeout: no whole answer within 1 s"
    }


def test_a_burst_of_429s_halves_the_concurrency_and_slows_the_schedule_once():
    from gatecell.batch.pacing import Pacing

    pacing = Pacing(concurrency=8, rpm=600, tpm=None)
    assert pacing.requests is not None and pacing.requests.per_unit == pytest.approx(0.1)
    sent = time.monotonic()
    pacing.rate_limited_for(0.0, sent_at=sent)
    pacing.rate_limited_for(0.0, sent_at=sent)  # sent before the first 429 came back: same burst
    assert (pacing.limit, pacing.rate_limited) == (4, 2)
    assert pacing.requests.per_unit == pytest.approx(0.1 * 1.02)
    for _ in range(4):  # as many answers as the limit: one more in flight
        pacing.succeeded()
    assert pacing.limit == 5


def test_on_row_gets_each_row_as_it_finishes_and_the_batch_keeps_only_outcomes(row_server, gateway):
    server = row_server(lambda prompt, srv: (400, {}) if prompt == "row 2" else None)
    got: dict[int, tuple[str | None, str | None]] = {}
    batch = gateway(server).map(
        "row {item}", range(5), progress=False, on_row=lambda i, row: got.update({i: (row.text, row.error)})
    )
    assert got == {i: (reply_to(f"row {i}"), None) for i in (0, 1, 3, 4)} | {
        2: (None, "400 from POST /v1/chat/completions: no: 400")
    }
    assert (batch.done, batch.failed, batch.usage["total_tokens"]) == (4, 1, 20)  # the outcomes, kept
    assert batch.text == [None] * 5 and all(row.body is None for row in batch)  # the replies went to on_row
