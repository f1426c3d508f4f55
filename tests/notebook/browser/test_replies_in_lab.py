"""A ``%%chat`` reply in JupyterLab, in Chromium: its formulas typeset by JupyterLab's own
MathJax and nothing else typeset, hostile TeX running nothing, and its code, table and footer
readable in JupyterLab Light and JupyterLab Dark.

The replies come from the embedded gateway's stand-in model, which repeats what it is told;
nbclient runs the notebook, `jupyter trust` signs it, JupyterLab serves it (tests/browsers.py).
Readable means a WCAG contrast ratio of at least 4.5 between each highlighted token (each
table cell, the footer) and what is painted behind it, from the browser's computed styles.
Screenshots of the reply in both themes go to the `screenshots` folder (docs/screenshots for
the README).
"""

from __future__ import annotations

import re

import pytest
from browsers import CONTROL, SCAN, SETTLED, jupyterlab, lab_settings, run_notebook

pytestmark = pytest.mark.browser

# The stand-in model answers arithmetic it finds (a digit, an operator, a digit) before it
# repeats: these texts have none.
REPLY = r"""## Kinetic energy

The variance is $\sigma^2 = E[(X-\mu)^2]$ and the mean \(\bar x = \tfrac1n \sum_i x_i\); in a line,
$$\int_a^b x^2\,dx = \tfrac13 (b^3 - a^3)$$ and as a block of its own:

$$
E_k = \tfrac12 m v^2
$$

A coffee costs $5 and a sandwich $10.

| quantity | symbol | unit |
|:---|:---:|---:|
| mass | $m$ | kg |
| speed | $v$ | m/s |

```python
@dataclass
class Body:
    mass: float = 1.0  # kg

    def energy(self, speed: float) -> float:
        '''Kinetic energy in joules.'''
        return 0.5 * self.mass * speed**2 if speed else print("at rest", None)
```"""
FORMULAS = 6  # sigma, x bar, the integral, E_k, m, v
DISPLAYED = 2  # the integral in its line and E_k as a block

PWN = "window.__pwned=(window.__pwned||[]).concat('{}')"
HOSTILE = rf"""## Hostile TeX

$<img src=x onerror="{PWN.format("img-in-math")}">$ and
$\href{{javascript:{PWN.format("href-in-math")}}}{{click me}}$ and
\(\class{{x" onmouseover="{PWN.format("class-in-math")}}}{{y}}\) and
$\style{{background:url(javascript:{PWN.format("style-in-math")})}}{{z}}$ and
$$\unicode{{<img src=x onerror={PWN.format("unicode-in-math")}>}}$$"""

CELLS = [
    "%load_ext gatecell",
    f"%%chat --no-interpolate --footer\nrepeat after me: {REPLY}",
    f"%%chat --no-interpolate --new\nrepeat after me: {HOSTILE}",
    f"from IPython.display import HTML\nHTML({CONTROL!r})",
]

THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}

# For every element whose text must be readable: its colour and the background colours of it
# and each of its ancestors, innermost first (the browser paints them in that stack).
COLOURS = """(out, selector) => [...out.querySelectorAll(selector)]
  .filter(e => [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()))
  .map(e => {
    const layers = [];
    for (let a = e; a; a = a.parentElement) layers.push(getComputedStyle(a).backgroundColor);
    const text = e.textContent.trim().slice(0, 30);
    return {text, cls: e.className, colour: getComputedStyle(e).color, layers};
  })"""
READABLE = "pre.gatecell-code, pre.gatecell-code span, table th, table td, .gatecell-footer sub"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    home = tmp_path_factory.mktemp("lab-replies")
    nb = run_notebook(home, "replies.ipynb", CELLS, GATECELL_HOME=str(home / "gatecell"))
    with jupyterlab(home) as url:
        yield home, url.format("replies.ipynb"), nb


@pytest.fixture
def open_lab(browser, lab):
    """``open_lab(theme)``: the notebook in JupyterLab with that theme, every output shown and
    typeset; returns the page."""
    home, url, _ = lab
    contexts = []

    def open_page(theme: str = "light"):
        lab_settings(home, "@jupyterlab/apputils-extension", "themes", {"theme": THEMES[theme]})
        context = browser.new_context(viewport={"width": 1280, "height": 1600})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(120_000)
        page.goto(url, wait_until="domcontentloaded")
        page.wait_for_function("name => document.body.dataset.jpThemeName === name", arg=THEMES[theme])
        page.locator("#gatecell-control").wait_for(state="attached")
        reply(page).locator("mjx-container").nth(FORMULAS - 1).wait_for(state="attached")
        return page

    yield open_page
    for context in contexts:
        context.close()


def reply(page, heading: str = "Kinetic energy"):
    return page.locator(".jp-OutputArea-output", has=page.locator(".gatecell-md h2", has_text=heading))


def test_the_reply_is_html_never_markdown(lab):
    _, _, nb = lab
    outputs = [o for o in nb.cells[1].outputs if "data" in o]
    assert outputs and not [o for o in outputs if "text/markdown" in o["data"]]
    shown = outputs[-1]["data"]["text/html"]
    for formula in (r"$\sigma^2 = E[(X-\mu)^2]$", r"\(\bar x = \tfrac1n \sum_i x_i\)", r"x^2\,dx"):
        assert formula in shown  # as written: backslashes, underscores and delimiters kept


def test_formulas_are_typeset_and_nothing_else(open_lab):
    page = open_lab("light")
    shown = reply(page)
    formulas = shown.locator("mjx-container")
    assert formulas.count() == FORMULAS
    assert shown.locator('mjx-container[display="true"]').count() == DISPLAYED
    assert shown.locator("mjx-merror").count() == 0  # TeX MathJax understood, \, and \tfrac too
    # every typeset formula is one the renderer marked, none is in plain text
    assert formulas.evaluate_all("fs => fs.every(f => f.closest('.math'))")
    price = shown.locator("p", has_text="A coffee costs")
    assert price.locator("mjx-container").count() == 0
    assert "A coffee costs $5 and a sandwich $10." in price.inner_text()
    assert shown.locator("table td mjx-container").count() == 2


def test_hostile_tex_runs_nothing(open_lab):
    page = open_lab("light")
    # JupyterLab runs the handlers and scripts of these outputs: the control did run
    page.wait_for_function("() => window.__control === 1 && window.__control_script === 1")
    hostile = reply(page, "Hostile TeX")
    assert hostile.locator("mjx-container").count() == 5  # each formula typeset, as TeX, not HTML
    for formula in hostile.locator("mjx-container").all():
        formula.hover()
        formula.click()
    page.wait_for_function(SETTLED, arg=".jp-OutputArea-output")
    page.wait_for_load_state("networkidle")
    assert page.evaluate("() => window.__pwned || null") is None
    assert page.locator(".jp-Notebook").evaluate(SCAN) == []


def _rgba(css: str) -> tuple[float, float, float, float]:
    r, g, b, *a = (float(v) for v in re.findall(r"[\d.]+", css))
    return r, g, b, a[0] if a else 1.0


def _over(top: tuple[float, ...], below: tuple[float, float, float]) -> tuple[float, float, float]:
    *rgb, alpha = top
    return tuple(alpha * c + (1 - alpha) * d for c, d in zip(rgb, below, strict=True))  # type: ignore[return-value]


def _luminance(rgb: tuple[float, float, float]) -> float:
    def linear(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(colour: str, layers: list[str]) -> float:
    """WCAG 2 contrast ratio of text in ``colour`` over the stack of background ``layers``
    (innermost first) on a white canvas."""
    behind = (255.0, 255.0, 255.0)
    for layer in reversed(layers):
        behind = _over(_rgba(layer), behind)
    light, dark = sorted((_luminance(_over(_rgba(colour), behind)), _luminance(behind)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


@pytest.mark.parametrize("theme", THEMES)
def test_code_table_and_footer_are_readable_in_both_themes(open_lab, screenshots, theme):
    page = open_lab(theme)
    shown = reply(page)
    found = shown.evaluate(COLOURS, READABLE)
    kinds = {c for e in found for c in e["cls"].split()}
    assert {
        "k",
        "nd",
        "nc",
        "nf",
        "s2",
        "sd",
        "mf",
        "c1",
        "nb",
        "o",
        "kc",
    } <= kinds  # the code was highlighted
    ratios = sorted((round(contrast(e["colour"], e["layers"]), 2), e["text"], e["cls"]) for e in found)
    assert ratios[0][0] >= 4.5, ratios[:5]
    pre = shown.locator("pre.gatecell-code")
    if theme == "dark":  # the theme's colours, not the light defaults
        assert _luminance(_rgba(pre.evaluate("e => getComputedStyle(e).backgroundColor"))[:3]) < 0.05
    # with the output's gutter and margins around it
    shown.locator("xpath=..").screenshot(path=str(screenshots / f"reply-{theme}.png"))
