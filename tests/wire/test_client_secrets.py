"""The API key never shows: not in a repr, an exception, a traceback or a log line,
even when the gateway echoes it back."""

from __future__ import annotations

import asyncio
import json
import logging
import traceback

import pytest
from fault_server import KEY

from gatecell.wire.transport.errors import APIError, GatecellError, StreamError
from gatecell.wire.util.secret import Secret

HI = [{"role": "user", "content": "hi"}]
MASKED = Secret(KEY).masked


def exposed(*things: object) -> list[str]:
    """Every way an object may be shown, that contains the key."""
    views = []
    for thing in things:
        views += [repr(thing), str(thing)]
        if isinstance(thing, BaseException):
            views.append("".join(traceback.format_exception(thing)))
            views += [repr(a) for a in thing.args]
            views.append(json.dumps(getattr(thing, "body", None), default=str))
            views += [str(v) for v in vars(thing).values()]
    return [v for v in views if KEY in v]


def failures(gw, *calls) -> list[GatecellError]:
    caught = []
    for call in calls:
        with pytest.raises(GatecellError) as info:
            call(gw)
        caught.append(info.value)
    return caught


def test_the_gateway_and_its_settings_show_a_mask(make):
    gw = make("ok")
    assert exposed(gw, gw.api_key, gw._http, gw._http.headers) == []
    assert MASKED in repr(gw)


def test_a_gateway_echoing_the_key_in_errors(make, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    gw = make("echo-key")
    errors = failures(
        gw,
        lambda gw: gw.chat("m", HI),
        lambda gw: list(gw.chat("m", HI, stream=True)),
        lambda gw: gw.generate_content("g", "x"),
        lambda gw: gw.models(),
        lambda gw: gw.image("i", "cat"),
    )
    assert [type(e).__name__ for e in errors] == [
        "AuthenticationError",
        "StreamError",
        "AuthenticationError",
        "AuthenticationError",
        "AuthenticationError",
    ]
    assert all(MASKED in str(e) for e in errors)
    assert exposed(*errors) == []
    assert KEY not in caplog.text


def test_logs_of_ordinary_traffic_and_retries(make, caplog):
    caplog.set_level(logging.DEBUG)
    for scenario in ("ok", "5xx", "429s", "cut"):
        gw = make(scenario)
        for call in (lambda gw=gw: gw.chat("m", HI), lambda gw=gw: list(gw.chat("m", HI, stream=True))):
            try:
                call()
            except GatecellError:  # "cut" cuts both
                pass
    assert any("POST /v1/chat/completions model=m -> 200" in m for m in caplog.messages)
    assert KEY not in caplog.text


def test_results_and_streams_show_no_key(make):
    gw = make("ok")
    stream = gw.chat("m", HI, stream=True)
    stream.read()
    job = gw.imagine("castle")
    image = gw.image("i", "cat")
    assert (
        exposed(
            gw.chat("m", HI),
            gw.chat("m", HI).meta,
            stream,
            stream.meta,
            job,
            image,
            *image.images,
            gw.models(),
        )
        == []
    )


def test_async_errors_are_masked_too(make):
    async def main():
        async with make("echo-key", asynchronous=True) as gw:
            with pytest.raises(APIError) as first:
                await gw.chat("m", HI)
            stream = await gw.chat("m", HI, stream=True)
            with pytest.raises(StreamError) as second:
                await stream.aread()
            return first.value, second.value

    errors = asyncio.run(main())
    assert exposed(*errors) == []
    assert errors[1].partial_text == "Hi"
