"""Forwarding to an upstream gateway for every model this gateway does not serve itself.

This path sits in front of every remote call, so it is kept lean on purpose: a small HTTP/1.1
client on asyncio streams with a pool of kept-alive connections (a general-purpose client
costs over a millisecond of CPU per request on a small machine; this one a tenth of that),
the request body passed on as the bytes that arrived (never parsed and re-serialised), the
caller's key swapped for the upstream key, and the answer relayed piece by piece as it
arrives, so memory stays at a few reads whatever the size of the answer. Upstream errors keep
their status and body.

The upstream key is what this gateway guards, so the forwarder trusts neither side: only the
SPEC endpoints (with WIRE-NOTES' embeddings and rerank) and their job poll paths go upstream
(`forwardable`), with the method each is for; hop-by-hop headers, cookies and the caller's
claims about its address stay on their own side; the upstream key, and anything shaped like a
key, is masked out of everything relayed back (`_Scrubber`); and a cap bounds how much of an
answer is relayed.

The upstream is reached the way every outgoing path of gatecell reaches a gateway: through
the proxy that ``GATECELL_PROXY`` or the environment (``HTTPS_PROXY``, ``HTTP_PROXY``,
``ALL_PROXY``, ``NO_PROXY``, read when the gateway starts) names for its address, if any
(`gatecell.wire.transport.proxies`). A proxy's refusal is logged here whole (its password masked); the
caller gets a 502 that names no proxy.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from urllib.parse import urlsplit

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gatecell.wire.transport.http11 import BROKEN as _BROKEN
from gatecell.wire.transport.http11 import Answer, Pool
from gatecell.wire.transport.proxies import proxy_for
from gatecell.wire.transport.settings import root_url
from gatecell.wire.util.secret import Secret

from .errors import Fail, is_generate_content

__all__ = ["Upstream", "forwardable"]

log = logging.getLogger("gatecell.local")

# What may go upstream: the SPEC 4 endpoints (and their unversioned twins, SPEC 4 note 2), and
# WIRE-NOTES' embeddings and rerank, for POST; the model list and the job poll paths of
# WIRE-NOTES for GET (and HEAD). Ids and model names are one plain segment: no '/', '%', '\\'
# or dot-only segment can steer the path.
_SEG = r"[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,255}"
_POST = re.compile(
    r"(?:/v1)?/(?:chat/completions|messages|responses|images/generations|audio/speech|videos|embeddings|rerank)"
    r"|/imgjob/submit/imagine|/musicjob/submit/music"
    rf"|(?:/v1beta|/v1)?/models/{_SEG}:(?:generateContent|streamGenerateContent)"
)
_GET = re.compile(
    rf"(?:/v1)?/(?:models|videos/{_SEG}(?:/content)?)|/imgjob/task/{_SEG}/fetch|/musicjob/fetch/{_SEG}"
)

# Hop-by-hop headers (RFC 9110 7.6.1), framing we redo ourselves, the credentials that belong
# to this gateway, not the upstream one, cookies, and what a caller could claim about its
# address to an upstream that trusts proxies. x-forwarded-* goes by prefix, and every header
# that Connection names goes too.
_HOP_BY_HOP = b"connection keep-alive proxy-connection transfer-encoding te trailer upgrade"
_DROP_REQUEST = frozenset(
    (
        _HOP_BY_HOP + b" host content-length expect proxy-authorization authorization x-api-key"
        b" x-goog-api-key cookie accept-encoding forwarded via x-real-ip x-client-ip true-client-ip"
        b" client-ip cf-connecting-ip fastly-client-ip x-cluster-client-ip x-originating-ip"
    ).split()
)
_DROP_RESPONSE = frozenset(
    (_HOP_BY_HOP + b" content-length proxy-authenticate set-cookie set-cookie2 date server").split()
)
# Bodies come back as they are so that keys in them can be seen (and masked).
_IDENTITY = (b"accept-encoding", b"identity")

# A key: the SPEC 5 form, sk- in any case and then key characters, as wire.secret.redact sees it.
# The pattern starts at the dash and looks behind for the sk: a literal first character lets
# the regex engine skip ahead like a bytes search, so a body without keys costs little.
_KEY_CHARS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
_IS_KEY_CHAR = tuple(c in _KEY_CHARS for c in range(256))
_SHAPE = rb"-(?<=[sS][kK]-)[A-Za-z0-9_\-]{8,}"
_SUSPECT = re.compile(rb"-(?<=[sS][kK]-)").search
_SK = (b"sk", b"sK", b"Sk", b"SK")
_AFTER_SK = 8  # key characters after sk- that make a key
_WINDOW = 256  # the longest tail of key characters held back until the next piece shows its end

_CONNECT_TIMEOUT = 10.0
_ANSWER_TIMEOUT = 600.0  # until the status line of an answer arrives
_MODELS_CAP = 8 << 20  # the model list is parsed whole


def forwardable(method: str, path: str) -> bool:
    """Whether ``method path`` is a SPEC endpoint, or a job poll path, that may go upstream."""
    if method == "POST":
        return _POST.fullmatch(path) is not None
    if method in ("GET", "HEAD"):
        return _GET.fullmatch(path) is not None
    return False


def _without(headers: list[tuple[bytes, bytes]], drop: frozenset[bytes]) -> list[tuple[bytes, bytes]]:
    """`headers` less those in `drop` and those the Connection header names (names are lower case)."""
    named = {t.strip() for n, v in headers if n == b"connection" for t in v.lower().split(b",")}
    named.discard(b"")
    return [
        (n, v) for n, v in headers if n not in drop and n not in named and not n.startswith(b"x-forwarded-")
    ]


class _Over(Exception):
    """The answer is longer than the relay cap."""


class _Scrubber:
    """Masks the upstream key, and anything shaped like a key, in a body that comes in pieces.

    A mask keeps the length (``sk-******``), so a Content-Length stays right and binary
    bodies keep their size. A key can be split across two reads: a tail of key characters
    (up to `_WINDOW`) is held back until the next piece shows how it ends; a longer run is
    sent but for its last characters (never an sk whose dash is held back), and a key that
    runs on past a piece is masked on into the next one.
    """

    __slots__ = ("_pattern", "_literal", "_carry", "_in_key")

    def __init__(self, pattern: re.Pattern[bytes], literal: bytes | None) -> None:
        self._pattern = pattern
        self._literal = literal  # the upstream key in lower case, when the shape does not cover it
        self._carry = b""
        self._in_key = False

    def whole(self, data: bytes) -> bytes:
        """`data` masked as one complete piece (a header value, a body read whole)."""
        return self._pattern.sub(_mask, data) if self.suspect(data) else data

    def feed(self, data: bytes, last: bool) -> bytes:
        """What of the body so far can go out, masked; `last` flushes what was held back."""
        if (  # the common case first, kept short: nothing held, nothing to mask or to hold back
            not self._carry
            and not self._in_key
            and self._literal is None
            and _SUSPECT(data) is None
            and (last or (data and not _IS_KEY_CHAR[data[-1]]))
        ):
            return data
        buf = self._carry + data if self._carry else data
        self._carry = b""
        lead = b""
        if self._in_key:  # the key the last piece ended in goes on
            rest = buf.lstrip(_KEY_CHARS)
            lead = b"*" * (len(buf) - len(rest))
            self._in_key = not rest and not last
            if not rest:
                return lead
            buf = rest
        size = len(buf)
        held = not last and bool(buf) and (self._literal is not None or _IS_KEY_CHAR[buf[-1]])
        cut = size - self._hold(buf) if held else size
        if not self.suspect(buf):
            self._carry = buf[cut:]
            return lead + buf[:cut]
        out = [lead]
        pos = 0
        for m in self._pattern.finditer(buf):
            start, end = m.span()
            if start >= cut:
                break
            out += [buf[pos:start], _mask(m)]
            pos = end
            if end > cut:  # a key runs into the held-back tail: it goes out whole, masked
                cut = end
                self._in_key = end == size and m.lastgroup == "shape" and not last
        out.append(buf[pos:cut])
        self._carry = buf[cut:]
        return b"".join(out)

    def _hold(self, buf: bytes) -> int:
        """How much of the end of `buf` may be the start of a key the next piece completes."""
        hold = 0
        if _IS_KEY_CHAR[buf[-1]]:
            tail = buf[-_WINDOW - 1 :]
            run = len(tail) - len(tail.rstrip(_KEY_CHARS))
            # A longer run needs only its last characters held: a dash before them has the
            # key characters after it that make a key, so the pattern sees it.
            hold = run if run <= _WINDOW else _AFTER_SK
        literal = self._literal
        if literal:
            end = buf[1 - len(literal) :].lower()
            hold = max([hold] + [n for n in range(len(literal) - 1, hold, -1) if end.endswith(literal[:n])])
        cut = len(buf) - hold
        if buf[cut - 1 : cut] in (b"s", b"S"):  # the pattern looks behind the dash for them
            hold += 1
        elif buf[max(cut - 2, 0) : cut] in _SK:
            hold += 2
        return hold

    def suspect(self, buf: bytes) -> bool:
        """A cheap look for anything the pattern could match."""
        return _SUSPECT(buf) is not None or (self._literal is not None and self._literal in buf.lower())


def _mask(m: re.Match[bytes]) -> bytes:
    keep = 1 if m.lastgroup == "shape" else 0  # sk- stays, so the reader sees a key was there
    return m.group()[:keep] + b"*" * (m.end() - m.start() - keep)


class _Relay(Response):
    """An upstream answer as an ASGI response, its body relayed piece by piece, masked and capped.

    The first piece is read before the answer begins, so an answer that breaks off or
    runs over the cap before then is still a clean 502. Past that point a broken or oversized
    answer cuts the client's connection instead (the server closes it when the response is
    left unfinished), so the client sees a truncated body, never one that looks whole.
    """

    def __init__(
        self, answer: Answer, headers: list[tuple[bytes, bytes]], scrubber: _Scrubber, cap: int
    ) -> None:
        self.status_code = answer.status
        self.raw_headers = headers
        self.background = None
        self._answer = answer
        self._scrubber = scrubber
        self._cap = cap
        self._seen = 0
        self.first = b""  # read by `Upstream._relay` before the answer begins

    async def pull(self) -> bytes:
        """The next masked piece to send; b"" only at the end."""
        while True:
            data = await self._answer.read()
            self._seen += len(data)
            if self._seen > self._cap:
                raise _Over
            done = self._answer.done
            piece = self._scrubber.feed(data, done)
            if piece or done:
                return piece

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send(
                {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
            )
            if self._answer.done:
                await send({"type": "http.response.body", "body": self.first})
                return
            await send({"type": "http.response.body", "body": self.first, "more_body": True})
            async with anyio.create_task_group() as group:  # a client that leaves stops the relay

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    group.cancel_scope.cancel()

                group.start_soon(watch)
                await self._rest(send)
                group.cancel_scope.cancel()
        finally:
            self._answer.release()

    async def _rest(self, send: Send) -> None:
        while not self._answer.done:
            try:
                piece = await self.pull()
            except _Over:
                log.warning("upstream answer over the %d byte relay cap: connection cut", self._cap)
                return
            except _BROKEN as exc:
                log.warning("upstream answer broke off (%s): connection cut", type(exc).__name__)
                return
            try:
                await send({"type": "http.response.body", "body": piece, "more_body": not self._answer.done})
            except OSError:  # the client left
                return


class Upstream:
    """The upstream gateway: a pool of connections to it, and the forwarding rules above."""

    def __init__(self, base_url: str, key: Secret | None, max_relay: int = 1 << 30) -> None:
        self.base_url = root_url(base_url)
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream must be an http(s) URL, got {base_url!r}")
        self._pool = Pool(
            self.base_url,
            connect_timeout=_CONNECT_TIMEOUT,
            answer_timeout=_ANSWER_TIMEOUT,
            proxy=proxy_for(self.base_url),
        )
        self._prefix = parts.path.rstrip("/").encode()
        self._key = key.reveal().encode() if key else None
        if self._key and not all(0x21 <= c <= 0x7E for c in self._key):
            raise ValueError("the upstream key holds characters an HTTP header cannot carry")
        self.max_relay = max_relay
        # The key shape covers SPEC 5 keys; another key is masked as itself (in any case).
        shaped = re.fullmatch(rb"[sS][kK]" + _SHAPE, self._key or b"")
        literal = self._key if self._key and len(self._key) >= 8 and not shaped else None
        self._literal = literal.lower() if literal else None
        key_alt = b"(?P<key>(?i:%s))|" % re.escape(literal) if literal else b""
        self._pattern = re.compile(key_alt + b"(?P<shape>" + _SHAPE + b")")

    async def aclose(self) -> None:
        await self._pool.aclose()

    def _credentials(self, path: str) -> list[tuple[bytes, bytes]]:
        if not self._key:
            return []
        if is_generate_content(path):
            return [(b"x-goog-api-key", self._key)]
        if path.startswith(("/v1/messages", "/messages")):
            return [(b"x-api-key", self._key), (b"authorization", b"Bearer " + self._key)]
        return [(b"authorization", b"Bearer " + self._key)]

    def _scrubber(self) -> _Scrubber:
        return _Scrubber(self._pattern, self._literal)

    async def send(
        self, method: str, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> Answer:
        """Send one request (see `Pool.send`) to ``target`` under the upstream's path."""
        return await self._pool.send(
            method, self._pool.request_bytes(method, self._prefix + target, headers, body)
        )

    async def forward(self, request: Request, body: bytes | None = None) -> Response:
        """Send `request` (with `body`, the bytes already read) upstream; relay the answer.

        Only what `forwardable` allows goes: anything else is a 404 here, and nothing is sent.
        """
        scope = request.scope
        method, path = scope["method"], scope["path"]
        if not forwardable(method, path):
            raise Fail(404, f"unknown route {method} {path}", code="unknown_route")
        if body is None:
            body = await request.body()
        target = path.encode()  # checked above: plain segments only, nothing left to encode
        if scope.get("query_string"):
            target += b"?" + scope["query_string"]
        headers = _without(scope["headers"], _DROP_REQUEST)
        headers += self._credentials(path)
        headers.append(_IDENTITY)
        try:
            answer = await self.send(method, target, headers, body)
        except (*_BROKEN, asyncio.TimeoutError) as exc:
            log.warning("upstream %s unreachable: %s: %s", self.base_url, type(exc).__name__, exc)
            raise Fail(502, f"upstream gateway unreachable ({type(exc).__name__})") from None
        try:
            return await self._relay(answer)
        except BaseException:
            answer.release()
            raise

    async def _relay(self, answer: Answer) -> _Relay:
        """The answer's headers cleaned, its first piece read: a 502 here is still clean."""
        scrubber = self._scrubber()
        headers = _without(answer.headers, _DROP_RESPONSE)
        if scrubber.suspect(answer.head):  # a header named like a key is no header of ours
            headers = [(n, scrubber.whole(v)) for n, v in headers if scrubber.whole(n) == n]
        if answer.length is not None and not answer.chunked and answer.status not in (204, 304):
            headers.append((b"content-length", b"%d" % answer.length))  # masks keep the length
        if not answer.empty and answer.coding not in (b"", b"identity"):
            raise Fail(502, "upstream gateway answered in a content coding it was not asked for")
        relay = _Relay(answer, headers, scrubber, self.max_relay)
        try:
            if not answer.empty and answer.length is not None and answer.length > self.max_relay:
                raise _Over
            relay.first = await relay.pull()
        except _Over:
            raise Fail(502, f"upstream answer over the {self.max_relay} byte relay cap") from None
        except _BROKEN as exc:
            raise Fail(502, f"upstream gateway broke off its answer ({type(exc).__name__})") from None
        return relay

    async def models(self) -> list[dict]:
        """Upstream's model entries (keys masked), or [] when it cannot be listed."""
        answer = None
        try:
            answer = await self.send(
                "GET",
                b"/v1/models",
                [(b"accept", b"application/json"), _IDENTITY, *self._credentials("")],
                b"",
            )
            if answer.status != 200 or answer.coding not in (b"", b"identity"):
                return []
            data, size = [], 0
            while piece := await answer.read():
                data.append(piece)
                size += len(piece)
                if size > min(self.max_relay, _MODELS_CAP):
                    raise ValueError("model list too long")
            listed = json.loads(self._scrubber().whole(b"".join(data))).get("data")
        except (*_BROKEN, asyncio.TimeoutError, AttributeError) as exc:
            log.warning("could not list upstream models: %s", type(exc).__name__)
            return []
        finally:
            if answer is not None:
                answer.release()
        if not isinstance(listed, list):
            return []
        return [m for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)]
