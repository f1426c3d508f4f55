"""The renderer keeps what makes a reply readable: headings, lists, tables, code, links."""

from __future__ import annotations

from gatecell.notebook.markdown import escape, fence, stylesheet, to_html

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
    assert body.startswith('<div class="gatecell-md"><h1>Plan</h1>')
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
    assert to_html("just words") == '<div class="gatecell-md"><p>just words</p>\n</div>'
    table = to_html("| a |\n|---|\n| 1 |")
    assert table.startswith(f"<style>{stylesheet(code=False)}</style>") and ".gatecell-code" not in table


def test_escape_and_fence_keep_composed_markdown_literal():
    out = to_html(f"**model** {escape('gpt-4o | *beta* [x](y)')}")
    assert "<strong>model</strong> gpt-4o | *beta* [x](y)</p>" in out
    body = "a ``` b\n```\n# not a heading"
    out = to_html(fence(body, "json"))
    assert out.count("<pre") == 1 and "<h1>" not in out
