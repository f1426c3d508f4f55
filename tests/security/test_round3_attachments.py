"""Issue 33, item 1: a string never becomes a file read.

A row's cell, a model's reply held in a variable, a template field: a string stays text,
even when it names an existing picture, a text file holding a secret, or a URL ending in
.png. Only what the user marks is attached: picture objects, bytes, ``pathlib.Path`` values,
an ``--image``/``--file`` typed in the cell, a column named by ``images=`` or
``--image-column``. Each entry point is driven for real (``gw.map``, ``df.gatecell.map``,
``gatecell.dask.map``, the ``gatecell map`` command, a magic in a real IPython shell) against
a gateway on loopback that keeps every body as it arrived (wire_log.py).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from probes import pointed_at
from wire_log import (
    KEY,
    WireLog,
    png_file,
    wire_fixture,  # noqa: F401  (the "wire" fixture)
)

from gatecell.gateway import Gateway
from gatecell.wire.transport.errors import InvalidRequest

URL = "https://pictures.example/cat.png"
SECRET_LINE = "db-password-in-a-file-0123"
SRC = Path(os.environ.get("GATECELL_TEST_SRC") or Path(__file__).resolve().parents[2] / "src")


@pytest.fixture
def files(tmp_path):
    """A real PNG and a text file holding a secret, as a hostile CSV's cells would name them."""
    png = png_file(tmp_path / "dent.png")
    notes = tmp_path / "notes.txt"
    notes.write_text(SECRET_LINE)
    return png, notes


def _no_file_left(wire: WireLog, png: Path) -> None:
    """Nothing of the files reached the gateway: no picture part, no bytes, no file text."""
    sent = b"".join(wire.raw)
    assert b"image_url" not in sent and b"base64" not in sent
    assert SECRET_LINE.encode() not in sent
    assert base64.b64encode(png.read_bytes()[:30]) not in sent


def test_gw_map_sends_cells_naming_files_or_urls_as_text(wire, files, home):
    png, notes = files
    rows = [{"photo": str(png)}, {"photo": str(notes)}, {"photo": URL}]
    with Gateway(base_url=wire.base_url, api_key=KEY) as gw:
        batch = gw.map("Describe {photo}", rows, progress=False, cache=False)
    assert batch.failed == 0 and len(wire.raw) == 3
    sent = sorted(wire.texts(i)[0] for i in range(3))
    assert sent == sorted(f"Describe {row['photo']}" for row in rows)  # the words, as written
    assert all(wire.parts(i) == ["text"] for i in range(3))
    _no_file_left(wire, png)


def test_a_column_the_user_names_is_attached(wire, files, home):
    png, _ = files
    rows = [{"photo": str(png), "note": str(png)}, {"photo": URL, "note": "x"}]
    with Gateway(base_url=wire.base_url, api_key=KEY) as gw:
        batch = gw.map("Describe {photo} ({note})", rows, progress=False, cache=False, images="photo")
        assert batch.failed == 0
        contents = [body["messages"][-1]["content"] for body in wire.bodies]
        urls = sorted(content[1]["image_url"]["url"] for content in contents)
        assert urls[0].startswith("data:image/png;base64,") and urls[1] == URL
        assert sorted(content[2]["text"] for content in contents) == sorted([f" ({png})", " (x)"])
        sent = len(wire.raw)
        with pytest.raises(InvalidRequest, match=r"images: names 'picture', which the template does not use"):
            gw.map("Describe {photo}", rows, progress=False, images="picture")
        gone = str(png.with_name("gone.png"))
        missing = gw.map("Describe {photo}", [{"photo": gone}], progress=False, images="photo")
    assert "gone.png: no such file" in missing.errors[0]  # that row fails alone, in one line
    assert len(wire.raw) == sent  # neither was sent


def test_pandas_accessor_keeps_strings_text(wire, files, home):
    import pandas as pd

    import gatecell.pandas  # noqa: F401  (the accessor)

    png, _ = files
    frame = pd.DataFrame({"photo": [str(png), URL]}, index=["a", "b"])
    with Gateway(base_url=wire.base_url, api_key=KEY) as gw:
        frame.gatecell.map("Describe {photo}", gateway=gw, progress=False, cache=False)
        _no_file_left(wire, png)
        assert all(wire.parts(i) == ["text"] for i in range(2))
        frame.gatecell.map("Look at {photo}", gateway=gw, progress=False, cache=False, images="photo")
    assert sorted(wire.parts(i)[1] for i in (2, 3)) == ["image_url", "image_url"]


def test_dask_map_keeps_strings_text(wire, files, home):
    dd = pytest.importorskip("dask.dataframe")
    import dask
    import pandas as pd

    from gatecell.dask import map as dask_map
    from gatecell.dask import ship

    png, _ = files
    frame = dd.from_pandas(pd.DataFrame({"photo": [str(png), URL]}), npartitions=1)
    with dask.config.set(scheduler="sync"):
        texts = dask_map(frame, "Describe {photo}", base_url=wire.base_url, api_key=ship(KEY)).compute()
        assert list(texts) == ["Noted.", "Noted."]
        _no_file_left(wire, png)
        dask_map(frame, "See {photo}", base_url=wire.base_url, api_key=ship(KEY), images="photo").compute()
    assert sorted(wire.parts(i)[1] for i in (2, 3)) == ["image_url", "image_url"]


def _cli(wire: WireLog, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATECELL_")}
    env.update(
        GATECELL_BASE_URL=wire.base_url,
        GATECELL_API_KEY=KEY,
        GATECELL_HOME=str(home),
        PYTHONPATH=str(SRC),
    )
    command = [sys.executable, "-m", "gatecell", "map", *args, "--no-progress", "--no-cache"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def test_gatecell_map_command_keeps_strings_text(wire, files, home, tmp_path):
    png, notes = files
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"photo": p}) + "\n" for p in (str(png), str(notes), URL)))
    done = _cli(wire, home, "Describe {photo}", "-i", str(rows), "-m", "m")
    assert done.returncode == 0, done.stderr
    assert len(wire.raw) == 3
    _no_file_left(wire, png)
    picture = tmp_path / "pictures.jsonl"
    picture.write_text(json.dumps({"photo": str(png)}) + "\n")
    done = _cli(wire, home, "Describe {photo}", "-i", str(picture), "-m", "m", "--image-column", "photo")
    assert done.returncode == 0, done.stderr
    assert wire.parts() == ["text", "image_url"]


@pytest.fixture
def shell(ipshell, cell_runner, wire, monkeypatch, home):
    monkeypatch.setenv("GATECELL_API_KEY", KEY)
    with pointed_at(ipshell, wire.base_url):
        yield ipshell, cell_runner


def test_a_variable_holding_a_path_fills_a_magic_as_text(shell, wire, files):
    ipshell, run = shell
    png, notes = files
    ipshell.user_ns.update(reply=str(png), notes=str(notes), link=URL, marked=png)
    result, _ = run("%%chat --no-stream -m m\nCompare {reply}, {notes} and {link}.")
    assert result.success, result.error_in_exec
    assert wire.texts() == [f"Compare {png}, {notes} and {URL}."] and wire.parts() == ["text"]
    _no_file_left(wire, png)
    result, _ = run("%%chat --no-stream -m m --new\nLook at {marked}")  # a pathlib.Path: the user's word
    assert result.success, result.error_in_exec
    assert wire.parts() == ["text", "image_url"]
    sent = len(wire.raw)
    result, captured = run("%%chat --no-stream -m m --new --image reply\nWhat is it?")
    assert not result.success
    assert "--image reply: the variable holds text, not a picture" in str(result.error_in_exec)
    assert len(wire.raw) == sent
