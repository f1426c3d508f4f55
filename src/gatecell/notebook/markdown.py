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
   Math (mdit-py-plugins' dollarmath for ``$...$`` and ``$$...$$``, a rule of gatecell's
   own for ``\\(...\\)`` and ``\\[...\\]``) is read before emphasis, links and backslash
   escapes, so ``_``, ``*`` and ``\\,`` in a formula stay as written; a price line
   (``$5 and $10``) is not math: no space after the opening ``$``, none before the closing
   one, no digit after it.
2. Pygments colours fenced code through class names (the language is the fence's;
   nothing is guessed).
3. nh3 (ammonia) cleans the result against an allow-list of tags, attributes, classes
   and URL schemes: a second wall, should the first have a gap.
4. gatecell's own constant stylesheet goes in front, after cleaning: the part for tables
   when there is a table, the token colours when there is code. Its colours are
   JupyterLab's theme variables, then VS Code's, then light defaults, so a reply follows
   the theme it is shown in.

A formula is never typeset here: it is escaped text, delimiters included, in a
``<span class="math">`` (a ``<div>`` for a display block), which JupyterLab's MathJax
typesets. MathJax looks for delimiters in every text of an HTML output it is given, so the
fragment is marked ``mathjax_ignore`` (MathJax 3, as JupyterLab bundles it) and
``tex2jax_ignore`` (MathJax 2, as nbconvert's HTML loads it) and each formula
``*_process``: only what the parser called math is typeset, never a dollar sign in prose, a
model id or a footer. What TeX can do inside a formula is the business of MathJax's safe
mode, which JupyterLab uses (``\\href`` to http, https and file URLs only, classes and ids
``mjx-*`` only, a few style properties); a front end that does not typeset shows the
formula as its TeX source.

Everything heavy is imported on first use: ``%load_ext gatecell`` stays fast.
"""

from __future__ import annotations

import functools
import html
import re
from typing import Any

__all__ = [
    *("to_html", "escape", "fence", "tokens", "code_blocks", "link_allowed", "stylesheet"),
    *("SCHEMES", "NOT_MATH", "MUTED", "ALERT"),
]

SCHEMES = frozenset({"http", "https", "mailto"})
"""The only URL schemes a link may have."""

_LINK = re.compile(rf"(?i)({'|'.join(sorted(SCHEMES))}):")

NOT_MATH = "mathjax_ignore tex2jax_ignore"
"""Classes that keep MathJax (3 and 2) out of an element and everything in it: for HTML
gatecell composes around text a gateway chose (footers, notes, model names)."""

_MATH = "math mathjax_process tex2jax_process"  # a formula, typeset inside a NOT_MATH fragment
_CLOSERS = {"$": "$", "$$": "$$", "\\(": "\\)", "\\[": "\\]"}

_TAGS = {
    *("p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "div"),
    *("strong", "em", "del", "s", "code", "pre", "span", "a"),
    *("ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td"),
}


def _colour(jupyterlab: str, vscode: str, light: str) -> str:
    """A CSS colour from JupyterLab's theme, else VS Code's, else the light default."""
    return f"var(--{jupyterlab},var(--vscode-{vscode},{light}))"


MUTED = _colour("jp-content-font-color2", "descriptionForeground", "#757575")
"""Secondary text (a footer, a status line) in the notebook's theme."""
ALERT = _colour("jp-error-color1", "errorForeground", "#b00020")
"""Error text in the notebook's theme."""

_BORDER = _colour("jp-border-color1", "notebook-cellBorderColor", "#bdbdbd")
_TABLE_CSS = (
    ".gatecell-md table{border-collapse:collapse;margin:4px 0}"
    f".gatecell-md th,.gatecell-md td{{border:1px solid {_BORDER};padding:2px 8px}}"
)
# Code sits on the output's own background (as JupyterLab's Markdown shows code), in a frame:
# the shaded editor background of JupyterLab Dark leaves too little contrast for some colours.
_CODE_CSS = (
    ".gatecell-md pre.gatecell-code{padding:6px 8px;border-radius:4px;overflow-x:auto;line-height:1.35;"
    f"border:1px solid {_colour('jp-border-color2', 'notebook-cellBorderColor', '#e0e0e0')};"
    "background:var(--jp-layout-color0,transparent);color:var(--jp-content-font-color1,inherit)}"
)


def to_html(text: str) -> str:
    """``text`` (Markdown) as an HTML fragment safe to show as trusted output.

    The fragment is one ``<div class="gatecell-md">``, preceded by the part of gatecell's
    stylesheet its tables or code need.
    """
    renderer, cleaner = _tools()
    body = cleaner.clean(renderer.render(text))
    css = stylesheet(table="<table" in body, code="<pre" in body)
    return f'{f"<style>{css}</style>" if css else ""}<div class="gatecell-md {NOT_MATH}">{body}</div>'


# Every ASCII punctuation mark but "(": a backslash before it would open a formula, and with
# every "]" escaped no link can close on it.
_PUNCTUATION = re.compile(r"([!\"#$%&')*+,\-./:;<=>?@\[\\\]^_`{|}~])")


def escape(text: str) -> str:
    """``text`` as Markdown that reads literally (a model id, a job id, a name in a line
    gatecell composes): punctuation backslash-escaped (``[`` as a character reference, as
    ``\\[`` would open a formula), lines joined."""
    return _PUNCTUATION.sub(_escaped_mark, " ".join(str(text).split()))


def _escaped_mark(match: re.Match[str]) -> str:
    mark = match.group(1)
    return "&#91;" if mark == "[" else f"\\{mark}"


def fence(body: str, lang: str = "") -> str:
    """``body`` as a fenced code block that nothing in it can close."""
    ticks = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", body)), default=0))
    return f"{ticks}{lang}\n{body}\n{ticks}"


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
    from mdit_py_plugins.dollarmath import dollarmath_plugin
    from pygments.token import STANDARD_TYPES

    renderer = MarkdownIt("commonmark", {"html": False, "highlight": _highlight})
    renderer.enable(["table", "strikethrough"])
    renderer.validateLink = link_allowed  # type: ignore[method-assign]
    renderer.add_render_rule("image", _image_as_link)
    # $...$ (not a price), $$...$$ in a line or as a block of its own; no labels (an id and a
    # relative link a model would choose), no blank line inside a block (as in TeX)
    dollarmath_plugin(
        renderer,
        allow_labels=False,
        allow_space=False,
        allow_digits=False,
        allow_blank_lines=False,
        double_inline=True,
    )
    renderer.inline.ruler.before("escape", "math_brackets", _math_brackets)
    for kind in ("math_inline", "math_inline_double", "math_block"):
        renderer.add_render_rule(kind, _formula)
    maths = set(_MATH.split())
    cleaner = nh3.Cleaner(
        tags=_TAGS,
        attributes={"a": {"href", "title"}, "ol": {"start"}, "th": {"style"}, "td": {"style"}},
        allowed_classes={
            "pre": {"gatecell-code"},
            "span": {c for c in STANDARD_TYPES.values() if c} | maths,
            "div": maths,
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


def _math_brackets(state: Any, silent: bool) -> bool:
    """``\\(...\\)`` (inline) and ``\\[...\\]`` (display) within a block of text, as the
    tokens dollarmath makes for ``$`` and ``$$``: the first closing delimiter not itself
    escaped ends the formula; none, and the backslash is Markdown's escape again.

    Where a search found no closing delimiter is kept in the render's ``env`` (as markdown-it
    keeps link references there), so that a text of many unclosed openers costs linear time."""
    src, start = state.src, state.pos
    opener = src[start : start + 2]
    if opener not in ("\\(", "\\["):
        return False
    closer, end = _CLOSERS[opener], start + 2
    unclosed = state.env.setdefault("gatecell_unclosed_math", {})  # (text, closer, end) -> opener
    where = (src, closer, state.posMax)  # no closer after an opener at or past unclosed[where]
    if start >= unclosed.get(where, state.posMax):
        return False
    while (end := src.find(closer, end, state.posMax)) >= 0 and _escaped(src, end):
        end += 1
    if end < 0:
        unclosed[where] = start
        return False
    if not src[start + 2 : end].strip():
        return False
    if not silent:
        token = state.push("math_inline" if opener == "\\(" else "math_inline_double", "math", 0)
        token.content, token.markup = src[start + 2 : end], opener
    state.pos = end + len(closer)
    return True


def _escaped(src: str, at: int) -> bool:
    """True when an odd run of backslashes ends just before ``at``."""
    before = at
    while before and src[before - 1] == "\\":
        before -= 1
    return (at - before) % 2 == 1


def _formula(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    tex = f"{token.markup}{token.content}{_CLOSERS[token.markup]}"
    # A display formula in a line of text stays in its paragraph (a div would break it in
    # two); MathJax displays it from its delimiters wherever it is.
    if token.type == "math_block":
        return f'<div class="{_MATH}">{html.escape(tex, quote=False)}</div>\n'
    return f'<span class="{_MATH}">{html.escape(tex, quote=False)}</span>'


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
    """gatecell's constant stylesheet, the parts a fragment needs: tables, the token colours."""
    from pygments.formatters import HtmlFormatter

    if not code:
        return _TABLE_CSS if table else ""
    rules = HtmlFormatter(style=_theme_style()).get_token_style_defs(".gatecell-md .gatecell-code")
    colours = "".join(re.sub(r"\s*/\*.*?\*/", "", rule) for rule in rules)
    return (_TABLE_CSS if table else "") + _CODE_CSS + colours


@functools.lru_cache(maxsize=1)
def _theme_style() -> Any:
    """A Pygments style whose colours are the notebook's: JupyterLab's editor colours
    (``--jp-mirror-editor-*``), VS Code's debugger token colours, then JupyterLab Light's.

    Each is at least 4.5:1 against the output background in JupyterLab Light and Dark
    (tests/notebook/browser): comments take the muted text colour and decorators the
    property colour, as JupyterLab Dark's comment and meta colours reach about 4:1 there.
    """
    from pygments.style import Style
    from pygments.token import Comment, Error, Generic, Keyword, Name, Number, Operator, String

    def editor(name: str, vscode: str, light: str) -> str:
        return _colour(f"jp-mirror-editor-{name}-color", vscode, light)

    keyword = editor("keyword", "debugTokenExpression-boolean", "#008000")
    definition = editor("def", "debugTokenExpression-name", "#0000ff")
    string = editor("string", "debugTokenExpression-string", "#ba2121")

    class Notebook(Style):
        name = "gatecell-notebook"
        styles = {
            Comment: f"italic {MUTED}",
            Keyword: f"bold {keyword}",
            Keyword.Type: f"nobold {keyword}",
            Operator: editor("operator", "debugTokenExpression-name", "#7800c2"),
            Operator.Word: f"bold {keyword}",
            Name.Builtin: editor("builtin", "debugTokenExpression-boolean", "#008000"),
            Name.Function: definition,
            Name.Class: f"bold {definition}",
            Name.Namespace: f"bold {definition}",
            Name.Exception: f"bold {definition}",
            Name.Decorator: editor("property", "debugTokenExpression-name", "#0055aa"),
            Name.Variable: editor("variable-2", "debugTokenExpression-name", "#00366d"),
            Name.Constant: editor("variable-2", "debugTokenExpression-name", "#00366d"),
            Name.Attribute: editor("attribute", "debugTokenExpression-name", "#0000cc"),
            Name.Tag: f"bold {keyword}",
            String: string,
            String.Doc: f"italic {string}",
            Number: editor("number", "debugTokenExpression-number", "#008800"),
            Generic.Heading: "bold",
            Generic.Subheading: "bold",
            Generic.Deleted: string,
            Generic.Inserted: keyword,
            Generic.Error: string,
            Generic.Traceback: string,
            Generic.Emph: "italic",
            Generic.Strong: "bold",
            Generic.Prompt: "bold",
            Generic.Output: MUTED,
            Error: "border:#ff0000",
        }

    return Notebook
