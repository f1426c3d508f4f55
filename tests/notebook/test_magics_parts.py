"""Option parsing, interpolation and memory on their own (no gateway, no shell)."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from gatecell.notebook.magics import SPECS, parser
from gatecell.notebook.memory import Memory
from gatecell.notebook.options import HelpShown, parse
from gatecell.notebook.template import fill, interpolate


def test_line_form_keeps_the_prompt_verbatim():
    ns, prompt = parse(parser("chat"), "-t 0.5 -m 'my model' what's \"2+2\"? -x", None)
    assert (ns.temperature, ns.model, prompt) == (0.5, "my model", 'what\'s "2+2"? -x')
    ns, prompt = parse(parser("chat"), "--temperature=1 -- -5 degrees", None)
    assert (ns.temperature, prompt) == (1.0, "-5 degrees")
    ns, prompt = parse(parser("chat"), "-5 degrees", None)
    assert prompt == "-5 degrees"


def test_cell_form_refuses_text_on_the_line():
    with pytest.raises(UsageError, match="unexpected text"):
        parse(parser("chat"), "-c work hello", "cell body")


@pytest.mark.parametrize(
    "line, message",
    [
        ("-t 2.01", "temperature must be between 0 and 2"),
        ("-t -0.1", "temperature must be between 0 and 2"),
        ("--top-p 1.2", "top-p must be between 0 and 1"),
        ("--max-tokens 0", "max-tokens must be at least 1"),
        ("--api soap", "invalid choice"),
        ("--bogus", "unrecognized arguments"),
        ("-t", "expected one argument"),
        ("--api-key abc", "%gatecell key"),
        ("-s sk-abcdefghijklmnop", "%gatecell key"),
    ],
)
def test_bad_options_are_one_line_usage_errors(line, message):
    with pytest.raises(UsageError) as info:
        parse(parser("chat"), line, "hi")
    assert message in str(info.value) and "\n" not in str(info.value)
    assert "abcdefghijklmnop" not in str(info.value)


def test_options_are_spelled_alike():
    flags = {name: {s for a in parser(name)._actions for s in a.option_strings} for name in SPECS}
    for name, have in flags.items():
        assert {"-o", "--out", "--footer", "--debug", "--no-interpolate", "--help"} <= have, name
        if "--model" in have:
            assert "-m" in have
    assert {
        "-t",
        "--temperature",
        "--top-p",
        "--max-tokens",
        "-s",
        "--system",
        "-c",
        "--conversation",
        "--new",
        "--no-stream",
        "--api",
    } <= flags["chat"]
    assert {"-v", "--voice", "--autoplay", "--save"} <= flags["speak"]
    assert "--effort" in flags["reason"] and "--style" in flags["music"] and "--no-wait" in flags["video"]


def test_help_raises_help_shown(capsys):
    with pytest.raises(HelpShown):
        parse(parser("image"), "--help", None)
    assert "usage: %%image" in capsys.readouterr().out


def test_interpolation_rules():
    ns = {"a": 1, "items": [4, 5], "x": 3.14159}
    assert interpolate("{a} {items[1]} {x:.2f} {a!r}", ns) == "1 5 3.14 1"
    assert interpolate('{{a}} {"k": 1} {} { a }', ns) == '{a} {"k": 1} {} { a }'
    assert fill("{nope.attr} and {a}", ns) == ("{nope.attr} and 1", ("{a}",), ("{nope.attr}",))


def test_memory_marks_partial_replies():
    memory = Memory()
    conv = memory.get()
    conv.set_system("be brief")
    conv.add("q1", "a1")
    conv.add("q2", "a2 (cut", partial=True)
    assert conv.messages("q3") == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2 (cut"},
        {"role": "user", "content": "q3"},
    ]
    assert "*(partial: interrupted)*" in conv.markdown()
    assert memory.reset("nope") == [] and memory.reset() == ["default"]


def test_live_markdown_coalesces_and_always_renders_the_end(ipshell):
    from IPython.utils.capture import capture_output

    from gatecell.notebook.display import LiveMarkdown, footer_text, provenance
    from gatecell.notebook.markdown import NOT_MATH

    with capture_output() as captured:
        live = LiveMarkdown(rich=True, interval=3600)
        for i in range(1000):
            live.append(f"t{i} ")
        live.finish(prov={"model": "m", "endpoint": "/v1/chat/completions"}, footer=True, note="done")
    assert live.updates == 2 == len(captured.outputs)  # the first fragment, then the end
    final = captured.outputs[-1].data
    assert final["text/plain"].startswith("t0 t1 ") and final["text/plain"].endswith(
        "t999 \n\ndone\n\n-- m · /v1/chat/completions"
    )
    # the note and the footer are gatecell's lines around the reply: MathJax stays out of them
    assert f'<p class="{NOT_MATH}"><em>done</em></p>' in final["text/html"]
    assert f'<div class="gatecell-footer {NOT_MATH}"' in final["text/html"]
    assert "<sub>m · /v1/chat/completions</sub>" in final["text/html"]
    assert captured.outputs[-1].update and captured.outputs[-1].metadata == {
        "gatecell": {"model": "m", "endpoint": "/v1/chat/completions"}
    }

    class Meta:
        model, endpoint, latency, usage, request_id = (
            "x",
            "/v1/x",
            0.12345,
            {"prompt_tokens": 3, "completion_tokens": 4},
            "r1",
        )

    prov = provenance(Meta(), voice="nova")
    assert prov == {
        "model": "x",
        "endpoint": "/v1/x",
        "latency": 0.123,
        "usage": {"prompt_tokens": 3, "completion_tokens": 4},
        "request_id": "r1",
        "voice": "nova",
    }
    assert footer_text(prov) == "x · /v1/x · 0.12 s · 3 in / 4 out tokens · request r1"
    Meta.cost, Meta.cost_source = 0.00042, "gateway"  # type: ignore[attr-defined]
    prov = provenance(Meta())
    assert (prov["cost"], prov["cost_source"]) == (0.00042, "gateway")
    assert footer_text(prov) == "x · /v1/x · 0.12 s · 3 in / 4 out tokens · $0.00042 (gateway) · request r1"
