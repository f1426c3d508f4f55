"""What "inert" means for HTML that gatecell hands a frontend, checked with a real HTML parser.

A fragment is inert when nothing in it can run script or make the browser act on its own:
no script-bearing element, no event handler attribute, no URL with a scheme other than
http, https and mailto (media may use a ``data:`` URL of a type the display knows, or a
relative path to a file gatecell saved), no inline style that could load or run anything,
and no ``<style>`` but gatecell's own constant stylesheet.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

FORBIDDEN_TAGS = {
    *("script", "iframe", "frame", "frameset", "object", "embed", "applet", "svg", "math"),
    *("form", "input", "button", "textarea", "select", "meta", "link", "base", "template"),
    *("noscript", "portal", "xml"),
}
URL_ATTRS = {
    *("href", "src", "action", "formaction", "poster", "background", "cite", "data", "srcset"),
    *("xlink:href", "ping", "manifest", "codebase", "longdesc", "lowsrc", "dynsrc"),
}
MEDIA_DATA = re.compile(r"data:(image|audio|video)/(?!svg)[a-z0-9.+-]+;base64,[a-z0-9+/=]*")
DOWNLOAD_DATA = re.compile(r"data:application/octet-stream;base64,[a-z0-9+/=]*")
STYLE_LOADS = re.compile(r"url\(|expression|@import|behavior|binding|javascript|\\", re.I)


def problems(html: str) -> list[str]:
    """Every way ``html`` could run or load something; empty when it is inert."""
    checker = _Checker()
    checker.feed(html)
    checker.close()
    return checker.problems


def assert_inert(html: str) -> None:
    found = problems(html)
    assert not found, f"{found} in {html[:3000]!r}"


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self._style: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in FORBIDDEN_TAGS:
            self.problems.append(f"<{tag}>")
        if tag == "style":
            self._style = []
        for name, value in attrs:
            value = value or ""
            if name.startswith("on") or name in ("srcdoc", "formaction", "is", "xmlns"):
                self.problems.append(f"<{tag} {name}=...>")
            elif name == "style" and STYLE_LOADS.search(value):
                self.problems.append(f"<{tag} style={value!r}>")
            elif name == "http-equiv":
                self.problems.append(f"<{tag} http-equiv>")
            elif name in URL_ATTRS and not _url_ok(tag, name, value):
                self.problems.append(f"<{tag} {name}={value[:80]!r}>")

    handle_startendtag = handle_starttag

    def handle_data(self, data: str) -> None:
        if self._style is not None:
            self._style.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "style" and self._style is not None:
            from gatecell.notebook.markdown import stylesheet

            known = {stylesheet(table=t, code=c) for t in (True, False) for c in (True, False)}
            if "".join(self._style) not in known - {""}:
                self.problems.append("a <style> that is not gatecell's stylesheet")
            self._style = None

    def handle_comment(self, data: str) -> None:
        self.problems.append("a comment (conditional comments, parser tricks)")


def _url_ok(tag: str, attr: str, value: str) -> bool:
    # Browsers drop ASCII whitespace and control characters around and inside a scheme.
    url = re.sub(r"[\x00-\x20]", "", value).lower()
    scheme = re.match(r"([a-z][a-z0-9+.-]*):", url)
    if scheme is None:
        return tag in ("video", "a") and attr in ("src", "href") and not url.startswith(("//", "\\"))
    if scheme.group(1) in ("http", "https", "mailto"):
        return True
    if tag in ("img", "audio", "video") and attr == "src":
        return MEDIA_DATA.fullmatch(url) is not None
    return tag == "a" and attr == "href" and DOWNLOAD_DATA.fullmatch(url) is not None
