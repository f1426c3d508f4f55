"""Issue 33.3 and 33.4: PDFs are read under a budget, in a worker that can be stopped, and
whatever pypdf raises is one line (a 400 from the local gateway).

The PDFs are made here with pypdf. `slow_pdf` is 10 KB whose one page's content stream,
compressed, holds 900,000 text-showing operators, just under pypdf's own budget of 2,000,000
tokens a stream: pypdf spends 30 to 60 seconds on that page (measured: 59.8 s on this
machine under load, 0.9 s for 40,000 operators). `unknown_filter_pdf` keeps its page in an
object stream compressed with a filter pypdf does not know: ``NotImplementedError``.
"""

from __future__ import annotations

import io
import os
import resource
import struct
import threading
import time
from pathlib import Path

import pytest
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from gatecell import Gateway
from gatecell.wire.apis.attachments import load
from gatecell.wire.apis.pdf import WORKERS, PdfText, pdf_text
from gatecell.wire.transport.errors import APITimeoutError, BadRequestError, InvalidRequest

OPERATORS = 900_000  # in one page: under pypdf's token budget, and tens of seconds of its time
UNREADABLE = "pypdf cannot read it (NotImplementedError: Unsupported filter /NoSuchDecode)"


def _ask(pdf: Path) -> list[dict]:
    """A user message asking about the PDF at ``pdf``, attached as a document."""
    return [{"role": "user", "content": ["What is this?", load(pdf)]}]


def pages_pdf(texts: list[str], operators: int = 1, shown: bytes = b"BT /F1 1 Tf (%s) Tj ET\n") -> bytes:
    """One page per text, each ``shown`` ``operators`` times in a compressed content stream."""
    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    fonts = DictionaryObject({NameObject("/F1"): writer._add_object(font)})
    for text in texts:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): fonts})
        plain = DecodedStreamObject()
        plain.set_data(shown.replace(b"%s", text.encode()) * operators)
        page[NameObject("/Contents")] = writer._add_object(plain.flate_encode(level=9))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def slow_pdf() -> bytes:
    return pages_pdf(["a"], OPERATORS, b"(%s) Tj\n")


def unknown_filter_pdf() -> bytes:
    """A PDF 1.5 whose page is in an object stream under ``/Filter /NoSuchDecode``."""
    out = io.BytesIO()
    offsets: dict[int, int] = {}

    def obj(number: int, body: bytes) -> None:
        offsets[number] = out.tell()
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))

    out.write(b"%PDF-1.5\n")
    obj(1, b"<< /Type /Catalog /Pages 2 0 R >>")
    obj(2, b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
    packed = b"3 0 << /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"
    obj(4, b"<< /Type /ObjStm /N 1 /First 4 /Length %d /Filter /NoSuchDecode >>\nstream\n%s\nendstream" % (
        len(packed), packed))  # fmt: skip
    xref = out.tell()
    rows = [(0, 0, 255), (1, offsets[1], 0), (1, offsets[2], 0), (2, 4, 0), (1, offsets[4], 0), (1, xref, 0)]
    table = b"".join(struct.pack(">BHB", *row) for row in rows)
    out.write(b"5 0 obj\n<< /Type /XRef /Size 6 /W [1 2 1] /Root 1 0 R /Length %d >>\nstream\n" % len(table))
    out.write(table + b"\nendstream\nendobj\nstartxref\n%d\n%%%%EOF\n" % xref)
    return out.getvalue()


@pytest.fixture
def pdfs(tmp_path: Path) -> Path:
    (tmp_path / "slow.pdf").write_bytes(slow_pdf())
    (tmp_path / "five.pdf").write_bytes(pages_pdf([f"page{i}" for i in range(1, 6)]))
    (tmp_path / "unknown.pdf").write_bytes(unknown_filter_pdf())
    return tmp_path


# -- 33.3: the budget ------------------------------------------------------------------------


def test_a_small_pdf_that_takes_pypdf_long_stops_at_the_seconds_budget(pdfs, monkeypatch):
    assert (pdfs / "slow.pdf").stat().st_size < 12_000
    monkeypatch.setenv("GATECELL_PDF_MAX_SECONDS", "1")
    sent = load(pdfs / "slow.pdf").as_text()
    assert sent.text is not None
    assert sent.text.endswith(
        "(text extraction stopped after 1 s (GATECELL_PDF_MAX_SECONDS): 0 of 1 pages read)"
    )
    assert "GATECELL_PDF_MAX_SECONDS" in sent.description


def test_pages_and_characters_are_budgeted_and_named(pdfs, monkeypatch):
    whole = load(pdfs / "five.pdf").as_text().text
    assert whole is not None and "page5" in whole and "stopped" not in whole
    monkeypatch.setenv("GATECELL_PDF_MAX_PAGES", "2")
    two = load(pdfs / "five.pdf").as_text().text
    assert two is not None and "page2" in two and "page3" not in two
    assert two.endswith("(text extraction stopped at 2 pages (GATECELL_PDF_MAX_PAGES): 2 of 5 pages read)")
    monkeypatch.setenv("GATECELL_PDF_MAX_PAGES", "200")
    monkeypatch.setenv("GATECELL_PDF_MAX_CHARS", "8")
    eight = load(pdfs / "five.pdf").as_text().text
    assert eight is not None and "page3" not in eight
    assert eight.endswith(
        "(text extraction stopped at 8 characters (GATECELL_PDF_MAX_CHARS): 2 of 5 pages read)"
    )


def test_the_local_gateway_describes_a_slow_pdf_within_its_budget(pdfs, make_gateway, monkeypatch):
    monkeypatch.setenv("GATECELL_PDF_MAX_SECONDS", "1")
    local = make_gateway()
    with Gateway(local.base_url, local.api_key, max_retries=0) as gw:
        reply = gw.chat("local-chat", _ask(pdfs / "slow.pdf"))
    assert "1 page, 0 characters of text" in reply.text
    assert "text extraction stopped after 1 s (GATECELL_PDF_MAX_SECONDS): 0 of 1 pages read" in reply.text


def _workers() -> list[int]:
    """The PDF workers this process started (the local gateway runs in it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"gatecell.wire.apis.pdf" in command and parent == os.getpid():
            found.append(int(entry.name))
    return found


def _wait(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_the_local_gateway_stops_the_work_of_a_client_that_has_gone(pdfs, make_gateway, monkeypatch):
    monkeypatch.setenv("GATECELL_PDF_MAX_SECONDS", "600")  # only the client's going can stop it soon
    local = make_gateway()
    assert _workers() == []
    outcome: list[BaseException] = []

    def ask() -> None:  # a client that gives up after 3 s, while the PDF is being read
        with Gateway(local.base_url, local.api_key, max_retries=0, timeout=3) as gw:
            try:
                gw.chat("local-chat", _ask(pdfs / "slow.pdf"))
            except APITimeoutError as exc:
                outcome.append(exc)

    client = threading.Thread(target=ask)
    client.start()
    _wait(lambda: _workers() != [], "the PDF to be read in a worker process")  # the form that can stop
    client.join(60)
    assert outcome, "the client did not time out"
    _wait(lambda: _workers() == [], "the worker of the request whose client went away to stop")
    before = resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(5)
    after = resource.getrusage(resource.RUSAGE_SELF)
    spent = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert spent < 0.5, f"{spent:.1f} CPU seconds in 5 s after the client went away: still at work"


def test_no_more_workers_run_at_once_than_processors(pdfs, monkeypatch):
    monkeypatch.setenv("GATECELL_PDF_MAX_SECONDS", "3")
    data = (pdfs / "slow.pdf").read_bytes()
    found: list[PdfText] = []
    asking = [threading.Thread(target=lambda: found.append(pdf_text(data))) for _ in range(WORKERS + 2)]
    for thread in asking:
        thread.start()
    running = []
    while any(thread.is_alive() for thread in asking):
        running.append(len(_workers()))
        time.sleep(0.05)
    assert 1 <= max(running) <= WORKERS
    assert len(found) == WORKERS + 2
    assert all(
        (f.stopped or "").startswith("text extraction stopped after 3 s (GATECELL_PDF_MAX_SECONDS)")
        for f in found
    )


# -- 33.4: what pypdf raises ---------------------------------------------------------------------


def test_an_unknown_filter_is_one_line_on_the_client(pdfs):
    with pytest.raises(InvalidRequest) as caught:
        load(pdfs / "unknown.pdf").as_text()
    assert str(caught.value) == f"attachment: unknown.pdf: {UNREADABLE}"


def test_an_unknown_filter_in_a_magic_is_one_line(pdfs, ipshell, cell_runner, local_gateway, monkeypatch):
    from probes import pointed_at

    monkeypatch.setenv("GATECELL_API_KEY", local_gateway.api_key.reveal())
    monkeypatch.chdir(pdfs)
    with pointed_at(ipshell, local_gateway.base_url):
        result, captured = cell_runner("%%chat --file unknown.pdf --as-text\nsummarise it")
    assert not result.success and "Traceback" not in captured.stderr
    (line,) = captured.stderr.strip().splitlines()
    assert line.endswith(f"unknown.pdf: {UNREADABLE}")


def test_an_unknown_filter_is_a_400_from_the_local_gateway_not_retried(pdfs, make_gateway):
    local = make_gateway()
    with Gateway(local.base_url, local.api_key, max_retries=3) as gw:
        with pytest.raises(BadRequestError) as caught:
            gw.chat("local-chat", _ask(pdfs / "unknown.pdf"))
    error = caught.value
    assert error.status == 400 and "\n" not in str(error)
    assert UNREADABLE in str(error)
