"""Issue 9, item 4: no request can stall the local gateway (nor an answer the client); issue
20: no text can stall the redaction every text a gateway sends goes through.

Two halves. The stand-in chat model's work (its typed answers too, the client's search for
the JSON in an answer, and the redaction) is linear in its input, whatever the input: each
adversarial family below (inputs that made a regex backtrack, or a loop rescan what it had
seen) is run at two sizes, 8x apart, and the CPU time may grow about 8x, not 64x. And what
work there is runs off the event loop: ``/health`` answers while a chat reply is provably
still being composed.
"""

from __future__ import annotations

import threading

import httpx
import pytest
from probes import cpu_per_call, growth

from gatecell.local.backends import chatbot, prompt_flags, typed
from gatecell.wire.typed.structured import Schema, instruction, parse
from gatecell.wire.util.secret import Secret, protect_logs, redact

FAMILIES = {
    "dots": lambda n: "." * n,
    "dots after a greeting": lambda n: "hello" + "." * n + "#",
    "spaces after a greeting": lambda n: "hi " + " !" * (n // 2) + " x",
    "digits without operators": lambda n: "1 " * (n // 2),
    "expressions that do not parse": lambda n: "1+1)a" * (n // 5),
    "one long expression": lambda n: "1+" * (n // 2) + "1",
    "distinct words": lambda n: " ".join(f"word{i}" for i in range(n // 8)),
    "names": lambda n: "my name is Al " * (n // 14),
    "a count with a huge number": lambda n: "count to " + "9" * n,
    "say and spaces": lambda n: "say" + " " * n + "x",
    "classify with no colon": lambda n: "classify it as a or b " * (n // 22),
    "classify and many labels": lambda n: "classify as " + "a, " * (n // 3) + ": good",
}


@pytest.mark.parametrize("family", FAMILIES)
def test_a_chat_reply_costs_linear_time(family):
    def reply(question: str) -> None:
        chatbot.answer([("user", question)], "be brief, answer in json like a pirate")

    grew = growth(reply, FAMILIES[family])
    assert grew < 24, f"{family}: 8x the input cost {grew:.0f}x the CPU"


# Prompts against the patterns of the typed answers (names, dates, numbers, e-mail, ratings).
TYPED_FAMILIES = {
    "capitalised words": lambda n: "Aa " * (n // 3),
    "one capitalised run": lambda n: "A" * n,
    "capitalised stop words": lambda n: "The " * (n // 4),
    "distinct names": lambda n: "".join(f"Xa{i} Yb{i}. " for i in range(n // 14)),
    "month names without a year": lambda n: "March 3, " * (n // 9),
    "digits and commas": lambda n: "1,000," * (n // 6),
    "word characters with no at-sign": lambda n: "a" * n,
    "at-signs": lambda n: "a@" * (n // 2),
    "ratings without a scale": lambda n: "5 / " * (n // 4),
    "sentences": lambda n: "Ada Lovelace was born. " * (n // 23),
    "colons": lambda n: ":" * n,
    "an instruction lead repeated": lambda n: "Answer with JSON only: " * (n // 23),
}
TYPED_SCHEMA = {
    "type": "object",
    "properties": {
        "people": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "born": {"type": ["integer", "null"]}},
            },
        },
        "email": {"type": "string"},
        "when": {"type": "string", "format": "date"},
        "stars": {"type": "integer"},
        "sentiment": {"enum": ["positive", "negative", "neutral"]},
        "summary": {"type": "string"},
    },
}


@pytest.mark.parametrize("family", TYPED_FAMILIES)
def test_a_typed_reply_costs_linear_time(family):
    def reply(question: str) -> None:
        typed.answer([("user", question)], None, None, typed.Wanted(TYPED_SCHEMA))

    grew = growth(reply, TYPED_FAMILIES[family], 16000)  # larger: some quadratics hide in memmove
    assert grew < 24, f"{family}: 8x the input cost {grew:.0f}x the CPU"


def test_a_reply_by_instruction_costs_linear_time():
    words = instruction(Schema.of(TYPED_SCHEMA))
    assert growth(lambda q: typed.answer([("user", q)]), lambda n: "Aa " * (n // 3) + "\n\n" + words) < 24


# Answers against `structured.parse`'s search for the JSON in a reply (client side).
ANSWERS = {
    "openers": lambda n: "[" * n,
    "mismatched pairs": lambda n: "[}" * (n // 2),
    "openers closed by the wrong bracket": lambda n: "[" * n + "}",
    "an opener, then braces far away": lambda n: "[" + "x" * n + "{",
    "many small arrays": lambda n: "[1] " * (n // 4),
    "fences never closed": lambda n: "```\n" * (n // 4),
    "a string never closed": lambda n: '{"a": "' + "x" * n,
}


@pytest.mark.parametrize("family", ANSWERS)
def test_parsing_an_answer_costs_linear_time(family):
    schema = Schema.of({"type": "object", "properties": {"stars": {"type": "integer"}}})
    grew = growth(lambda answer: parse(answer, schema), ANSWERS[family])
    assert grew < 24, f"{family}: 8x the answer cost {grew:.0f}x the CPU"


def test_history_and_system_prompts_cost_linear_time():
    def reply(n_turns: int) -> None:
        turns = [("user", f"my name is Al{i} and this is turn {i}") for i in range(n_turns)]
        chatbot.answer([*turns, ("user", "what is my name?")], "uppercase " * n_turns)

    grew = cpu_per_call(reply, 8 * 400) / cpu_per_call(reply, 400)
    assert grew < 24, f"8x the conversation cost {grew:.0f}x the CPU"


def test_prompt_flags_cost_linear_time():
    assert growth(prompt_flags.parse, lambda n: "--a " * (n // 4) + "--b" + " " * n + "--c x") < 24


# Issue 20: the one redaction (`gatecell.wire.util.secret.redact`) runs on every text a gateway
# sends and every row of the log; these texts would make a backtracking pattern rescan them.
REDACTION = {
    "sk- runs": lambda n: "sk-" * (n // 3),
    "jwt headers without a payload": lambda n: "eyJaaaaaaaaaa." * (n // 14),
    "url user info without @": lambda n: "://" + "a:" * (n // 2),
    "url schemes": lambda n: "://a:b" * (n // 6),
    "names and separators": lambda n: "password = " * (n // 11),
    "unclosed quotes": lambda n: 'password="' * (n // 10),
    "unclosed triple quotes": lambda n: 'password = """' * (n // 14),
    "escaped quotes": lambda n: 'password = "' + "\\a" * (n // 2),
    "closing quotes and brackets": lambda n: 'token"]"]"]' * (n // 11),
    "annotations": lambda n: "password: " + "a " * (n // 2),
    "annotation words": lambda n: "api_key: str, " * (n // 14),
    "bearer words": lambda n: "bearer " * (n // 7),
    "key segments": lambda n: "key_" * (n // 4),
    "bare values": lambda n: "key=" * (n // 4),
    "camel case": lambda n: "aKey" * (n // 4),
    "pem headers": lambda n: "-----BEGIN PRIVATE KEY-----" * (n // 27),
    "github prefixes": lambda n: "gh" * (n // 2),
    "aws prefixes": lambda n: "AKIA" * (n // 4),
    "a key's head and white space": lambda n: "sk-redos-0" + " " * n,
    "a key's head and escapes": lambda n: "sk-redos-0\\n" * (n // 11),
}


@pytest.mark.parametrize("family", REDACTION)
def test_redaction_costs_linear_time(family):
    protect_logs(Secret("sk-redos-0123456789abcdef"))  # a key of this process: its forms are searched
    grew = growth(redact, REDACTION[family])
    assert grew < 24, f"{family}: 8x the input cost {grew:.0f}x the CPU"


def test_health_answers_while_a_chat_reply_is_being_composed(make_gateway, monkeypatch):
    gw = make_gateway(api_keys=["sk-stall-" + "s" * 24])
    entered, release = threading.Event(), threading.Event()
    compose = chatbot.compose

    def slow(*args, **kwargs):  # stands in for a reply that takes long to compose
        entered.set()
        release.wait(30)
        return compose(*args, **kwargs)

    monkeypatch.setattr(chatbot, "compose", slow)
    headers = {"authorization": f"Bearer {gw.keys[0]}"}
    body = {"model": "local-chat", "messages": [{"role": "user", "content": "what is 6*7? " + "x " * 50_000}]}
    answer: list[httpx.Response] = []
    chat = threading.Thread(
        target=lambda: answer.append(
            httpx.post(f"{gw.base_url}/v1/chat/completions", json=body, headers=headers, timeout=60)
        )
    )
    chat.start()
    try:
        assert entered.wait(30), "the chat request never reached its reply"
        health = httpx.get(f"{gw.base_url}/health", timeout=10)
        models = httpx.get(f"{gw.base_url}/v1/models", headers=headers, timeout=10)
        assert health.status_code == models.status_code == 200
        assert chat.is_alive() and not answer  # the reply was still being composed
    finally:
        release.set()
        chat.join(60)
    assert answer[0].status_code == 200 and "6*7 = 42" in answer[0].text
