"""The lean HTTP/1.1 client (`gatecell.wire.transport.http11`) against purpose-built loopback servers.

Each server (`loopback.Loopback`) is a raw asyncio server whose every byte a test writes by
hand, so framing, keep-alive, closes and malformed heads are exactly what the test says. The
head parser is also held to h11's verdicts in memory, over generated heads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import h11
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loopback import OK, Loopback, answering

from gatecell.wire.transport.http11 import BROKEN, Answer, Pool, ProtocolError, parse_head


async def send(pool: Pool, method: str = "POST", body: bytes = b"{}") -> Answer:
    return await pool.send(method, pool.request_bytes(method, b"/v1/x", [(b"accept", b"*/*")], body))


async def whole(pool: Pool, method: str = "POST", cap: int = 1 << 20) -> tuple[Answer, bytes]:
    answer = await send(pool, method)
    try:
        return answer, await answer.body(cap)
    finally:
        answer.release()


def run(handler, test: Callable[[Loopback, Pool], Awaitable[object]], **options: object) -> Loopback:
    async def main() -> Loopback:
        async with Loopback(handler) as server:
            pool = Pool(server.url, **options)  # type: ignore[arg-type]
            try:
                await asyncio.wait_for(test(server, pool), 60)  # a guard against a hang, not a measure
            finally:
                await pool.aclose()
            return server

    return asyncio.run(main())


# -- framing ------------------------------------------------------------------------------


def test_content_length_and_keep_alive():
    async def test(server: Loopback, pool: Pool) -> None:
        for _ in range(3):
            answer, body = await whole(pool)
            assert (answer.status, answer.reason, body, answer.length) == (200, b"OK", b"ok", 2)
            assert answer.headers == [(b"content-type", b"application/json"), (b"content-length", b"2")]
            assert answer.done and not answer.empty

    server = run(answering(OK), test)
    assert server.connections == 1 and len(server.requests) == 3
    assert server.requests[0].startswith(b"POST /v1/x HTTP/1.1\r\nhost: 127.0.0.1:")


CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5;name=value\r\nhello\r\n"
    b'6 ; a=b;c="d e"\r\n world\r\n'
    b"11170\r\n" + b"x" * 70000 + b"\r\n"  # past one read
    b"0;last\r\nX-Trailer: t\r\nX-Empty:\r\n\r\n"
)


def test_chunked_with_extensions_and_trailers():
    async def test(server: Loopback, pool: Pool) -> None:
        answer, body = await whole(pool)
        assert answer.chunked and answer.length is None
        assert body == b"hello world" + b"x" * 70000
        answer = await send(pool)
        pieces = []
        while piece := await answer.read():
            pieces.append(piece)
        assert pieces[:2] == [b"hello", b" world"] and b"".join(pieces[2:]) == b"x" * 70000
        assert answer.done and await answer.read() == b""

    server = run(answering(CHUNKED), test)
    assert server.connections == 1  # the trailers were read: the connection went back


def test_read_to_close():
    async def test(server: Loopback, pool: Pool) -> None:
        for _ in range(2):
            answer, body = await whole(pool)
            assert answer.length is None and not answer.chunked
            assert body == b"all of it, " * 10000

    server = run(answering(b"HTTP/1.1 200 OK\r\n\r\n" + b"all of it, " * 10000, close=True), test)
    assert server.connections == 2  # a body read to its close leaves nothing to reuse


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
    ],
    ids=["connection-close", "http-1.0"],
)
def test_answers_that_end_their_connection_are_not_reused(answer: bytes):
    async def test(server: Loopback, pool: Pool) -> None:
        for _ in range(2):
            assert (await whole(pool))[1] == b"ok"

    assert run(answering(answer), test).connections == 2


def test_interim_answers_are_skipped():
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n"

    async def test(server: Loopback, pool: Pool) -> None:
        answer, body = await whole(pool)
        assert (answer.status, body) == (200, b"ok")
        assert answer.headers[0] == (b"content-type", b"application/json")

    run(answering(interim + OK), test)


def test_101_is_refused():
    async def test(server: Loopback, pool: Pool) -> None:
        with pytest.raises(ProtocolError, match="101"):
            await send(pool)

    run(answering(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n"), test)


@pytest.mark.parametrize(
    ("method", "answer"),
    [
        ("HEAD", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"),
        ("POST", b"HTTP/1.1 204 No Content\r\n\r\n"),
        ("GET", b'HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\nETag: "x"\r\n\r\n'),
    ],
    ids=["HEAD", "204", "304"],
)
def test_no_body(method: str, answer: bytes):
    async def test(server: Loopback, pool: Pool) -> None:
        first, body = await whole(pool, method)
        assert first.empty and first.done and body == b""
        assert (await whole(pool, "POST"))[1] == b"ok"  # what came next is the next answer

    server = run(answering(answer, OK), test)
    assert server.connections == 1


# -- connections ----------------------------------------------------------------------------


def test_a_closed_kept_alive_connection_is_retried_once():
    async def test(server: Loopback, pool: Pool) -> None:
        assert (await whole(pool))[1] == b"ok"
        await asyncio.sleep(0.05)  # let the close arrive: the pooled connection is stale now
        assert (await whole(pool))[1] == b"ok"

    server = run(answering(OK, close=True), test)
    assert server.connections == 2 and len(server.requests) == 2


def test_a_new_connection_closed_before_answering_is_an_error():
    async def hang_up(server: Loopback, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.request(reader)

    async def test(server: Loopback, pool: Pool) -> None:
        with pytest.raises(ConnectionError, match="closed the connection"):
            await send(pool)

    server = run(hang_up, test)
    assert server.connections == 1  # not retried


@pytest.mark.parametrize(
    "cut",
    [b"HTTP/1.1 200 OK\r\nContent-", b"HTTP/1.1 100 Continue\r\n\r\n"],
    ids=["part-of-a-head", "interim"],
)
def test_no_retry_once_part_of_an_answer_came(cut: bytes):
    """A kept-alive connection that breaks off once an answer began is not retried: the
    server had begun on the request, and a POST is not sent twice."""

    async def handler(server: Loopback, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.request(reader)
        writer.write(OK)
        await server.request(reader)
        writer.write(cut)

    async def test(server: Loopback, pool: Pool) -> None:
        assert (await whole(pool))[1] == b"ok"
        with pytest.raises(ConnectionError):
            await send(pool)

    server = run(handler, test)
    assert server.connections == 1 and len(server.requests) == 2


def test_64_concurrent_requests_then_64_more_reuse_every_connection():
    async def test(server: Loopback, pool: Pool) -> None:
        for _ in range(2):
            results = await asyncio.gather(*(whole(pool) for _ in range(64)))
            assert [body for _, body in results] == [b"ok"] * 64

    server = run(answering(OK, delay=0.01), test, idle=64)
    assert server.connections == 64 and len(server.requests) == 128


def test_a_slow_head_times_out():
    async def dribble(server: Loopback, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.request(reader)
        for byte in OK:  # never whole within the timeout
            writer.write(bytes([byte]))
            await asyncio.sleep(0.1)

    async def test(server: Loopback, pool: Pool) -> None:
        with pytest.raises(asyncio.TimeoutError):
            await send(pool)
        assert not pool._idle  # the connection was dropped, not pooled

    run(dribble, test, answer_timeout=0.3)


# -- malformed answers ---------------------------------------------------------------------

MALFORMED = {
    "obs-fold": b"HTTP/1.1 200 OK\r\nX-A: 1\r\n  folded\r\nContent-Length: 2\r\n\r\nok",
    "obs-fold-tab": b"HTTP/1.1 200 OK\r\nX-A: 1\r\n\tfolded\r\nContent-Length: 2\r\n\r\nok",
    "bare-lf-status": b"HTTP/1.1 200 OK\nContent-Length: 2\r\n\r\nok",
    "bare-lf-field": b"HTTP/1.1 200 OK\r\nX-A: 1\nContent-Length: 2\r\n\r\nok",
    "bare-cr": b"HTTP/1.1 200 OK\r\nX-A: 1\rX-B: 2\r\nContent-Length: 2\r\n\r\nok",
    "nul": b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nok",
    "control": b"HTTP/1.1 200 OK\r\nX-A: a\x01b\r\nContent-Length: 2\r\n\r\nok",
    "del": b"HTTP/1.1 200 OK\r\nX-A: a\x7fb\r\nContent-Length: 2\r\n\r\nok",
    "name-space": b"HTTP/1.1 200 OK\r\nX A: 1\r\nContent-Length: 2\r\n\r\nok",
    "space-before-colon": b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok",
    "empty-name": b"HTTP/1.1 200 OK\r\n: 1\r\nContent-Length: 2\r\n\r\nok",
    "name-paren": b"HTTP/1.1 200 OK\r\nX(A): 1\r\nContent-Length: 2\r\n\r\nok",
    "no-colon": b"HTTP/1.1 200 OK\r\nJust some text\r\nContent-Length: 2\r\n\r\nok",
    "length-word": b"HTTP/1.1 200 OK\r\nContent-Length: two\r\n\r\nok",
    "length-sign": b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
    "length-hex": b"HTTP/1.1 200 OK\r\nContent-Length: 0x2\r\n\r\nok",
    "length-list": b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nok",
    "length-conflict": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
    "length-huge": b"HTTP/1.1 200 OK\r\nContent-Length: 123456789012345678901\r\n\r\nok",
    "te-gzip": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nok",
    "te-gzip-chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    "te-twice": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
    "te-and-length": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
    "status-long": b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok",
    "status-low": b"HTTP/1.1 099 Low\r\nContent-Length: 2\r\n\r\nok",
    "status-high": b"HTTP/1.1 600 High\r\nContent-Length: 2\r\n\r\nok",
    "version-2": b"HTTP/2 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "not-http": b"ICY 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "two-spaces": b"HTTP/1.1  200 OK\r\nContent-Length: 2\r\n\r\nok",
}


@pytest.mark.parametrize("answer", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_heads_raise(answer: bytes):
    async def test(server: Loopback, pool: Pool) -> None:
        with pytest.raises(ProtocolError):
            await send(pool)

    run(answering(answer), test)
    with pytest.raises(ProtocolError):  # and the parser alone says the same
        parse_head(answer[: answer.index(b"\r\n\r\n") + 4])


MALFORMED_CHUNKS = {
    "size-hex-prefix": b"0x2\r\nok\r\n0\r\n\r\n",
    "size-sign": b"+2\r\nok\r\n0\r\n\r\n",
    "size-underscore": b"1_0\r\n0123456789abcdef\r\n0\r\n\r\n",
    "size-space-first": b" 2\r\nok\r\n0\r\n\r\n",
    "size-17-digits": b"00000000000000002\r\nok\r\n0\r\n\r\n",
    "size-bare-lf": b"2\nok\r\n0\r\n\r\n",
    "longer-than-size": b"2\r\nokay\r\n0\r\n\r\n",
    "trailer-obs-fold": b"2\r\nok\r\n0\r\nX-T: 1\r\n folded\r\n\r\n",
    "trailer-no-colon": b"2\r\nok\r\n0\r\nnot a field\r\n\r\n",
}


@pytest.mark.parametrize("chunks", list(MALFORMED_CHUNKS.values()), ids=list(MALFORMED_CHUNKS))
def test_malformed_chunks_raise(chunks: bytes):
    async def test(server: Loopback, pool: Pool) -> None:
        answer = await send(pool)
        with pytest.raises(ProtocolError):
            await answer.body(1 << 20)
        answer.release()

    run(answering(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks), test)


def test_lenient_where_the_grammar_allows():
    head = parse_head(
        b"HTTP/1.1 200 \r\nX-Obs: caf\xc3\xa9 \xff\r\nX-Empty:\r\nX-Tabs:\t a \t b\t \r\n"
        b"Content-Length: 2\r\ncontent-length: 2\r\n\r\n"
    )
    assert head.reason == b"" and head.length == 2 and head.keep_alive
    assert head.headers[:3] == [(b"x-obs", b"caf\xc3\xa9 \xff"), (b"x-empty", b""), (b"x-tabs", b"a \t b")]
    assert parse_head(b"HTTP/1.1 404\r\n\r\n").status == 404  # no reason at all


@pytest.mark.timeout(60)  # linear: well under a second; a backtracking pattern: many minutes
@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nX:" + b" " * (1 << 20) + b"\x01\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX: a" + b" \t" * (1 << 19) + b"\x01\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"X-A: b c\r\n" * (1 << 16) + b"X-A: b \x00\r\n\r\n",
    ],
    ids=["spaces", "spaced-words", "many-fields"],
)
def test_a_hostile_head_costs_linear_time(head: bytes):
    with pytest.raises(ProtocolError):
        parse_head(head)


# -- limits -------------------------------------------------------------------------------


def test_a_declared_length_past_the_cap_is_refused_before_reading():
    async def handler(server: Loopback, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + b"x" * 10)
        await asyncio.Event().wait()  # the rest never comes: reading it would hang

    async def test(server: Loopback, pool: Pool) -> None:
        answer = await send(pool)
        with pytest.raises(OverflowError):
            await answer.body(1000)
        answer.release()

    run(handler, test)


CHUNKS = b"".join(b"40\r\n" + b"x" * 64 + b"\r\n" for _ in range(20)) + b"0\r\n\r\n"


@pytest.mark.parametrize(
    ("answer", "close"),
    [
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + CHUNKS, False),
        (b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 1280, True),
    ],
    ids=["chunked", "to-close"],
)
def test_a_body_past_the_cap_overflows(answer: bytes, close: bool):
    async def test(server: Loopback, pool: Pool) -> None:
        first = await send(pool)
        with pytest.raises(OverflowError):
            await first.body(300)
        first.release()
        assert (await whole(pool, cap=1280))[1] == b"x" * 1280  # up to the cap is fine

    run(answering(answer, close=close), test)


def test_huge_chunk_sizes():
    async def handler(server: Loopback, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n" + b"x" * 5000
        )

    async def test(server: Loopback, pool: Pool) -> None:
        answer = await send(pool)
        with pytest.raises(OverflowError):  # the cap, not the size the server claims, bounds it
            await answer.body(1000)
        answer.release()
        answer = await send(pool)
        with pytest.raises(asyncio.IncompleteReadError):  # and read piece by piece, it ends cut short
            while await answer.read():
                pass
        answer.release()

    server = run(handler, test)
    assert server.connections == 2


# -- the parser against h11 ----------------------------------------------------------------


def _h11(head: bytes) -> tuple[int, list[tuple[bytes, bytes]]] | None:
    """What h11 reads of ``head`` as the answer to a GET, None when it refuses it."""
    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method="GET", target="/", headers=[("host", "x")]))
    conn.send(h11.EndOfMessage())
    conn.receive_data(head)
    try:
        event = conn.next_event()
    except h11.RemoteProtocolError:
        return None
    if not isinstance(event, h11.Response | h11.InformationalResponse):
        return None
    return event.status_code, list(event.headers)


# Mostly well-formed pieces, so that about half the heads are read and compared, and a few
# of everything h11 or RFC 9112 refuses.
_NAMES = st.sampled_from(
    [b"X-A", b"Content-Type", b"content-length", b"Transfer-Encoding", b"Connection", b"x.y~z!"] * 4
    + [b"", b"X A", b"X(A)", b"\xe9", b" X-A"]
)
_GOOD_VALUES = st.sampled_from([b"", b"2", b"chunked", b"Chunked", b"close", b" 2 ", b"a \t b", b"\xff\x80"])
_VALUES = st.one_of(
    _GOOD_VALUES,
    _GOOD_VALUES,
    _GOOD_VALUES,
    st.sampled_from([b"2, 2", b"gzip", b"keep-alive, close", b"\x00", b"a\x7fb", b"\x1b[0m"]),
    st.binary(max_size=6).map(lambda b: bytes(c for c in b if c not in b"\r\n")),
)
_SEPARATORS = st.sampled_from([b": ", b":", b":\t", b":  "] * 3 + [b" : ", b" :"])
_LINE_ENDS = st.sampled_from([b"\r\n"] * 24 + [b"\n", b"\r", b"\r\n ", b"\r\n\t"])
_STATUS_LINES = st.sampled_from(
    [b"HTTP/1.1 200 OK", b"HTTP/1.0 404 Not Found", b"HTTP/1.1 204", b"HTTP/1.1 103 Early Hints"] * 3
    + [b"HTTP/1.1 99 x", b"HTTP/1.1 200 \x00", b"HTTP/1.1 2000", b"http/1.1 200 OK"]
)


@st.composite
def _heads(draw: st.DrawFn) -> bytes:
    head = draw(_STATUS_LINES) + draw(_LINE_ENDS)
    for _ in range(draw(st.integers(0, 4))):
        head += draw(_NAMES) + draw(_SEPARATORS) + draw(_VALUES) + draw(_LINE_ENDS)
    return head + b"\r\n"


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_heads())
def test_the_parser_refuses_what_h11_refuses_and_reads_the_rest_as_h11(head: bytes):
    try:
        ours = parse_head(head)
    except ProtocolError:
        return
    assert isinstance(ours, tuple)
    theirs = _h11(head)
    assert theirs is not None, f"h11 refuses {head!r}, which was read"
    assert (ours.status, _as_h11(ours.headers)) == theirs


def _as_h11(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Headers as h11 hands them over: one Content-Length of identical copies, and
    Transfer-Encoding in lower case (the same meaning, another spelling)."""
    out: list[tuple[bytes, bytes]] = []
    for name, value in headers:
        if name == b"content-length" and (name, value) in out:
            continue
        out.append((name, value.lower() if name == b"transfer-encoding" else value))
    return out


def test_broken_covers_every_failure_of_an_exchange():
    assert issubclass(ProtocolError, BROKEN) and issubclass(asyncio.IncompleteReadError, BROKEN)
