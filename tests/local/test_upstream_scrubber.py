"""Masking keys in relayed bodies that arrive in pieces: cut anywhere, the result is the same.

The forwarder masks keys piece by piece as an answer is relayed (tests/security has the end-to-end
tests). Here hypothesis cuts bodies full of keys, near-keys and long runs of key characters at
random places, and checks the streamed result against masking the whole body at once, with a
reference written independently of the implementation.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from gatecell.local.upstream import Upstream
from gatecell.wire.util.secret import Secret

KEY_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
SHAPED = "sk-upstream-Secr3tKey-0123456789abcdef"
ODD = "Gw.key/With+Other:chars=0042"  # an upstream key that is not shaped like sk-...
WINDOW = 256


def reference(data: bytes) -> bytes:
    return re.sub(rb"[sS][kK]-[A-Za-z0-9_\-]{8,}", lambda m: m[0][:3] + b"*" * (len(m[0]) - 3), data)


def cased(draw, text: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
    return "".join(c.upper() if f else c.lower() for c, f in zip(text, flips, strict=True))


@st.composite
def bodies(draw, key: str) -> bytes:
    """Keys (ours, in any case, and other shapes), near misses, long key-character runs, text."""
    parts = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["key", "shape", "short", "run", "text", "bytes"]))
        if kind == "key":
            parts.append(cased(draw, key))
        elif kind == "shape":
            parts.append(cased(draw, "sk-") + draw(st.text(KEY_CHARS, min_size=0, max_size=40)))
        elif kind == "short":  # sk- with fewer than 8 key characters: not a key
            parts.append("sk-" + draw(st.text(KEY_CHARS, max_size=7)) + " ")
        elif kind == "run":
            parts.append(draw(st.sampled_from(["a", "k", "s", "-"])) * draw(st.integers(200, 700)))
        elif kind == "text":
            parts.append(draw(st.text(' \n":{}*.,/+=', max_size=10)))
        else:
            parts.append(draw(st.binary(max_size=20)).decode("latin-1"))
    return "".join(parts).encode("latin-1")


def streamed(upstream: Upstream, data: bytes, cuts: list[int], end_apart: bool) -> bytes:
    """`data` fed in pieces cut at `cuts`; the end told with the last piece or after it."""
    scrubber = upstream._scrubber()
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    pieces = [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)] or [b""]
    out = []
    for i, piece in enumerate(pieces):
        out.append(scrubber.feed(piece, last=not end_apart and i == len(pieces) - 1))
        assert len(scrubber._carry) <= WINDOW  # what is held back stays bounded
    if end_apart:
        out.append(scrubber.feed(b"", last=True))
    return b"".join(out)


@settings(max_examples=300, deadline=None)
@given(data=bodies(SHAPED), cuts=st.lists(st.integers(0, 10_000), max_size=12), end_apart=st.booleans())
def test_a_body_cut_anywhere_is_masked_as_if_whole(data, cuts, end_apart):
    upstream = Upstream("http://127.0.0.1:9", Secret(SHAPED))
    out = streamed(upstream, data, cuts, end_apart)
    assert out == reference(data)
    assert upstream._scrubber().whole(data) == out


@settings(max_examples=300, deadline=None)
@given(data=bodies(ODD), cuts=st.lists(st.integers(0, 10_000), max_size=12), end_apart=st.booleans())
def test_a_key_of_another_shape_is_masked_in_any_case(data, cuts, end_apart):
    upstream = Upstream("http://127.0.0.1:9", Secret(ODD))
    out = streamed(upstream, data, cuts, end_apart)
    assert len(out) == len(data)
    assert ODD.lower().encode() not in out.lower()
    assert not re.search(rb"[sS][kK]-[A-Za-z0-9_\-]{8,}", out)
    assert all(
        a == b or b == ord("*") for a, b in zip(data, out, strict=True)
    )  # masks, and nothing else changes
    assert upstream._scrubber().whole(data) == out


def test_every_cut_around_a_key_that_ends_a_long_run():
    """A key straight after a run of key characters longer than the look-back window, cut once
    anywhere, or twice anywhere inside it: the held-back tail must still catch its sk-."""
    upstream = Upstream("http://127.0.0.1:9", Secret(SHAPED))
    for run in (WINDOW - 1, WINDOW, WINDOW + 1, WINDOW + 9, 2 * WINDOW):
        data = b"a" * run + SHAPED.upper().encode() + b" tail"
        expected = reference(data)
        for i in range(len(data) + 1):
            assert streamed(upstream, data, [i], end_apart=False) == expected, (run, i)
        for i in range(run - 12, run + len(SHAPED) + 1):
            for j in range(i, run + len(SHAPED) + 1):
                assert streamed(upstream, data, [i, j], end_apart=True) == expected, (run, i, j)
