"""The honest victims, in Chromium: JupyterLab showing a trusted notebook of magics run against
the hostile gateway, and the panels in Voila driven against it.

JupyterLab runs the scripts and event handlers of a trusted notebook's HTML outputs; a
control output made on purpose proves it does here (``CONTROL`` in tests/browsers.py), so
that ``window.__pwned`` staying unset means gatecell's outputs gave it nothing to run.
"""

from __future__ import annotations

import hostile_gateway as evil
import pytest
from browsers import (
    CONTROL,
    SCAN,
    SETTLED,
    clean_env,
    dashboard_page,
    free_port,
    jupyterlab,
    run_notebook,
    serve,
    voila,
    write_notebook,
)

pytestmark = pytest.mark.browser

# -- JupyterLab ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab(tmp_path_factory, hostile):
    """A notebook of every magic, run against the hostile gateway by nbclient, signed with
    `jupyter trust`, then served by JupyterLab on a free port."""
    home = tmp_path_factory.mktemp("lab")
    root = home / "root"
    (root / "gatecell-media" / "video-x").mkdir(parents=True)
    setup = [
        "%load_ext gatecell",
        f"%config Gatecell.base_url = {hostile.base_url!r}",
        "%config Gatecell.video_embed_limit = 100",
    ]
    cells = [*setup, *evil.CELLS, f"from IPython.display import HTML\nHTML({CONTROL!r})"]
    nb = run_notebook(home, "hostile.ipynb", cells, GATECELL_API_KEY=evil.KEY)
    with jupyterlab(home) as url:
        yield url.format("hostile.ipynb"), nb


def test_jupyterlab_runs_no_script_from_a_hostile_gateway(browser, lab):
    url, nb = lab
    outputs = [o for cell in nb.cells for o in cell.get("outputs", [])]
    assert not [o for o in outputs if "text/markdown" in o.get("data", {})]
    assert sum("text/html" in o.get("data", {}) for o in outputs) >= 15  # the magics showed things
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(120_000)
    try:
        page.goto(url, wait_until="domcontentloaded")
        page.locator("#gatecell-control").wait_for(state="attached")
        # The control proves JupyterLab treats these outputs as trusted and runs their script.
        page.wait_for_function("() => window.__control === 1 && window.__control_script === 1")
        page.wait_for_function(SETTLED, arg=".jp-OutputArea-output")
        page.wait_for_load_state("networkidle")  # every image has been asked for and answered
        outputs = page.locator(".jp-Notebook")
        assert page.evaluate("() => window.__pwned || null") is None
        assert outputs.evaluate(SCAN) == []
        # and the replies were rendered, not dropped: headings, tables, highlighted code
        rendered = page.locator(".jp-OutputArea-output .gatecell-md h1", has_text=evil.CONTROL_HEADING)
        assert rendered.count() >= 6
        assert page.locator(".jp-OutputArea-output .gatecell-md table").count() >= 6
        assert page.locator(".jp-OutputArea-output pre.gatecell-code span.k").count() >= 6
        assert (
            page.locator(".jp-OutputArea-output details summary", has_text="Reasoning summary").count() == 2
        )
        text = outputs.inner_text()
        assert "<script>window.__pwned" in text  # a reply's raw HTML is there, as text
        assert "hostile-model\"'><img src=x onerror=" in text  # so are the ids, as written
    finally:
        context.close()


# -- the panels, in Voila -------------------------------------------------------------------


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory, hostile, browser):
    """Voila serving a dashboard whose gateway is the hostile one, next to a control widget."""
    home = tmp_path_factory.mktemp("voila-hostile")
    cells = [f"import ipywidgets\nipywidgets.HTML({CONTROL!r})", "import gatecell\ngatecell.dashboard()"]
    notebook = write_notebook(home / "hostile-dashboard.ipynb", cells)
    port = free_port()
    env = clean_env(home, GATECELL_BASE_URL=hostile.base_url, GATECELL_API_KEY=evil.KEY)
    with serve(voila(notebook, port), port, env, home / "voila.log", cwd=home):
        with dashboard_page(browser, f"http://127.0.0.1:{port}/") as page:
            yield page


def tab(page, title: str):
    page.locator(".gatecell-tabs .lm-TabBar-tab", has_text=title).click()


def test_panels_run_no_script_from_a_hostile_gateway(dashboard):
    page = dashboard
    chat = page.locator(".gatecell-chat")
    chat.locator(".gatecell-model select").select_option("hostile-chat")
    chat.locator(".gatecell-prompt textarea").fill("show me")
    chat.locator("button.gatecell-send").click()
    chat.locator(".gatecell-status", has_text="completion tokens").wait_for()
    reply = chat.locator(".gatecell-assistant").last
    assert reply.locator("h1").inner_text() == evil.CONTROL_HEADING
    assert reply.locator("table td").count() == 2 and reply.locator("span.k").count() >= 1

    tab(page, "Compare")
    compare = page.locator(".gatecell-compare")
    compare.locator(".gatecell-compare-models select").select_option(["hostile-chat", "hostile-error"])
    compare.locator(".gatecell-prompt textarea").fill("show me")
    compare.locator("button.gatecell-compare-run").click()
    compare.locator(".gatecell-status", has_text="1 of 2 failed").wait_for()
    assert compare.locator(".gatecell-compare-text h1").inner_text() == evil.CONTROL_HEADING

    tab(page, "Image")
    image = page.locator(".gatecell-image")
    image.locator(".gatecell-model select").select_option("hostile-image")
    image.locator(".gatecell-prompt textarea").fill("a picture")
    image.locator("button.gatecell-generate").click()
    image.locator(".gatecell-gallery img").wait_for()
    assert "a type gatecell does not show" in image.locator(".gatecell-gallery").inner_text()

    tab(page, "Speech")
    speech = page.locator(".gatecell-speech")
    speech.locator(".gatecell-model select").select_option("hostile-tts")
    speech.locator(".gatecell-prompt textarea").fill("hello")
    speech.locator("button.gatecell-speak").click()
    speech.locator(".gatecell-player", has_text="a type gatecell does not show").wait_for()

    tab(page, "Media")
    media = page.locator(".gatecell-media")
    media.locator(".gatecell-prompt textarea").fill("a clip")
    media.locator("button.gatecell-submit").click()
    media.locator(".gatecell-job video").wait_for(state="attached")
    media.locator(".gatecell-job-kind button", has_text="music").click()
    media.locator("button.gatecell-submit").click()
    media.locator(".gatecell-job-title", has_text="failed").wait_for()

    page.wait_for_function("() => window.__control === 1")  # innerHTML'd handlers do run here
    page.wait_for_function(SETTLED, arg=".gatecell-dashboard")
    page.wait_for_load_state("networkidle")
    assert page.evaluate("() => window.__pwned || null") is None
    assert page.locator(".gatecell-dashboard").evaluate(SCAN) == []
    assert "<script>window.__pwned" in chat.inner_text()  # the raw HTML is there, as text


# -- a panel sharing the conversation of the magics, in Voila --------------------------------


@pytest.fixture(scope="module")
def shared(tmp_path_factory, hostile, browser):
    """Voila running magics against the hostile gateway (a reply, an error and its explanation,
    shown with the prompt sent), then a chat panel sharing their conversation."""
    home = tmp_path_factory.mktemp("voila-shared-hostile")
    cells = [
        f"import ipywidgets\nipywidgets.HTML({CONTROL!r})",
        "%load_ext gatecell",
        "%%chat --show-prompt\nshow me",
        # Voila stops at a failing cell: this one fails and is shown as IPython shows gatecell's errors
        "import sys\ntry:\n    %chat -m hostile-error hi\n"
        "except Exception:\n    get_ipython().CustomTB(*sys.exc_info())",
        "%gatecell explain --show-prompt",
        "from gatecell.notebook.widgets import ChatPanel\n"
        "ChatPanel(conversation='default', model='hostile-chat').add_class('shared-panel')",
    ]
    notebook = write_notebook(home / "shared-hostile.ipynb", cells)
    port = free_port()
    env = clean_env(home, GATECELL_BASE_URL=hostile.base_url, GATECELL_API_KEY=evil.KEY)
    with serve(voila(notebook, port), port, env, home / "voila.log", cwd=home):
        with dashboard_page(browser, f"http://127.0.0.1:{port}/", ready=".shared-panel") as page:
            yield page


def test_a_panel_sharing_the_magics_conversation_runs_no_script(shared):
    page = shared
    panel = page.locator(".shared-panel")
    kept = panel.locator(".gatecell-assistant")
    assert kept.count() == 2  # the reply and the explanation, from the cells
    assert kept.first.locator("h1").inner_text() == evil.CONTROL_HEADING
    panel.locator(".gatecell-prompt textarea").fill("again")
    panel.locator("button.gatecell-send").click()
    panel.locator(".gatecell-status", has_text="completion tokens").wait_for()
    assert kept.count() == 3 and kept.last.locator("table td").count() == 2
    outputs = page.locator(".jp-OutputArea-output")
    assert outputs.filter(has_text="prompt sent").count() == 2  # the cells showed what they sent
    assert "<script>window.__pwned" in panel.inner_text()  # the raw HTML is there, as text

    page.wait_for_function("() => window.__control === 1")  # innerHTML'd handlers do run here
    page.wait_for_function(SETTLED, arg=".shared-panel")
    page.wait_for_load_state("networkidle")
    assert page.evaluate("() => window.__pwned || null") is None
    assert [bad for bad in outputs.evaluate_all(f"roots => roots.map({SCAN})") if bad] == []
