"""Issue 33, item 11: a model that echoes the API key into a typed field does not put the key
in ``parse_error``, in a batch's errors, in the cell, or back on the wire in a repair round.

The gateway on loopback (wire_log.py) answers every typed request with the client's own key
where an integer goes. The key is a hex key of a gateway's own making: nothing in its shape
says "key", only the redaction of this process's keys masks it.
"""

from __future__ import annotations

import json

import pytest
from probes import pointed_at
from pydantic import BaseModel
from wire_log import KEY, WireLog

from gatecell.gateway import Gateway


class Review(BaseModel):
    stars: int


@pytest.fixture
def echoing():
    server = WireLog(reply=json.dumps({"stars": KEY}))
    yield server
    server.stop()


def _clean(text: str) -> bool:
    return KEY not in text and KEY[:12] not in text and KEY[-12:] not in text


def test_parse_error_of_a_call_and_its_repair_round_hold_no_key(echoing, home):
    with Gateway(base_url=echoing.base_url, api_key=KEY, structured="instruction") as gw:
        reply = gw.chat(model="m", messages=[{"role": "user", "content": "Rate it"}], schema=Review)
    assert reply.parsed is None
    assert reply.parse_error.startswith("stars: Input should be a valid integer")  # it says why...
    assert _clean(reply.parse_error), reply.parse_error  # ...without the key
    assert len(echoing.raw) == 2  # the answer, then one repair round
    assert _clean(echoing.raw[1].decode()), "the repair round sent the key back"


def test_a_batch_keeps_no_key_in_its_errors(echoing, home):
    with Gateway(base_url=echoing.base_url, api_key=KEY, structured="instruction") as gw:
        batch = gw.map("Rate {item}", ["a film", "a book"], schema=Review, progress=False, cache=False)
    assert batch.failed == 2
    for error in batch.errors.values():
        assert "stars: Input should be a valid integer" in error and _clean(error), error


def test_the_cell_shows_no_key(echoing, ipshell, cell_runner, monkeypatch, home):
    monkeypatch.setenv("GATECELL_API_KEY", KEY)
    ipshell.user_ns["Review"] = Review
    with pointed_at(ipshell, echoing.base_url):
        result, captured = cell_runner("%%chat --no-stream -m m --schema Review -o rated\nRate this film.")
    assert result.success, result.error_in_exec
    shown = [o.data["text/plain"] for o in captured.outputs]
    said = [line for text in shown for line in text.splitlines() if "did not validate" in line]
    assert said and "stars: Input should be a valid integer" in said[0]  # the problem is said...
    assert all(_clean(line) for line in said), said  # ...and the key is not
    assert _clean(ipshell.user_ns["rated"].parse_error)
