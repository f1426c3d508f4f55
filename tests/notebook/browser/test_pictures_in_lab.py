"""Pictures and tables of the magics in JupyterLab, in Chromium: a picture is shown at its
natural size up to `PICTURE_SIDE` pixels, a wider one at that width until a click shows it
whole; `%gatecell models` has its text to the left (issue 32, section 4)."""

from __future__ import annotations

import pytest
from browsers import jupyterlab, run_notebook

pytestmark = pytest.mark.browser

PICTURE_SIDE = 512  # gatecell.notebook.display.PICTURE_SIDE, as a user sees it

CELLS = [
    "%load_ext gatecell",
    "%%image --size 1024x1024\na big red square",
    "%%image --size 64x64\na small blue square",
    "%gatecell models",
]


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    home = tmp_path_factory.mktemp("lab-pictures")
    run_notebook(home, "pictures.ipynb", CELLS, GATECELL_HOME=str(home / "gatecell"))
    with jupyterlab(home) as url:
        context = browser.new_context(viewport={"width": 1600, "height": 1400})
        page = context.new_page()
        page.set_default_timeout(120_000)
        page.goto(url.format("pictures.ipynb"), wait_until="domcontentloaded")
        page.locator(".jp-OutputArea-output table").wait_for()
        yield page
        context.close()


def _width(image) -> int:
    image.evaluate("img => img.decode()")
    return image.evaluate("img => img.getBoundingClientRect().width")


def test_a_big_picture_is_shown_capped_and_a_click_shows_it_whole(page):
    big = page.locator("details.gatecell-picture img")
    assert big.count() == 1
    assert big.evaluate("img => img.naturalWidth") == 1024
    assert _width(big) == PICTURE_SIDE
    big.click()
    page.wait_for_function("() => document.querySelector('details.gatecell-picture').open")
    assert _width(big) == 1024
    big.click()
    page.wait_for_function("() => !document.querySelector('details.gatecell-picture').open")
    assert _width(big) == PICTURE_SIDE


def test_a_small_picture_keeps_its_natural_size(page):
    small = page.locator(".jp-RenderedImage img")
    assert small.count() == 1 and _width(small) == 64


def test_models_text_is_left_aligned(page):
    cells = page.locator(".jp-OutputArea-output table td")
    aligned = cells.evaluate_all("tds => tds.map(td => getComputedStyle(td).textAlign)")
    assert aligned and set(aligned) == {"left"}  # JupyterLab's own tables right-align every cell
