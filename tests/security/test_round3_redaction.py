"""Issue 33, item 2: every text that leaves goes through the one redaction, and the wire, the
log and ``--show-prompt`` agree byte for byte.

A text file's contents, a PDF's text (``--as-text``), file names, a map's rows, a content list
handed to ``gw.chat``, the history a conversation sends again: none reaches the gateway with
this process's key or a credential in clear. The gateway on loopback keeps each body as it
arrived (wire_log.py); the magics run in a real IPython shell; the log is the real one. A row
the log holds from before a rule existed is redacted when the cache replays it.
"""

from __future__ import annotations

import base64
import html
import json
import re
import sqlite3
from pathlib import Path

import pytest
from probes import pointed_at
from wire_log import (
    KEY,
    WireLog,
    picture_bytes,
    wire_fixture,  # noqa: F401  (the "wire" fixture)
)

from gatecell.gateway import Gateway
from gatecell.store import default_store

PASSWORD = "hunter2-correct-horse"
SECRET_TEXT = f'db_password = "{PASSWORD}"\napi key in use: {KEY}\nrows: 3'
GITHUB = "ghp_" + "Zq9XbT4mW2pL7vRkAbCdEfGh1234567890ab"  # a shape a later rule masks


def _clean(text: str) -> bool:
    return KEY not in text and PASSWORD not in text and GITHUB not in text


def pdf_with(text: str) -> bytes:
    """A one-page PDF whose page says ``text`` (Helvetica, one line), written out here."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    table = b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"xref\n0 %d\n0000000000 65535 f \n%s" % (len(objects) + 1, table)
    return out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        len(out),
    )


@pytest.fixture
def shell(ipshell, cell_runner, wire, monkeypatch, home, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GATECELL_API_KEY", KEY)
    with pointed_at(ipshell, wire.base_url):
        yield cell_runner


def _shown_text(captured) -> str:
    """What ``--show-prompt`` put on the page, as a reader sees it (tags out, entities read)."""
    pages = [o.data.get("text/html", "") for o in captured.outputs if "prompt sent" in str(o.data)]
    assert pages, "no --show-prompt output"
    return html.unescape(re.sub(r"<[^>]+>", "", pages[0]))


def test_file_text_and_its_name_leave_redacted_and_show_prompt_agrees(shell, wire):
    Path(f"notes-{KEY}.txt").write_text(SECRET_TEXT)
    result, captured = shell(f"%%chat --no-stream -m m --show-prompt --file notes-{KEY}.txt\nWhat is this?")
    assert result.success, result.error_in_exec
    sent = wire.raw[-1].decode()
    assert _clean(sent), "the file's text or name left in clear"
    (question, file_text) = wire.texts()
    assert "rows: 3" in file_text and "db_password" in file_text  # the rest of it is there
    shown = _shown_text(captured)
    body = file_text.split("```", 1)[1].rsplit("```", 1)[0].strip("\n")
    assert all(line in shown for line in body.splitlines())  # --show-prompt shows what was sent
    assert _clean(shown)
    logged = default_store().logs(1)[0]
    assert file_text in [part.get("text") for part in logged["messages"][-1]["content"]]  # the log too

    result, _ = shell("%%chat --no-stream -m m\nAnd the number of rows?")  # the history goes again
    assert result.success, result.error_in_exec
    assert _clean(wire.raw[-1].decode()) and file_text in wire.texts()


def test_pdf_text_and_pdf_names_leave_redacted(shell, wire):
    Path("report.pdf").write_bytes(pdf_with(f"token = {KEY} and password={PASSWORD}"))
    result, _ = shell("%%chat --no-stream -m m --file report.pdf --as-text\nSummarise.")
    assert result.success, result.error_in_exec
    assert "token = " in wire.texts()[-1] and _clean(wire.raw[-1].decode())
    Path(f"report-{KEY}.pdf").write_bytes(pdf_with("nothing secret"))
    result, _ = shell(f"%%chat --no-stream -m m --new --file report-{KEY}.pdf\nSummarise.")
    assert result.success, result.error_in_exec
    (part,) = [p for p in wire.bodies[-1]["messages"][-1]["content"] if p["type"] == "file"]
    assert part["file"]["filename"].startswith("report-") and _clean(part["file"]["filename"])


def test_map_rows_leave_redacted_and_the_log_agrees(wire, home):
    rows = [{"note": f"password={PASSWORD}"}, {"note": f"the key is {KEY}"}]
    with Gateway(base_url=wire.base_url, api_key=KEY) as gw:
        batch = gw.map("Check {note}", rows, progress=False, cache=False)
    assert batch.failed == 0
    sent = sorted(wire.texts(i)[0] for i in range(2))
    assert all(_clean(text) for text in sent) and all(text.startswith("Check ") for text in sent)
    store = default_store()
    store.flush(10)
    logged = sorted(row["prompt"] for row in store.logs(2))
    assert logged == sent  # the log and the wire, byte for byte


def test_a_content_list_handed_to_gw_chat_leaves_redacted(wire, home, tmp_path):
    (tmp_path / "notes.txt").write_text(SECRET_TEXT)
    picture = picture_bytes("PNG", (40, 30))
    text_part = {"type": "text", "text": f"data: password={PASSWORD}"}  # text, whatever it begins with
    with Gateway(base_url=wire.base_url, api_key=KEY, log=False) as gw:
        content = ["Summarise", tmp_path / "notes.txt", text_part, picture]
        gw.chat(model="m", messages=[{"role": "user", "content": content}])
        gw.chat(
            model="m",
            messages=[{"role": "system", "content": f"key {KEY}"}, {"role": "user", "content": "hi"}],
        )
    assert all(_clean(raw.decode()) for raw in wire.raw)
    assert "rows: 3" in wire.texts(0)[1] and wire.texts(0)[2] == "data: password=…"
    url = wire.bodies[0]["messages"][0]["content"][3]["image_url"]["url"]
    assert base64.b64decode(url.partition(",")[2]) == picture  # bytes go as they are


def test_a_cache_row_from_before_a_rule_is_redacted_when_replayed(home):
    said = f"Deploy with {GITHUB} tonight."
    wire = WireLog(reply=said)
    question = [{"role": "user", "content": "How do I deploy?"}]
    try:
        with Gateway(base_url=wire.base_url, api_key=KEY, cache=True) as gw:
            gw.chat(model="m", messages=question)
            store = default_store()
            store.flush(10)
            with sqlite3.connect(store.path) as conn:
                (response, body) = conn.execute("SELECT response, response_json FROM exchanges").fetchone()
                assert GITHUB not in response + body  # the log masks the shape today; before a rule
                reply = json.loads(body)  # for it existed, it kept it in clear: write the row so
                reply["choices"][0]["message"]["content"] = said
                conn.execute(
                    "UPDATE exchanges SET response = ?, response_json = ?", (said, json.dumps(reply))
                )
            again = gw.chat(model="m", messages=question)
    finally:
        wire.stop()
    assert len(wire.raw) == 1  # the second answer came from the log
    assert again.text.startswith("Deploy with ghp") and GITHUB not in again.text
    assert GITHUB not in json.dumps(again.model_dump())
