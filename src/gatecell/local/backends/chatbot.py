"""The offline chat model ``local-chat``: a rule-based stand-in, not a language model.

It exists so that every conversation path works with no key and no network. Its replies are
a pure function of the conversation (same input, same bytes), readable, and honest about what
it is: it answers simple arithmetic, counting and "say X" requests, answers "write python
..." with a stub in a fenced code block, remembers a name told earlier in the conversation,
follows a few system-prompt styles (uppercase, brief, JSON, pirate), and otherwise describes
what it received.

Its cost is linear in the conversation, whatever the text: every pattern is written so that
the regex engine never backtracks over a long run (tests/security/test_stall.py grows
adversarial inputs and checks the growth), and at most `_MAX_TRIES` candidate expressions are
evaluated. What it cannot answer sensibly (a result too long to print, content nested absurdly
deep) raises `Refused`, which the gateway turns into a 400.
"""

from __future__ import annotations

import ast
import hashlib
import json
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import Refused

__all__ = [
    "Generated",
    "Turn",
    "answer",
    "compose",
    "cut",
    "system_of",
    "tokenize",
    "count_tokens",
    "text_of",
    "keywords",
    "words_of",
    "sentiment",
    "pick_label",
]

Turn = tuple[str, str]  # (role, text)
MAX_DEPTH = 32  # nesting of content blocks; real clients use two or three
MAX_DIGITS = 1000  # of an arithmetic result


_TOKEN = re.compile(r"\s*\S+|\s+$")


def tokenize(text: str) -> list[str]:
    """Fragments (a word with its leading whitespace) whose concatenation is `text`."""
    return _TOKEN.findall(text)


def count_tokens(text: str) -> int:
    return len(text.split())


def text_of(content: Any) -> str:
    """The text of a message content in any common form: a string, or a list of blocks/parts.

    The texts found are joined by newlines, in order. The walk is iterative; content nested
    deeper than `MAX_DEPTH` is refused rather than followed.
    """
    texts: list[str] = []
    stack: list[tuple[Any, int]] = [(content, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise Refused(f"message content is nested more than {MAX_DEPTH} levels deep")
        if isinstance(item, str):
            if item:
                texts.append(item)
        elif isinstance(item, dict):
            text = item.get("text")
            if isinstance(text, str):
                if text:
                    texts.append(text)
            else:
                stack.append((item.get("parts") or item.get("content") or "", depth + 1))
        elif isinstance(item, list):
            stack.extend((inner, depth + 1) for inner in reversed(item))
    return "\n".join(texts)


@dataclass(frozen=True)
class Generated:
    """What a stand-in wrote: its tokens, why it stopped, and what the prompt counted."""

    tokens: list[str]
    finish_reason: str  # "stop", or "length" when max_tokens cut the reply
    prompt_tokens: int

    @property
    def text(self) -> str:
        return "".join(self.tokens)

    @property
    def completion_tokens(self) -> int:
        return len(self.tokens)


def answer(
    turns: list[Turn],
    system: str | None = None,
    max_tokens: int | None = None,
    attached: Sequence[Sequence[Any]] = (),
    name: str = "local-chat",
) -> Generated:
    """Reply to a conversation; `max_tokens` cuts the reply and sets finish_reason "length".
    ``attached`` holds the pictures and documents of each turn (`vision.read`), in step
    with ``turns``; ``name`` is the model's, as it introduces itself."""
    system = system_of(turns, system)
    return cut(compose(turns, system, attached, name), turns, system, max_tokens)


def system_of(turns: list[Turn], system: str | None) -> str:
    """The system prompt: `system` when given, else the system turns joined."""
    return "\n".join(text for role, text in turns if role == "system") if system is None else system


def cut(text: str, turns: list[Turn], system: str, max_tokens: int | None) -> Generated:
    """`text` as the `Generated` to `turns`: in tokens, cut at `max_tokens` (finish "length")."""
    tokens = tokenize(text)
    finish = "stop"
    if max_tokens is not None and len(tokens) > max_tokens:
        tokens, finish = tokens[:max_tokens], "length"
    prompt_tokens = count_tokens(system) + sum(count_tokens(text) for role, text in turns if role != "system")
    return Generated(tokens, finish, prompt_tokens)


def compose(
    turns: list[Turn], system: str | None, attached: Sequence[Sequence[Any]] = (), name: str = "local-chat"
) -> str:
    """The full reply text before any max_tokens cut. Pictures or documents in the last user
    turn are what it answers about (`vision.account`); those of earlier turns are mentioned
    when no rule answers the question."""
    history = [(role, text) for role, text in turns if role != "system"]
    question = next((text for role, text in reversed(history) if role == "user"), "").strip()
    last = next((i for i in range(len(turns) - 1, -1, -1) if turns[i][0] == "user"), None)
    now = list(attached[last]) if last is not None and last < len(attached) else []
    before = [a for i, items in enumerate(attached) if i != last for a in items]
    if now:
        from .vision import account

        reply = account(now)
        if question:
            reply = f"You asked: “{_quoted(question)}”\n\n{reply}"
        return _styled(reply, system or "")
    found = _respond(question, history, name)
    if found is not None:
        return _styled(found, system or "")
    reply = _describe(question, history, system or "", name)
    if before:
        from .vision import account

        reply += "\n\n" + account(before, earlier=True)
    return _styled(reply, system or "")


# -- rules, tried in order -------------------------------------------------------------


def _respond(question: str, history: list[Turn], name: str = "local-chat") -> str | None:
    """The first rule's answer; None when no rule answers (then `_describe`)."""
    if not question:
        return "I did not receive a question. Send a user message and I will answer it."
    for rule in (_code, _echo, _arithmetic, _count, _classify, _name):  # repeating wins
        reply = rule(question, history)
        if reply:
            return reply
    return next((reply.format(name=name) for pattern, reply in _CANNED if pattern.search(question)), None)


_WORD_OPS = [
    (r"\bmultiplied by\b|\btimes\b|×", "*"),
    (r"\bdivided by\b|÷", "/"),
    (r"\bplus\b", "+"),
    (r"\bminus\b", "-"),
    (r"\bto the power of\b|\^", "**"),
    (r"\bmod(?:ulo)?\b", "%"),
]
# Runs of arithmetic characters; those with a digit are candidates. (A pattern of the form
# "[class]*\d[class]*" backtracks over every run without a digit: quadratic.)
_RUN = re.compile(r"[-+*/%().\d\s]+")
_DIGIT = re.compile(r"\d")
_OPERATION = re.compile(r"\d\s*(\*\*|[-+*/%])\s*[-+(]*\s*\d")
_MAX_TRIES = 20
_TOO_MANY_DIGITS = 10**MAX_DIGITS
_OPS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 1e6):
            raise ValueError("too large")
        return _bounded(_OPS[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.operand))
    raise ValueError("not arithmetic")


def _bounded(value: float) -> float:
    """`value`, unless it is an integer of more than `MAX_DIGITS` digits."""
    if isinstance(value, int) and abs(value) >= _TOO_MANY_DIGITS:
        raise Refused(
            f"the result of that arithmetic has more than {MAX_DIGITS} digits; "
            f"local-chat shows at most {MAX_DIGITS}"
        )
    return value


def _number(value: float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def _arithmetic(question: str, history: list[Turn]) -> str | None:
    text = question.lower()
    for pattern, symbol in _WORD_OPS:
        text = re.sub(pattern, f" {symbol} ", text)
    candidates = [run for run in _RUN.findall(text) if _DIGIT.search(run)]
    tries = 0
    for match in sorted(candidates, key=len, reverse=True):
        expr = " ".join(match.split()).strip(" .")
        if len(expr) > 200 or not _OPERATION.search(expr):
            continue
        tries += 1
        if tries > _MAX_TRIES:
            break
        try:
            value = _evaluate(ast.parse(expr, mode="eval").body)
        except ZeroDivisionError:
            return f"{expr} has no value: division by zero is undefined."
        except (SyntaxError, ValueError, OverflowError, TypeError, RecursionError, MemoryError):
            continue
        return f"{expr} = {_number(value)}"
    return None


def _count(question: str, history: list[Turn]) -> str | None:
    match = re.search(r"\bcount (?:from (\d+) )?to (\d+)\b", question, re.I)
    if not match:
        return None
    first, last = match.group(1) or "1", match.group(2)
    if len(first) > 9 or len(last) > 9:  # not worth converting (nor allowed past 4300 digits)
        return f"That is more counting than a stand-in model should do: {first} to {last}."
    start, stop = int(first), int(last)
    if stop - start > 200 or stop < start:
        return f"That is more counting than a stand-in model should do: {start} to {stop}."
    return ", ".join(str(n) for n in range(start, stop + 1)) + "."


def _echo(question: str, history: list[Turn]) -> str | None:
    match = re.match(
        r"^\s*(?:please\s+)?(?:say|repeat(?: after me)?|echo|quote|reply with|respond with|answer with)"
        r"(?:\s+(?:exactly|only|just))?\s*[:,]?\s*(.+)$",
        question,
        re.I | re.S,
    )
    if not match:
        return None
    said = match.group(1).strip()
    if len(said) >= 2 and said[0] == said[-1] and said[0] in "\"'`“":
        said = said[1:-1]
    return said.strip() or None


_WRITE = re.compile(
    r"^\s*(?:please\s+)?write\s+(?:some\s+|a\s+)?python\b(?:\s+(?:code|function))?\s*(.*)$", re.I | re.S
)


def _code(question: str, history: list[Turn]) -> str | None:
    """``write python to add two numbers``: a function stub named after the task, in a fence."""
    match = _WRITE.match(question)
    if not match:
        return None
    task = re.sub(r"^(?:that|to|which|for)\s+", "", " ".join(match.group(1).split()), flags=re.I).rstrip(".")
    words = re.findall(r"[a-z0-9]+", task.lower())[:4]
    name = "_".join(words) or "task"
    name = f"task_{name}" if name[0].isdigit() else name
    doc = re.sub(r"[\\\"`]", "'", task[:1].upper() + task[1:] + "." if task else "The task.")
    return (
        "A stub to start from (local-chat writes stubs, not solutions):\n\n"
        f'```python\ndef {name}():\n    """{doc}"""\n'
        "    raise NotImplementedError  # ask a real model for the body\n```"
    )


# "Classify ... as A, B or C: TEXT": one of the labels, so a batch over a column can be shown
# offline (`pick_label`). Bounded repeats keep the pattern linear.
_CLASSIFY = re.compile(r"\bclassify\b[^:\n]{0,200}?\bas ([^:\n]{1,200}):", re.I)
_NOT_LABELS = frozenset("or one of either and the a an".split())
POSITIVE = frozenset(
    "good great love loved loves lovely excellent amazing wonderful perfect happy best fantastic nice works "
    "recommend recommended delightful superb sturdy reliable solid easy comfortable pleased satisfied "
    "glad brilliant impressed beautiful".split()
)
# Plain dislike and what customers complain of: it broke, it is a waste, it went back.
NEGATIVE = frozenset(
    "bad terrible hate hated awful broken worst poor disappointing disappointed refund useless slow "
    "rude broke breaks waste wasted junk garbage defective faulty flimsy leaks leaking leaked stopped "
    "died dead crashed crashes cracked damaged returned unusable overpriced horrible mediocre annoying "
    "frustrating regret complaint problem problems issue issues avoid scam fails failed".split()
)
# A word that turns the next few round ("not good", "never works", "no problems").
NEGATIONS = frozenset(
    "not no never nothing hardly without don't doesn't didn't isn't wasn't aren't won't can't couldn't "
    "wouldn't dont doesnt didnt isnt wasnt cant wont".split()
)
_REACH = 3  # how many words after a negation it may turn
_WORD = re.compile(r"[a-z']+")


def words_of(text: str) -> list[str]:
    """The lower-case words of `text` (letters and apostrophes)."""
    return _WORD.findall(text.lower().replace("\u2019", "'"))


def sentiment(words: list[str]) -> int:
    """Positive words of the small lexicon minus negative ones, each turned round by a
    negation up to three words before it ("not bad" is positive, "never works" negative):
    > 0 positive, < 0 negative. A "never" that turns nothing counts as negative."""
    score, reach, never = 0, 0, False
    for word in words:
        if word in NEGATIONS:
            score -= never  # the "never" before turned nothing
            reach, never = _REACH, word == "never"
            continue
        value = (word in POSITIVE) - (word in NEGATIVE)
        if value and reach:
            value, reach, never = -value, 0, False
        reach = max(reach - 1, 0)
        score += value
    return score - never


def pick_label(labels: list[str], text: str) -> str | None:
    """The label `text` argues for, or None when nothing does. Sentiment labels (positive,
    negative, neutral: any case) go by the lexicon; other labels by which one the text names."""
    words = words_of(text)
    by_word = {label.lower(): label for label in labels}
    if "positive" in by_word and "negative" in by_word:
        score = sentiment(words)
        return by_word["positive" if score > 0 else "negative"] if score else by_word.get("neutral")
    return next((by_word[w] for w in words if w in by_word), None)


def _classify(question: str, history: list[Turn]) -> str | None:
    match = _CLASSIFY.search(question)
    labels = (
        [w for w in re.findall(r"[A-Za-z][\w-]*", match.group(1)) if w.lower() not in _NOT_LABELS]
        if match
        else []
    )
    if len(labels) < 2 or match is None:
        return None
    return pick_label(labels, question[match.end() :]) or labels[-1]


_NAME = re.compile(r"\bmy name is ([A-Z][\w'-]*(?: [A-Z][\w'-]*)*)", re.I)


def _name(question: str, history: list[Turn]) -> str | None:
    told = _NAME.search(question)
    if told:
        return (
            f"Nice to meet you, {told.group(1)}. I will remember your name for the rest of this conversation."
        )
    if re.search(r"\bwhat(?:'s| is) my name\b", question, re.I):
        for role, text in reversed(history[:-1]):
            found = _NAME.search(text) if role == "user" else None
            if found:
                return f"Your name is {found.group(1)}."
        return "You have not told me your name in this conversation."
    return None


# Fixed replies: (pattern searched in the question, reply with the model's {name}).
_CANNED = [
    (
        # Punctuation, then at most one short word and punctuation: the two punctuation runs must
        # not be able to meet (as with "\w{0,12}" between them), or a run of dots backtracks.
        re.compile(
            r"^\s*(hi|hello|hey|good (morning|afternoon|evening)|greetings)\b[\s!.,?]*(?:\w{1,12}[\s!.?]*)?$",
            re.I,
        ),
        "Hello! I am {name}, the offline stand-in model of gatecell's embedded gateway. "
        "Ask me some arithmetic, to count, or to repeat something, and I will answer exactly.",
    ),
    (
        re.compile(r"\b(who|what) are you\b|\bwhich model\b|\bwhat model\b", re.I),
        "I am {name}, a deterministic, rule-based stand-in that runs inside gatecell's "
        "local gateway with no network and no key. I am not a language model: point gatecell "
        "at a real gateway (GATECELL_BASE_URL and GATECELL_API_KEY) for real answers.",
    ),
]


STOP_WORDS = frozenset(
    "a an the and or but if of to in on at for with by from is are was were be been am do does did "
    "what which who whom whose why how when where can could would should will shall may might must "
    "i you he she it we they me my your our their this that these those please tell about explain "
    "give some any there here as into than then so not no yes just also very".split()
)


def keywords(text: str, limit: int = 5) -> list[str]:
    """The first `limit` distinct words of three letters or more that are not stop words."""
    seen: list[str] = []
    lows: set[str] = set()
    for match in re.finditer(r"[A-Za-z][A-Za-z0-9'-]{2,}", text):
        word = match.group()
        low = word.lower()
        if low not in STOP_WORDS and low not in lows:
            seen.append(word)
            lows.add(low)
            if len(seen) == limit:
                break
    return seen


_OPENERS = ("You asked", "Your message", "I received")


def _quoted(question: str) -> str:
    words = question.split()
    return " ".join(words[:24]) + (" …" if len(words) > 24 else "")


def _describe(question: str, history: list[Turn], system: str, name: str = "local-chat") -> str:
    words = question.split()
    quote = _quoted(question)
    kind = (
        "a question"
        if question.rstrip().endswith("?")
        else "a request"
        if len(words) > 1
        else "a one-word message"
    )
    opener = _OPENERS[hashlib.sha256(question.encode()).digest()[0] % len(_OPENERS)]
    lines = [
        f"{opener}: “{quote}”",
        "",
        f"I am {name}, gatecell's offline stand-in model, so I cannot really answer that. What I can tell:",
        "",
        f"- it is {kind} of {len(words)} word{'s' if len(words) != 1 else ''}",
    ]
    keys = keywords(question)
    if keys:
        lines.append("- key terms: " + ", ".join(keys))
    turns = sum(1 for role, _ in history if role == "user")
    if turns > 1:
        lines.append(f"- this is message {turns} of our conversation")
    if system.strip():
        lines.append(f"- my instructions: “{' '.join(system.split()[:20])}”")
    lines += ["", "Point gatecell at a real gateway (GATECELL_BASE_URL, GATECELL_API_KEY) for real answers."]
    return "\n".join(lines)


def _styled(reply: str, system: str) -> str:
    """Apply the few system-prompt instructions the stand-in understands."""
    low = system.lower()
    if re.search(r"\b(brief|concise|short|one sentence|one line|terse)\b", low):
        reply = re.split(r"(?<=[.!?])\s|\n", reply.strip(), maxsplit=1)[0]
    if "pirate" in low:
        reply = "Arr! " + reply
    if re.search(r"\b(uppercase|upper case|all caps|capital letters|shout)\b", low):
        reply = reply.upper()
    elif re.search(r"\blower ?case\b", low):
        reply = reply.lower()
    if re.search(r"\bjson\b", low):
        reply = json.dumps({"answer": reply}, ensure_ascii=False)
    return reply
