"""Text a model or a gateway chose, made into HTML that cannot run anything.

Replies are Markdown, and every place that shows them trusts what it is given: JupyterLab
renders a trusted ``text/markdown`` output with its own renderer, unsanitised, and runs
the scripts of a trusted ``text/html`` one (outputs made while a notebook runs are
trusted); an ipywidgets ``HTML`` is set as ``innerHTML``. So gatecell never hands them
Markdown: it renders it here, and only the HTML made here reaches a frontend.

1. markdown-it-py (CommonMark, tables, strikethrough) with raw HTML off: ``<script>``
   or ``<img onerror=...>`` in a reply is shown as text. A link is kept only for http,
   https and mailto; anything else (``javascript:``, ``data:``, relative paths) stays
   text. An image becomes a link: a model must not make the browser fetch a URL of its
   choosing, which would send the conversation wherever it likes without a click.
2. Pygments colours fenced code through class names (the language is the fence's;
   nothing is guessed).
3. nh3 (ammonia) cleans the result against an allow-list of tags, attributes, classes
   and URL schemes: a second wall, should the first have a gap.
4. gatecell's own constant stylesheet goes in front, after cleaning: the part for tables
   when there is a table, Pygments' colours when there is code.

Everything heavy is imported on first use: ``%load_ext gatecell`` stays fast.
"""

from __future__ import annotations

import functools
import html
import re
from typing import Any

from gatecell.text import fence

__all__ = ["to_html", "escape", "fence", "tokens", "code_blocks", "link_allowed", "stylesheet", "SCHEMES"]

SCHEMES = frozenset({"http", "https", "mailto"})
"""The only URL schemes a link may have."""

_LINK = re.compile(rf"(?i)({'|'.join(sorted(SCHEMES))}):")

_TAGS = {
    *("p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote"),
    *("strong", "em", "del", "s", "code", "pre", "span", "a"),
    *("ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td"),
}

_TABLE_CSS = (
    ".gatecell-md table{border-collapse:collapse;margin:4px 0}"
    ".gatecell-md th,.gatecell-md td{border:1px solid #bbb;padding:2px 8px}"
)
_CODE_CSS = (
    ".gatecell-md pre.gatecell-code{padding:6px 8px;border-radius:4px;overflow-x:auto;"
    "background:rgba(127,127,127,.1);line-height:1.35}"
)


def to_html(text: str) -> str:
    """``text`` (Markdown) as an HTML fragment safe to show as trusted output.

    The fragment is one ``<div class="gatecell-md">``, preceded by the part of gatecell's
    stylesheet its tables or code need.
    """
    renderer, cleaner = _tools()
    body = cleaner.clean(renderer.render(text))
    css = stylesheet(table="<table" in body, code="<pre" in body)
    return f'{f"<style>{css}</style>" if css else ""}<div class="gatecell-md">{body}</div>'


_PUNCTUATION = re.compile(r"([!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])")


def escape(text: str) -> str:
    """``text`` as Markdown that reads literally (a model id, a job id, a name in a line
    gatecell composes): every ASCII punctuation mark backslash-escaped, lines joined."""
    return _PUNCTUATION.sub(r"\\\1", " ".join(str(text).split()))


def tokens(text: str) -> list[Any]:
    """markdown-it's block token stream of ``text``, parsed as `to_html` parses it: where a
    fence or a code span starts and ends is the renderer's word, never a regex's."""
    return list(_tools()[0].parse(text))


def code_blocks(text: str) -> list[tuple[str, str]]:
    """The fenced code blocks of ``text`` in order, as (language, code): the language is the
    first word of the fence's info string ("" when none), the code without its last newline."""
    return [
        (t.info.split()[0] if t.info.strip() else "", t.content.removesuffix("\n"))
        for t in tokens(text)
        if t.type == "fence"
    ]


# -- the tools, made once -------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _tools() -> tuple[Any, Any]:
    import nh3
    from markdown_it import MarkdownIt
    from pygments.token import STANDARD_TYPES

    renderer = MarkdownIt("commonmark", {"html": False, "highlight": _highlight})
    renderer.enable(["table", "strikethrough"])
    renderer.validateLink = link_allowed  # type: ignore[method-assign]
    renderer.add_render_rule("image", _image_as_link)
    cleaner = nh3.Cleaner(
        tags=_TAGS,
        attributes={"a": {"href", "title"}, "ol": {"start"}, "th": {"style"}, "td": {"style"}},
        allowed_classes={
            "pre": {"gatecell-code"},
            "span": {c for c in STANDARD_TYPES.values() if c},
        },
        filter_style_properties={"text-align"},
        url_schemes=set(SCHEMES),
        url_relative="deny",
        link_rel="noopener noreferrer nofollow",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
    )
    return renderer, cleaner


def link_allowed(url: str) -> bool:
    """True for an absolute http, https or mailto URL: the only links gatecell shows.

    markdown-it calls it with entities decoded and unsafe characters percent-encoded,
    so ``java&#115;cript:`` or ``java\tscript:`` never pass."""
    return _LINK.match(url) is not None


def _image_as_link(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = self.renderInlineAsText(token.children or [], options, env) or src
    return f'<a href="{html.escape(src)}">image: {html.escape(alt)}</a>'


def _highlight(code: str, lang: str, _attrs: str) -> str:
    lexer = _lexer(lang.lower()) if lang else None
    if lexer is None:
        inner = html.escape(code)
    else:
        from pygments import highlight

        inner = highlight(code, lexer, _formatter())
    return f'<pre class="gatecell-code"><code>{inner}</code></pre>'


@functools.lru_cache(maxsize=64)
def _lexer(lang: str) -> Any:
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(lang)
    except ClassNotFound:
        return None


@functools.lru_cache(maxsize=1)
def _formatter() -> Any:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(nowrap=True)


@functools.lru_cache(maxsize=4)
def stylesheet(*, table: bool = True, code: bool = True) -> str:
    """gatecell's constant stylesheet, the parts a fragment needs: tables, Pygments' colours."""
    from pygments.formatters import HtmlFormatter

    if not code:
        return _TABLE_CSS if table else ""
    rules = HtmlFormatter(style="default").get_token_style_defs(".gatecell-md .gatecell-code")
    colours = "".join(re.sub(r"\s*/\*.*?\*/", "", rule) for rule in rules)
    return (_TABLE_CSS if table else "") + _CODE_CSS + colours
