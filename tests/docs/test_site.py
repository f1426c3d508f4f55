"""The documentation site builds with ``mkdocs build --strict``: a broken link, a missing
anchor, an API reference to a name that does not exist or an included file that is gone
fails the test suite, as it would fail ``make docs``."""

from __future__ import annotations

import html
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def mkdocs(config: Path, site: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict``, run from ``cwd`` (mkdocs-jupyter keeps its cache there).
    Not ``-q``: it silences the warnings that ``--strict`` counts, and a broken site builds."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_site_builds_strict(tmp_path: Path):
    site = tmp_path / "site"
    done = mkdocs(ROOT / "mkdocs.yml", site, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    reference = (site / "reference" / "index.html").read_text()
    for name in ("gatecell.Gateway", "gatecell.AsyncGateway", "gatecell.APIError", "gatecell.logs"):
        assert f'id="{name}"' in reference, name
    assert 'id="gatecell.Gateway.chat"' in reference  # its methods, from their docstrings
    quickstart = (site / "tutorials" / "01-quickstart" / "index.html").read_text()
    assert "jp-OutputArea" in quickstart  # rendered with the outputs saved in the notebook
    spec = (site / "SPEC" / "index.html").read_text()
    assert "Notes:</p>\n<ol>\n<li>The first path segments" in spec  # a list right after a line of text
    changelog = (site / "changelog" / "index.html").read_text()
    headings = [line.lstrip("# ") for line in (ROOT / "CHANGELOG.md").read_text().splitlines()[1:]]
    last = [h for h in headings if h.startswith("Changed") or h.startswith("Added")][-1]
    assert html.escape(last, quote=False) in changelog  # the root CHANGELOG.md itself, not a copy


BROKEN = {  # a fault, and what the build's error names; links and anchors are checked together
    "link": (
        "[gone](no-such-page.md) [gone](target.md#no-such-heading)",
        ("no-such-page", "no-such-heading"),
    ),
    "reference": ("::: gatecell.NoSuchName", ("NoSuchName",)),
    "snippet": ('--8<-- "NO-SUCH-FILE.md"', ("NO-SUCH-FILE",)),
}
WHOLE = '[a heading](target.md#a-heading)\n\n::: gatecell.Secret\n\n--8<-- "INCLUDED.md"\n'


def build_a_page(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    """The site's configuration on a small site of its own: a page holding ``text``, and a
    page it may link to (a quick build, without the tutorials)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(f"# Home\n\n{text}\n")
    (docs / "target.md").write_text("# Target\n\n## A heading\n")
    (tmp_path / "INCLUDED.md").write_text("## Included\n")  # beside mkdocs.yml, as CHANGELOG.md is
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: {docs}\nnav: [index.md, target.md]\n"
        f"hooks: [{ROOT / 'docs' / '_hooks' / 'lists.py'}]\n"  # paths are the child's own
    )
    return mkdocs(config, tmp_path / "site", tmp_path)


@pytest.mark.parametrize("fault", BROKEN)
def test_a_broken_page_fails_the_build(tmp_path: Path, fault: str):
    text, named = BROKEN[fault]
    done = build_a_page(tmp_path, text)
    assert done.returncode != 0, f"a broken {fault} built: {done.stderr[-2000:]}"
    for name in named:
        assert name in done.stderr, done.stderr[-2000:]


def test_the_same_page_whole_builds(tmp_path: Path):
    """The control of the test above: a good link, anchor, reference and snippet build."""
    done = build_a_page(tmp_path, WHOLE)
    assert done.returncode == 0, done.stderr[-2000:]
    page = (tmp_path / "site" / "index.html").read_text()
    assert 'id="gatecell.Secret"' in page and 'id="included"' in page
