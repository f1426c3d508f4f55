"""The API key as a value that cannot leak by accident, and the one redaction of everything else.

A `Secret` has no `__str__` that reveals it: repr, str, format and pickling-by-accident all
show a mask. Code that must send the key calls `.reveal()` at the last moment.

`redact()` is the one redaction gatecell applies to every text it did not write itself before
it is shown, stored, raised or sent on: what a gateway sends (error bodies, request ids,
headers), what the notebook gathers for a prompt (cells, errors), and every column of the log.
`redact_data()` does the same to JSON data (every string, and the values of keys named like
secrets), `redact_json()` to JSON text, decoded first, so that ``\\u`` escapes hide nothing.
`protect_logs()` applies it to every log record of httpx, httpcore and gatecell, since
httpcore's DEBUG lines carry response headers verbatim.

What is masked:

- **the keys this process uses**: every key a client was given (`protect_logs` remembers it)
  and every key passed in: in any letter case, split by whitespace or ``\\n`` escapes (a
  wrapped line), and base64-encoded at any of its three alignments;
- **key shapes** of common services, after gitleaks' ``config/gitleaks.toml`` (commit
  b58d3f1, rules ``openai-api-key``, ``anthropic-api-key``, ``stripe-access-token``,
  ``github-pat``/``-oauth``/``-app-token``/``-refresh-token``/``-fine-grained-pat``,
  ``gitlab-pat``, ``gcp-api-key``, ``aws-access-token``, ``slack-*-token``,
  ``huggingface-access-token``, ``jwt``, ``private-key``) and detect-secrets' plugins
  (commit 5e14193: ``jwt.py``, ``slack.py``, ``aws.py``): ``sk-…`` (OpenAI's ``sk-proj-``,
  Anthropic's ``sk-ant-``, the SPEC 5 form) in any case, ``sk_live_``/``rk_live_``,
  ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``/``github_pat_``, ``glpat-``, ``AIza…``,
  ``AKIA…`` and kin, ``xox?-``/``xapp-``, ``hf_``, JWTs, PEM private key blocks;
- **credentials in context**: ``Bearer``/``Basic`` tokens; the password of a URL
  (``postgresql://admin:pw@host``, detect-secrets' ``basic_auth.py``); and values assigned
  to names like ``api_key``, ``OPENAI_KEY``, ``db_pass``, ``password``, ``token`` or
  ``secret`` (detect-secrets' ``keyword.py`` denylist, gitleaks' ``generic-api-key``),
  whatever the literal: ``"…"``, ``b"…"``, ``f"…"``, triple-quoted over several lines, an
  annotated ``password: str = "…"``, a dict's ``"password": "…"``, or a bare
  ``password=hunter2`` / ``?api_key=…`` as in URLs, command lines and error texts. A name
  that ends in ``key`` alone (``sort_key``, ``primary_key``) masks only a value that looks
  random (gitleaks' entropy test), so code keeps its meaning.

Every pattern runs in time linear in the text: its repeats are bounded, or stop at a
character the next part needs, so no input makes it backtrack over what it has seen
(tests/security/test_stall.py holds 8 times the input to about 8 times the CPU). Each begins
with a literal (``sk-``, ``AIza``, ``://``, ``pass``...), boundaries checked after it, so
that the regular expression engine looks for the literal alone, as fast as a substring
search, and text with nothing of the kind costs one such search per rule (a short text, one
search for all of them). Masks are stable: redacting twice gives what redacting once gave.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["Secret", "redact", "redact_data", "redact_json", "suspect", "protect_logs", "LOGGERS", "MASK"]

MASK = "…"  # what stands where a value was


class Secret:
    """An API key. Shows as ``sk-…wxyz`` (the last four characters) and never more."""

    __slots__ = ("_value",)

    def __init__(self, value: str | Secret) -> None:
        if isinstance(value, Secret):
            value = value.reveal()
        self._value = value

    def reveal(self) -> str:
        return self._value

    @property
    def masked(self) -> str:
        return _masked(self._value)

    def __repr__(self) -> str:
        return f"Secret({self.masked!r})"

    def __str__(self) -> str:
        return self.masked

    def __format__(self, spec: str) -> str:
        return format(self.masked, spec)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Secret):
            return self._value == other._value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self):  # pickling would write the key to disk
        raise TypeError("a Secret cannot be pickled")


def _masked(value: str) -> str:
    return "***" if len(value) < 12 else f"{value[:3]}{MASK}{value[-4:]}"


# -- the keys of this process ------------------------------------------------------------


class _Key(NamedTuple):
    """One key and the forms it may take in a text."""

    masked: str
    marks: tuple[str, ...]  # lower-case pieces one of which any form of the key holds
    pattern: re.Pattern[str]  # the key, any case, whitespace or ``\n`` escapes between its characters
    encoded: tuple[str, ...]  # its base64 cores at the three alignments, standard and URL-safe


_SPLIT = r"(?:\s|\\[nrt])*"  # what a wrapped key may have between two characters


@functools.lru_cache(maxsize=256)
def _key(value: str) -> _Key:
    lower = value.lower()
    if len(value) < 12:  # too short to look for in pieces: only as a whole
        return _Key(_masked(value), (lower,), re.compile(re.escape(value), re.I | re.A), ())
    # Split once anywhere, one end of at least six characters stays whole.
    pattern = re.compile(_SPLIT.join(re.escape(c) for c in value), re.I | re.A)
    raw = value.encode()
    cores: list[str] = []
    for skip in range(3):  # the key at byte offset 0, 2 or 1 of a 3-byte group
        part = raw[skip:]
        core = base64.b64encode(part[: len(part) - len(part) % 3]).decode()
        cores += [core, core.replace("+", "-").replace("/", "_")]
    return _Key(_masked(value), (lower[:6], lower[-6:]), pattern, tuple(dict.fromkeys(cores)))


_KNOWN: tuple[str, ...] = ()  # the keys of every client of this process (`protect_logs`)
MIN_KEY = 8  # characters a key has at least to be masked as one: a shorter "key" would eat words


def _values(given: tuple[Secret | str | None, ...]) -> tuple[str, ...]:
    """The keys to mask: this process's and the given ones (this process's very tuple when
    it holds them all, as it holds every client's: the detector of it is cached)."""
    extra: dict[str, None] = {}
    for s in given:
        value = s.reveal() if isinstance(s, Secret) else s
        if value and len(value) >= MIN_KEY and value not in _KNOWN:
            extra[value] = None
    return (*_KNOWN, *extra) if extra else _KNOWN


def _unkey(text: str, lower: str, key: _Key) -> str:
    if any(mark in lower for mark in key.marks):
        text = key.pattern.sub(key.masked, text)
    for core in key.encoded:
        if core in text:
            text = text.replace(core, MASK)
    return text


# -- key shapes and credentials in context ------------------------------------------------
#
# Each pattern begins with a literal, so that SQLite-row-sized text with nothing of the kind
# costs one fast literal search per rule (a pattern that begins with a look-behind or a set
# is tried at every position, ten times slower). Boundaries are look-behinds placed after the
# literal. Rules marked ``folded`` run on the text lower-cased (any case matches).

Span = tuple[int, int, str]  # (start, end, replacement) in the text


class _Rule(NamedTuple):
    pattern: re.Pattern[str]
    folded: bool  # matched against the lower-cased text
    mask: Callable[[re.Match[str], str], Span | None]


def _shape(match: re.Match[str], text: str) -> Span:
    start, end = match.span()
    return start, end, _masked(text[start:end])


def _shape_from(back: int) -> Callable[[re.Match[str], str], Span]:
    """A shape whose literal starts ``back`` characters into the key (``rk_`` found at ``k_``)."""

    def mask(match: re.Match[str], text: str) -> Span:
        start, end = match.start() - back, match.end()
        return start, end, _masked(text[start:end])

    return mask


def _token(match: re.Match[str], text: str) -> Span | None:
    """``Bearer xyz``: the token masked, unless it is a word of prose ("Bearer authentication")."""
    start, end = match.span("token")
    token = text[start:end]
    if token.isalpha() and len(token) < 20:
        return None
    return start, end, _masked(token)


def _url_password(match: re.Match[str], text: str) -> Span | None:
    """The password of a URL, unless it is a mask already (``****``, as proxies' are shown)."""
    start, end = match.span("pw")
    return None if not text[start:end].strip("*" + MASK) else (start, end, MASK)


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _looks_random(value: str) -> bool:
    """A value that is likely a secret rather than a word or a name: gitleaks' test for its
    generic rule (ten characters or more, no spaces, Shannon entropy of 3 bits or more)."""
    return len(value) >= 10 and not any(c.isspace() for c in value) and _entropy(value) >= 3.0


# The names of secrets (detect-secrets' keyword.py denylist, gitleaks' generic-api-key
# keywords), each found by its literal; it must end the name (``tokenizer``, ``max_tokens``,
# ``api_key_file`` are no secrets' names). The long ones count glued to a longer name
# (``dbpassword``); the short ones only as a segment of it (``db_pass``, ``dbPass``,
# ``OPENAI_KEY``, ``apikey``), never inside a word (``compass``, ``monkey``).
_NAMES = {
    "key": r"key",
    "token": r"token",
    "secret": r"secrets?",
    "pass": r"pass(?:words?|wd|phrase)?",
    "pwd": r"pwd",
    "auth": r"auth(?:orization)?",
    "credential": r"credentials?",
}
_SHORT = frozenset(("key", "pass", "pwd", "auth", "authorization"))
_STRONG_KEY = re.compile(r"(?:api|access|secret|private|client)[_\-]?\Z", re.I)

# After the name: a closing quote or bracket (``"password":``, ``env["TOKEN"] =``), then an
# annotation (``password: str =``) or a separator (= : := => ==), then a literal of any kind
# (``"…"``, ``b'…'``, ``f"…"``, triple-quoted over lines; one cut short by a clip runs to the
# line's end); or a bare value right after ``=`` (``password=hunter2``, ``?api_key=…``: URLs,
# command lines, environment files, error texts; a kwarg's variable name too, which costs
# nothing). Every repeat is bounded or stops at a character the next part needs. A quote may
# come escaped (``\"``), as in JSON text: what is found there is then decoded and redacted.
_TAIL = (
    r"(?![a-z0-9])(?:(?:\\?[\"'`\]]){0,2}"
    r"(?:\s{0,8}:\s{0,8}[a-z_][\w.\[\], |]{0,60}=(?!=)|\s{0,8}(?::=|=>|==|=|:)(?![=>]))"
    r"\s{0,8}[rbfu]{0,2}"
    r"(?:(?:\\?\"){3}(?P<v3d>[\s\S]*?)(?:(?:\\?\"){3}|\Z)|(?:\\?'){3}(?P<v3s>[\s\S]*?)(?:(?:\\?'){3}|\Z)"
    r"|\\?\"(?P<vd>(?:[^\"\\\n]|\\[^\"\n])+)(?:\\?\")?|\\?'(?P<vs>(?:[^'\\\n]|\\[^'\n])+)(?:\\?')?"
    r"|`(?P<vb>[^`\n]+)`?)"
    r"|=(?P<bare>[^\s\"'`&,;()<>\[\]{}\\]+))"
)
_VALUES = ("v3d", "v3s", "vd", "vs", "vb", "bare")


def _name_kind(text: str, start: int, end: int) -> str | None:
    """Whether ``text[start:end]``, a secret's name word found in ``text``, names a secret:
    None (it is part of a word), ``"weak"`` (its value is masked only when it looks random) or
    ``"strong"``. Weak: a name that is only ``key`` at its end (``sort_key``, not ``API_KEY``
    nor ``OPENAI_KEY``), or ``token`` alone as a quoted key (a dict's, as in log
    probabilities)."""
    word = text[start:end]
    before = text[start - 1] if start else ""
    if word.lower() in _SHORT and before.isalnum():
        camel = before.islower() and word[0].isupper()
        if not camel and not (word.lower() == "key" and _STRONG_KEY.search(text, max(0, start - 8), start)):
            return None
    folded = word.lower()
    if folded == "key":
        strong = word.isupper() or _STRONG_KEY.search(text, max(0, start - 8), start)
        return "strong" if strong else "weak"
    if folded == "token":
        alone = before in ('"', "'", "`") or (start == 0 and end == len(text))
        return "weak" if alone else "strong"
    return "strong"


def _assigned(match: re.Match[str], text: str) -> Span | None:
    """The value masked, if the name is a secret's (`_name_kind`) and the value one: a bare
    value that is a call (``api_key=os.getenv(...)``, ``api_key=gatecell.dask.ship(key)``)
    is code, not a secret."""
    group = next(g for g in _VALUES if match.group(g) is not None)
    kind = _name_kind(text, match.start(), match.end("name"))
    start, end = match.span(group)
    if kind is None or (group == "bare" and text.startswith("(", end)):
        return None
    if kind == "weak" and not _looks_random(text[start:end]):
        return None
    return start, end, MASK


def _name_rule(literal: str) -> _Rule:
    return _Rule(re.compile(rf"(?P<name>{_NAMES[literal]}){_TAIL}"), True, _assigned)


_RULES = (
    # a PEM private key; its body is base64 and line breaks only: it ends at the next dash
    _Rule(
        re.compile(
            r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[A-Za-z0-9+/=\s]+"
            r"(?:-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----)?"
        ),
        False,
        lambda m, text: (m.start(), m.end(), f"-----BEGIN PRIVATE KEY-----{MASK}"),
    ),
    # "sk-" and a secret part, in any case (SPEC 5; OpenAI's sk-proj-, Anthropic's sk-ant-)
    _Rule(re.compile(r"sk-(?<![a-z0-9]sk-)[a-z0-9_\-]{8,}"), True, _shape),
    _Rule(
        re.compile(r"k_(?<=[sr]k_)(?<![A-Za-z0-9][sr]k_)(?:live|test|prod)_[A-Za-z0-9]{10,}"),
        False,
        _shape_from(1),
    ),
    _Rule(re.compile(r"gh(?<![A-Za-z0-9_]gh)[pousr]_[A-Za-z0-9]{30,}"), False, _shape),
    _Rule(re.compile(r"github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{30,}"), False, _shape),
    _Rule(re.compile(r"glpat-(?<![A-Za-z0-9_]glpat-)[A-Za-z0-9_\-]{20,}"), False, _shape),
    _Rule(re.compile(r"AIza(?<![A-Za-z0-9_]AIza)[A-Za-z0-9_\-]{30,}"), False, _shape),
    _Rule(
        re.compile(r"A(?<![A-Za-z0-9]A)(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])"),
        False,
        _shape,
    ),
    _Rule(re.compile(r"x(?<![a-z0-9]x)(?:ox[abposre]|app)-[a-z0-9\-]{10,}"), True, _shape),
    _Rule(re.compile(r"hf_(?<![A-Za-z0-9_]hf_)[A-Za-z0-9]{30,}"), False, _shape),
    # a JWT: a base64url JSON header ("eyJ"), a payload and perhaps a signature
    _Rule(
        re.compile(r"eyJ(?<![A-Za-z0-9_]eyJ)[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}(?:\.[A-Za-z0-9_\-]*)?"),
        False,
        _shape,
    ),
    _Rule(
        re.compile(r"b(?<![a-z0-9]b)(?:earer|asic)(?:\s|\\[nt]){1,8}(?P<token>[a-z0-9._~+/=\-]{8,})"),
        True,
        _token,
    ),
    # the password of a URL's user info; neither part may hold / ? # @ or white space (RFC 3986)
    _Rule(re.compile(r"://[^\s:/?#@\"'<>]{0,256}:(?P<pw>[^\s/?#@\"'<>]{1,256})@"), False, _url_password),
    *(_name_rule(literal) for literal in _NAMES),
)


# What every rule's match holds, lower-cased: a short text (a request id, a header) holding
# none of these, nor a piece of a key, is clean: one search tells, rather than one per rule.
_LITERALS = (
    "private key", "sk-", "k_live_", "k_test_", "k_prod_", "gh", "github_pat_", "glpat-", "aiza", "akia",
    "asia", "abia", "acca", "a3t", "xox", "xapp-", "hf_", "eyj", "bearer", "basic", "://", *_NAMES,
)  # fmt: skip
_SHORT_TEXT = 400  # characters below which that one search beats a search per rule


@functools.lru_cache(maxsize=64)
def _detector(values: tuple[str, ...]) -> re.Pattern[str]:
    pieces = [m for v in values for m in _key(v).marks] + [c.lower() for v in values for c in _key(v).encoded]
    return re.compile("|".join(re.escape(literal) for literal in (*_LITERALS, *pieces)))


# -- the redaction -------------------------------------------------------------------------


def _fold(text: str) -> str:
    """``text`` lower-cased, character for character (a few letters lower to two: those stay)."""
    lower = text.lower()
    return (
        lower if len(lower) == len(text) else "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    )


def _apply(text: str, spans: list[Span]) -> str:
    out, pos = [], 0
    for start, end, replacement in spans:
        out += [text[pos:start], replacement]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def suspect(text: str, *secrets: Secret | str | None) -> bool:
    """Whether `redact` may change ``text``; False means surely not. For a caller with many
    texts at once (a row of the log): join them, ask once."""
    return _suspect(text, _fold(text), _values(secrets))


def _suspect(text: str, lower: str, values: tuple[str, ...]) -> bool:
    if len(text) < _SHORT_TEXT:
        return _detector(values).search(lower) is not None
    for value in values:
        key = _key(value)
        if any(m in lower for m in key.marks) or any(c in text for c in key.encoded):
            return True
    return any(rule.pattern.search(lower if rule.folded else text) for rule in _RULES)


def redact(text: str, *secrets: Secret | str | None) -> str:
    """``text`` with every key of this process and every given one (in any case, split,
    base64-encoded), every key shape and every credential in context masked (see the module
    docstring)."""
    if not text:
        return text
    lower = _fold(text)
    values = _values(secrets)
    if len(text) < _SHORT_TEXT and _detector(values).search(lower) is None:
        return text
    for value in values:
        clean = _unkey(text, lower, _key(value))
        if clean is not text:
            text, lower = clean, _fold(clean)
    for rule in _RULES:
        subject = lower if rule.folded else text
        first = rule.pattern.search(subject)
        if first is None:
            continue
        spans: list[Span] = []
        for match in rule.pattern.finditer(subject, first.start()):
            found = rule.mask(match, text)
            if found is not None and (not spans or found[0] >= spans[-1][1]):
                spans.append(found)
        if spans:
            text = _apply(text, spans)
            lower = _fold(text)
    return text


_NAME_AT_END = re.compile(rf"(?:{'|'.join(_NAMES.values())})\Z", re.I)


def _named_secret(name: str, value: str) -> bool:
    """Whether ``value``, a string under the key ``name`` of JSON data, is a secret by its name."""
    found = _NAME_AT_END.search(name)
    if found is None or value == MASK:
        return False
    kind = _name_kind(name, found.start(), found.end())
    return kind == "strong" or (kind == "weak" and _looks_random(value))


def redact_data(
    value: Any, *secrets: Secret | str | None, keep: Callable[[dict[str, Any], str], bool] | None = None
) -> Any:
    """JSON-like data (dicts, lists, strings...) with every string redacted and the string
    value of a key named like a secret (``"api_key"``, ``"password"``) masked; the very same
    object when nothing changed. ``keep(mapping, key)`` says which values to leave as they
    are (bytes in base64, which hold no text)."""
    if isinstance(value, str):
        clean = redact(value, *secrets)
        return value if clean == value else clean
    if isinstance(value, dict):
        out, changed = {}, False
        for k, v in value.items():
            new_k = redact_data(k, *secrets)
            if keep is not None and keep(value, k):
                new_v: Any = v
            elif isinstance(v, str) and isinstance(k, str) and _named_secret(k, v):
                new_v = MASK
            else:
                new_v = redact_data(v, *secrets, keep=keep)
            changed = changed or new_k is not k or new_v is not v
            out[new_k] = new_v
        return out if changed else value
    if isinstance(value, (list, tuple)):
        items = [redact_data(v, *secrets, keep=keep) for v in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return type(value)(items)
        return value
    return value


def redact_json(text: str, *secrets: Secret | str | None) -> str:
    """JSON text with `redact_data` applied to what it decodes to, so that escapes
    (``\\u0073k-...``, ``https:\\/\\/``) hide nothing; re-encoded only when something was
    masked. Text that is not JSON is redacted as text."""
    if "\\u" not in text and "\\/" not in text and not suspect(text, *secrets):
        return text
    try:
        data = json.loads(text)
    except ValueError:
        return redact(text, *secrets)
    clean = redact_data(data, *secrets)
    if clean is data:
        return text
    return json.dumps(clean, ensure_ascii=False, separators=(",", ":"))


# -- logs ----------------------------------------------------------------------------------

# The loggers whose records may carry a key: httpcore logs response headers at DEBUG.
# Child loggers are listed too: a filter on a logger does not see its children's records.
LOGGERS = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.connection_pool",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
    "gatecell",
    "gatecell.local",
)


class _Redacting(logging.Filter):
    """Redacts a record's text (`redact`: the process's keys, key shapes, credentials).

    A filter on a logger runs only for records that logger is enabled for, so this costs
    nothing while logging is off. Arguments are merged into the message only when the
    message held a key, so formatters that read ``record.args`` keep working otherwise.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: keep what it holds, as text
            message = f"{record.msg} {record.args!r}"
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


_FILTER = _Redacting()


def protect_logs(key: Secret | None) -> None:
    """Remember ``key`` as one of this process's: from now on `redact` masks it wherever it
    appears (errors, request ids, the log, the notebook's context), and so does every record
    of `LOGGERS` and their children that exist now. Idempotent: one filter per logger,
    shared by every client."""
    global _KNOWN
    # A "key" of a few characters is no key: masking it everywhere would eat ordinary words.
    if key and len(key.reveal()) >= MIN_KEY and key.reveal() not in _KNOWN:
        _KNOWN = (*_KNOWN, key.reveal())
    names = set(LOGGERS)
    names.update(
        n for n in list(logging.root.manager.loggerDict) if n.startswith(("httpx.", "httpcore.", "gatecell."))
    )
    for name in names:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
