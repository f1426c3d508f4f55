"""The SSE parser: framing rules, and that no split of the bytes into reads changes the events."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gatecell.wire.transport._sse import Event, SSEParser, comment, encode


def parse(*reads: bytes) -> list[Event]:
    parser = SSEParser()
    events = [e for r in reads for e in parser.feed(r)]
    return events + parser.close()


def test_single_data_lines_and_done():
    assert [e.data for e in parse(b'data: {"a":1}\n\ndata: [DONE]\n\n')] == ['{"a":1}', "[DONE]"]


def test_line_ends_lf_crlf_cr_give_the_same_events():
    lf = parse(b"event: x\ndata: 1\ndata: 2\n\n")
    assert lf == parse(b"event: x\r\ndata: 1\r\ndata: 2\r\n\r\n") == parse(b"event: x\rdata: 1\rdata: 2\r\r")
    assert lf == [Event("1\n2", "x")]


def test_cr_at_the_end_of_a_read_and_lf_at_the_start_of_the_next():
    assert parse(b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n") == [Event("a"), Event("b")]
    # a lone CR at a boundary, followed by something other than LF, still ends the line
    assert parse(b"data: a\r", b"\r") == [Event("a")]
    # an empty read between the CR and its LF changes nothing (found by the property test)
    assert parse(b"event: e\r", b"", b"\ndata: x\r\n\r\n") == [Event("x", "e")]


def test_comments_are_ignored_and_keepalives_give_no_event():
    parser = SSEParser()
    assert parser.feed(comment("PING")) == []
    assert parser.feed(b": keep-alive\n\n:\n\n") == []
    assert parser.feed(b": note\ndata: x\n\n") == [Event("x")]


def test_field_rules():
    # one leading space is dropped, not two; a line without a colon is a field with an empty value
    assert parse(b"data:  two\n\n") == [Event(" two")]
    assert parse(b"data:nospace\n\n") == [Event("nospace")]
    assert parse(b"data\ndata\n\n") == [Event("\n")]
    assert parse(b"garbage\nbogus: 1\n\n") == []
    assert parse(b"event: only-name\n\n") == []


def test_id_and_retry_persist():
    events = parse(b"id: 7\nretry: 1500\ndata: a\n\ndata: b\n\nretry: soon\nid: 8\0\ndata: c\n\n")
    assert [(e.id, e.retry) for e in events] == [("7", 1500), ("7", 1500), ("7", 1500)]


def test_unicode_line_separators_inside_data_are_not_line_ends():
    raw = '{"t":"a\u2028b\u2029c\x85d"}'.encode()
    assert parse(b"data: " + raw[:9], raw[9:] + b"\n\n") == [Event(raw.decode())]


def test_bom_is_dropped_and_an_unterminated_last_event_is_kept():
    assert parse(b"\xef\xbb\xbfdata: a\n\ndata: b") == [Event("a"), Event("b")]


def test_several_events_in_one_read_and_half_of_one():
    parser = SSEParser()
    assert parser.feed(b"data: 1\n\ndata: 2\n\ndata: 3") == [Event("1"), Event("2")]
    assert parser.pending == len(b"data: 3")
    assert parser.feed(b"\n\n") == [Event("3")]


def test_encode_round_trips():
    events = [encode({"a": "x\ny"}), encode("line1\nline2\r\nline3", event="e", id="9"), comment("k")]
    assert parse(*events) == [Event('{"a":"x\\ny"}'), Event("line1\nline2\nline3", "e", "9")]


_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12)
_event = st.tuples(
    st.lists(_text, min_size=1, max_size=3),
    st.one_of(st.none(), st.text("abcdefghijklmnopqrstuvwxyz._", min_size=1, max_size=8)),
    st.booleans(),  # preceded by a comment
    st.booleans(),  # followed by an extra blank line
    st.sampled_from(["data: ", "data:"]),
    st.one_of(st.none(), st.text("0123456789abc", min_size=1, max_size=4)),  # id
)


@st.composite
def sse_streams(draw) -> tuple[bytes, list[Event]]:
    eol = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    out = b""
    expected = []
    last_id = None
    for lines, name, with_comment, blank, field, id in draw(st.lists(_event, max_size=8)):
        if with_comment:
            out += b": ping" + eol + eol
        if name:
            out += b"event: " + name.encode() + eol
        if id:
            out += b"id: " + id.encode() + eol
            last_id = id
        for line in lines:
            out += field.encode() + line.encode() + eol
        out += eol + (eol if blank else b"")
        data = [line[1:] if field == "data:" and line[:1] == " " else line for line in lines]
        expected.append(Event("\n".join(data), name or "message", last_id))
    return out, expected


@settings(max_examples=200, deadline=None)
@given(stream_and_events=sse_streams(), data=st.data())
def test_any_split_into_reads_gives_the_same_events(
    stream_and_events: tuple[bytes, list[Event]], data: st.DataObject
):
    stream, expected = stream_and_events
    assert parse(stream) == expected
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    reads = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    assert parse(*reads) == parse(stream)
    assert parse(*[stream[i : i + 1] for i in range(len(stream))]) == parse(stream)
