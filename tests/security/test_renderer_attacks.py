"""The renderer, the media types and the file names on their own, against every vector we know.

Each payload, if it survived, would run script in a frontend that trusts gatecell's output
(JupyterLab does, for outputs made while a notebook runs) or write outside the media folder.
"""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inert import assert_inert, problems

from gatecell.notebook.display import DOWNLOAD, SHOWN, media_bundle, media_type, safe_name
from gatecell.notebook.markdown import escape, to_html
from gatecell.wire.util._text import fence

VECTORS = [
    '<img src=x onerror="alert(1)">',
    "<script>alert(1)</script>",
    "<SCRIPT SRC=//evil.example/x.js></SCRIPT>",
    '<svg onload="alert(1)"></svg>',
    '<iframe srcdoc="<script>alert(1)</script>"></iframe>',
    '<details open ontoggle="alert(1)"><summary>x</summary></details>',
    '<a href="javascript:alert(1)">raw link</a>',
    '<form action="javascript:alert(1)"><button>go</button></form>',
    "<style>body{background:url(javascript:alert(1))}</style>",
    '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">',
    "<!--[if IE]><script>alert(1)</script><![endif]-->",
    "[link](javascript:alert(1))",
    "[upper](JAVASCRIPT:alert(1))",
    "[entity](&#106;avascript:alert(1))",
    "[hex entity](&#x6A;avascript&#x3A;alert(1))",
    "[named entity](javascript&colon;alert(1))",
    "[tab](java\tscript:alert(1))",
    "[spaces](  javascript:alert(1))",
    "[vb](vbscript:msgbox(1))",
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[file](file:///etc/passwd)",
    "![image](javascript:alert(1))",
    '![attr](x" onerror="alert(1))',
    "![svg](data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+)",
    "<javascript:alert(1)>",
    "[ref][r]\n\n[r]: javascript:alert(1)",
    '[title](https://example.com "x\\" onmouseover=\\"alert(1)")',
    "&lt;img src=x onerror=alert(1)&gt;",
    "`<img src=x onerror=alert(1)>`",
    "```html\n<script>alert(1)</script>\n```",
    '```"><img src=x onerror=alert(1)>\ncode\n```',
    "| a | b |\n|---|---|\n| <img src=x onerror=alert(1)> | [x](javascript:alert(1)) |",
    "> <script>alert(1)</script>",
    "- <iframe src=javascript:alert(1)>",
    "<div style=\"background:url('javascript:alert(1)')\">x</div>",
    '<a href="https://ok.example" onclick="alert(1)">mixed</a>',
    # inside formulas: what MathJax is handed is escaped text, never markup
    "$<img src=x onerror=alert(1)>$",
    "$$</span><script>alert(1)</script>$$",
    "\\(<svg onload=alert(1)>\\)",
    '\\[</div><iframe srcdoc="<script>alert(1)</script>">\\]',
    "$\\href{javascript:alert(1)}{x}$",
    "$[x](javascript:alert(1))$",
    '$x" class="evil" onmouseover="alert(1)$',
    "$$\n<img src=x onerror=alert(1)>\n$$",
]


@pytest.mark.parametrize(
    "html",
    [
        '<img src=x onerror="alert(1)">',
        "<script>alert(1)</script>",
        '<a href="java&#115;cript:alert(1)">x</a>',
        '<a href=" javascript:alert(1)">x</a>',
        '<img src="data:image/svg+xml;base64,PHN2Zz4=">',
        '<a href="data:text/html,x">x</a>',
        '<td style="background:url(x)">x</td>',
        "<style>body{}</style>",
        "<svg><a xlink:href=javascript:alert(1)>x</a></svg>",
    ],
)
def test_the_checker_sees_what_would_run(html):
    assert problems(html)  # so that an inert verdict below means something


@pytest.mark.parametrize("vector", VECTORS)
def test_no_vector_survives_the_renderer(vector):
    out = to_html(f"Some text before.\n\n{vector}\n\nAnd after.")
    assert_inert(out)
    assert "<script" not in out.lower()
    assert "Some text before." in out and "And after." in out  # the reply is still shown


def test_raw_html_is_shown_as_text_not_dropped():
    out = to_html('<img src=x onerror="alert(1)"> and <b>bold</b>')
    assert _text_of(out) == '<img src=x onerror="alert(1)"> and <b>bold</b>'
    assert "&lt;img" in out and "<b>" not in out


@pytest.mark.parametrize(
    "reply",
    ["$<img src=x onerror=alert(1)>$", "\\(</span><b onclick=alert(1)>x\\)", "$$\n<script>x</script>\n$$"],
)
def test_a_formula_is_text_in_an_element_of_the_math_classes_only(reply):
    out = to_html(reply)
    assert_inert(out)
    tags = re.findall(r"<(span|div)\b([^>]*)>", out)
    assert tags[0] == ("div", ' class="gatecell-md mathjax_ignore tex2jax_ignore"')
    assert tags[1:] == [(tags[1][0], ' class="math mathjax_process tex2jax_process"')]
    assert _text_of(out) == reply.strip("\n")  # as written, delimiters and all


def test_only_absolute_web_and_mail_links_are_links():
    out = to_html(
        "[web](https://example.com/a?b=1&c=2) [mail](mailto:a@example.com) "
        "[relative](notes/x.md) [root](/api/contents) [fragment](#top) [proto](//evil.example/x)"
    )
    hrefs = re.findall(r'href="([^"]*)"', out)
    assert hrefs == ["https://example.com/a?b=1&amp;c=2", "mailto:a@example.com"]
    assert 'target="_blank"' in out and 'rel="noopener noreferrer nofollow"' in out


def test_an_image_is_a_link_the_browser_does_not_fetch():
    out = to_html("![a chart](https://example.com/leak?q=secret)")
    assert "<img" not in out
    assert '<a href="https://example.com/leak?q=secret"' in out and "image: a chart" in out


# Pieces that matter to Markdown and to HTML parsers, joined at random with random text.
PIECES = [
    *("<", ">", "</", "/>", "&", "&#", "&#x", ";", "=", '"', "'", "`", "```", "~~~", "\n", "\n\n", " "),
    *("\t", "[", "]", "(", ")", "![", "](", "]:", "<a href=", "<img src=", "<svg", "<script>"),
    *("<iframe", "<style>", "<!--", "-->", "<![CDATA[", "onerror", "onload", "on", "src", "href"),
    *("javascript:", "java\tscript:", "JaVaScRiPt:", "&#106;", "&#x6A;", "&colon;", "&Tab;"),
    *("vbscript:", "data:", "text/html", "base64,", "x", "alert(1)", "http://", "//", "\\"),
    *("*", "_", "|", "---", "#", "- ", "1. ", "> ", "    ", "|---|", "style=", "expression("),
    *("$", "$$", "\\(", "\\)", "\\[", "\\]", "\\href{", "class=", "</span>", "</div>", "mathjax_process"),
]
TEXT = st.lists(st.sampled_from(PIECES) | st.text(max_size=4), max_size=80).map("".join)


@settings(max_examples=400, deadline=None)
@given(TEXT)
def test_random_text_never_yields_script_handlers_or_bad_urls(text):
    out = to_html(text)
    assert_inert(out)
    assert "<script" not in out.lower()
    assert not re.search(r"<[^>]*\son[a-z]+\s*=", out, re.I)
    styles = re.findall(r"<[a-z0-9]+ [^>]*style=\"([^\"]*)\"", out)
    assert all(re.fullmatch(r"text-align:(left|right|center)", s) for s in styles), styles
    classes = set(re.findall(r"<[a-z0-9]+ [^>]*class=\"([^\"]*)\"", out))
    allowed = {"gatecell-md mathjax_ignore tex2jax_ignore", "math mathjax_process tex2jax_process"}
    assert all(c in allowed or c == "gatecell-code" or re.fullmatch(r"[a-z0-9]{1,3}", c) for c in classes)


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=60))
def test_an_escaped_string_reads_exactly_as_written(value):
    out = to_html(escape(value))
    assert_inert(out)
    assert _text_of(out) == " ".join(value.split())
    assert "<a " not in out and "<code>" not in out and "<em>" not in out


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=60))
def test_a_fenced_body_cannot_close_its_fence(body):
    out = to_html(fence(body, "json"))
    assert out.count("<pre") == 1
    assert _text_of(out).strip("\n") == body.replace("\r\n", "\n").replace("\r", "\n").strip("\n")


# -- media types ------------------------------------------------------------------------

HOSTILE_TYPES = [
    'audio/wav"><img src=x onerror=alert(1)>',
    "image/png'><script>alert(1)</script>",
    "text/html",
    "image/svg+xml",
    "application/javascript",
    "video/mp4 onerror=alert(1)",
    "audio/x-unknown",
    "",
    "audio/",
    "/wav",
]


@pytest.mark.parametrize("declared", HOSTILE_TYPES)
def test_a_hostile_or_unknown_media_type_never_reaches_html(declared, tmp_path):
    data = b"not a known signature " * 20
    assert media_type(data, declared) == DOWNLOAD
    bundle = media_bundle(data, declared, media_dir=str(tmp_path))
    assert set(bundle) == {"text/html", "text/plain"}
    assert_inert(bundle["text/html"])
    assert "download media.bin" in bundle["text/html"]
    assert not declared or declared not in bundle["text/html"]


def test_parameters_are_dropped_and_the_bytes_win():
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 24
    assert media_type(b"\x00" * 8, 'audio/mpeg; codecs="><img src=x onerror=alert(1)>"') == "audio/mpeg"
    assert media_type(wav, "image/png") == "audio/wav"  # headers lie, bytes do not
    bundle = media_bundle(wav, 'audio/mpeg; x="><script>alert(1)</script>"')
    assert bundle["text/html"].startswith('<audio controls src="data:audio/wav;base64,')
    assert_inert(bundle["text/html"])


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), st.binary(max_size=16))
def test_any_declared_type_becomes_a_known_type_or_a_download(declared, data):
    mime = media_type(data, declared)
    assert mime in SHOWN or mime == DOWNLOAD
    bundle = media_bundle(data, declared, embed_limit=10**9)
    for kind, value in bundle.items():
        if kind == "text/html":
            assert_inert(value)


# -- file names -------------------------------------------------------------------------

HOSTILE_NAMES = [
    "x/../../../../escaped",
    "../../escaped",
    "..",
    ".",
    "/etc/passwd",
    "C:\\Windows\\evil",
    "..\\..\\evil",
    "a\x00b",
    ".hidden",
    "video-" + "x" * 500,
    "",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_name_never_leaves_the_media_folder(name, tmp_path):
    media = tmp_path / "deep" / "er" / "media"
    (media / "x").mkdir(parents=True)  # a folder an id could walk through
    video = b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 200
    bundle = media_bundle(video, "video/mp4", embed_limit=10, media_dir=str(media), name=name)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) == 1 and written[0].parent == media, written
    assert written[0].read_bytes() == video
    assert not written[0].name.startswith(".")
    assert_inert(bundle["text/html"])


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=120))
def test_a_safe_name_is_one_plain_component(name):
    safe = safe_name(name)
    assert safe and len(safe) <= 100 and not safe.startswith(".")
    assert re.fullmatch(r"[A-Za-z0-9._-]+", safe)
    assert os.path.basename(safe) == safe and os.path.normpath(safe) == safe


def _text_of(html: str) -> str:
    from html.parser import HTMLParser

    parts: list[str] = []

    class Text(HTMLParser):
        skip = False

        def handle_starttag(self, tag, attrs):
            self.skip = tag == "style"

        def handle_endtag(self, tag):
            self.skip = False

        def handle_data(self, data):
            if not self.skip:
                parts.append(data)

    Text(convert_charrefs=True).feed(html)
    return "".join(parts).strip("\n")
