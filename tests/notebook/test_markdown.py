"""The renderer keeps what makes a reply readable: headings, lists, tables, code, links, math."""

from __future__ import annotations

import re

import pytest

from gatecell.notebook.markdown import NOT_MATH, escape, stylesheet, to_html
from gatecell.wire.util._text import fence

OPEN = f'<div class="gatecell-md {NOT_MATH}">'

REPLY = """# Plan

Some *emphasis*, **strong**, `inline`, ~~gone~~ and a [link](https://example.com/docs).

1. first
2. second
   - nested

| name | count |
|:-----|------:|
| a    | 1     |

> a quote

```python
def double(x):
    return 2 * x  # twice
```

```nosuchlanguage
plain <code>
```
"""


def test_a_reply_keeps_its_form():
    out = to_html(REPLY)
    assert out.startswith(f"<style>{stylesheet()}</style>")  # code and a table need all of it
    body = out.split("</style>", 1)[1]
    assert body.startswith(f"{OPEN}<h1>Plan</h1>")
    for piece in (
        "<em>emphasis</em>",
        "<strong>strong</strong>",
        "<code>inline</code>",
        "<s>gone</s>",
        '<a href="https://example.com/docs" target="_blank" rel="noopener noreferrer nofollow">link</a>',
        "<ol>\n<li>first</li>",
        "<ul>\n<li>nested</li>",
        '<th style="text-align:left">name</th>',
        '<td style="text-align:right">1</td>',
        "<blockquote>\n<p>a quote</p>",
    ):
        assert piece in body, piece
    # highlighted by Pygments, through class names the stylesheet colours
    assert '<pre class="gatecell-code"><code><span class="k">def</span>' in body
    assert '<span class="c1"># twice</span>' in body
    assert ".gatecell-md .gatecell-code .k {" in stylesheet()
    # an unknown language is plain, escaped code
    assert '<pre class="gatecell-code"><code>plain &lt;code&gt;\n</code></pre>' in body


def test_a_fragment_carries_the_styles_it_needs_only():
    assert to_html("just words") == f"{OPEN}<p>just words</p>\n</div>"
    table = to_html("| a |\n|---|\n| 1 |")
    assert table.startswith(f"<style>{stylesheet(code=False)}</style>") and ".gatecell-code" not in table


def test_escape_and_fence_keep_composed_markdown_literal():
    out = to_html(f"**model** {escape('gpt-4o | *beta* [x](y)')}")
    assert "<strong>model</strong> gpt-4o | *beta* [x](y)</p>" in out
    body = "a ``` b\n```\n# not a heading"
    out = to_html(fence(body, "json"))
    assert out.count("<pre") == 1 and "<h1>" not in out


# -- math --------------------------------------------------------------------------------

SPAN, DIV = (
    '<span class="math mathjax_process tex2jax_process">',
    '<div class="math mathjax_process tex2jax_process">',
)

FORMULAS = [
    # (reply, the formulas as they must come out, escaped text with their delimiters)
    (r"The variance is $\sigma^2 = E[(X-\mu)^2]$.", [r"$\sigma^2 = E[(X-\mu)^2]$"]),
    (r"and $$\int_0^1 x^2\,dx = \tfrac13$$ in a line", [r"$$\int_0^1 x^2\,dx = \tfrac13$$"]),
    (r"emphasis stays out: $a_1 * b_2 * c_3$ and $x_i$ or $y_j$", [r"$a_1 * b_2 * c_3$", "$x_i$", "$y_j$"]),
    (r"brackets \(\frac{a}{b}\) and \[\sum_{i=1}^n i\]", [r"\(\frac{a}{b}\)", r"\[\sum_{i=1}^n i\]"]),
    (r"escapes stay: $a\,b\;c\\d\{e\}$", [r"$a\,b\;c\\d\{e\}$"]),
    (r"a link is not made: $[x](https://example.com)$", [r"$[x](https://example.com)$"]),
    (r"nor HTML: $a<b>c$ and $x & y$", [r"$a&lt;b&gt;c$", r"$x &amp; y$"]),
    (r"a dollar inside: $\text{\$5}$", [r"$\text{\$5}$"]),
    (r"a closing \\) is not the end: \(a \\) b\)", [r"\(a \\) b\)"]),
    ("across lines $a +\nb$ in one paragraph", ["$a +\nb$"]),
    ("- a list item $x^2$\n- and $y^2$", ["$x^2$", "$y^2$"]),
    ("| a | b |\n|---|---|\n| $x_1$ | $y_1$ |", ["$x_1$", "$y_1$"]),
]

NOT_FORMULAS = [
    "It costs $5 and $10.",
    "Between $5–$10 a month, $20 with tax",
    "$ x $ has spaces inside",
    "a sum of 5$ and 6$",
    "$x$5 is followed by a digit",
    r"an escaped \$x\$ pair",
    r"a literal \\(x\\) pair",
    "code stays code: `$x_1$` and\n\n```\n$y_2$\n```",
    "an unclosed \\( opener and an unclosed \\[ one",
    "$$ alone on a line and no end",
]


@pytest.mark.parametrize(("reply", "formulas"), FORMULAS)
def test_formulas_are_kept_whole_as_escaped_text(reply, formulas):
    out = to_html(reply)
    assert (
        re.findall(r'<span class="math mathjax_process tex2jax_process">(.*?)</span>', out, re.S) == formulas
    )
    assert "<em>" not in out and "<a " not in out


@pytest.mark.parametrize("reply", NOT_FORMULAS)
def test_prices_and_escapes_are_not_math(reply):
    out = to_html(reply)
    assert 'class="math' not in out
    assert out.startswith(OPEN) or out.startswith("<style>")  # and MathJax is kept out of all of it


def test_a_display_block_is_a_div_and_prose_around_it_stays_in_paragraphs():
    out = to_html("Before.\n\n$$\n\\int_0^1 f(x)\\,dx\n$$\n\nAfter $x$.")
    block = f"{DIV}$$\n\\int_0^1 f(x)\\,dx\n$$</div>\n"
    assert out == f"{OPEN}<p>Before.</p>\n{block}<p>After {SPAN}$x$</span>.</p>\n</div>"
    # a display formula inside a paragraph stays inside it: a div there would split the paragraph
    out = to_html("The integral\n$$\n\\int f\n$$\nis finite.")
    assert out == f"{OPEN}<p>The integral\n{SPAN}$$\n\\int f\n$$</span>\nis finite.</p>\n</div>"


def test_composed_markdown_never_becomes_math():
    name = r"f(x) [y] $z$ a_b \(q\) [l](https://x.example)"
    out = to_html(f"**model** {escape(name)}")
    assert 'class="math' not in out
    assert f"<strong>model</strong> {name}</p>" in out
