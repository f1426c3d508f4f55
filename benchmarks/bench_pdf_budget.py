"""Which way of stopping pypdf bounds its pathological case (issue 33.3).

The PDF: one page of 10 KB whose compressed content stream holds 900,000 text-showing
operators, under pypdf's own budget of 2,000,000 tokens a stream. Three ways to read it with
a budget of ``--budget`` seconds, each measured in this run, wall time until the caller has
its answer:

- no budget: what a check of the clock between pages amounts to on a one-page PDF;
- a check of the clock on every operator, in the thread (pypdf's ``visitor_operand_before``
  raising once the budget is spent): pypdf parses the whole content stream before it visits
  any operator, so the check comes late;
- `gatecell.wire.apis.pdf` (what gatecell does): a worker process killed at the budget.

    .venv/bin/python benchmarks/bench_pdf_budget.py [--budget 1]
"""

from __future__ import annotations

import argparse
import io
import time

from _common import print_table, save, summary_row
from pypdf import PdfReader, PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from gatecell.wire.apis.pdf import Budget, pdf_text

OPERATORS = 900_000


def slow_page() -> bytes:
    writer = PdfWriter()
    page = writer.add_blank_page(612, 792)
    font = {"/Type": "/Font", "/Subtype": "/Type1", "/BaseFont": "/Helvetica"}
    fonts = DictionaryObject(
        {NameObject("/F1"): DictionaryObject({NameObject(k): NameObject(v) for k, v in font.items()})}
    )
    page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): fonts})
    content = DecodedStreamObject()
    content.set_data(b"BT /F1 1 Tf\n" + b"(a) Tj\n" * OPERATORS + b"ET\n")
    page[NameObject("/Contents")] = writer._add_object(content.flate_encode(level=9))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


class _Late(Exception):
    pass


def no_budget(data: bytes, budget: float) -> float:
    start = time.perf_counter()
    PdfReader(io.BytesIO(data)).pages[0].extract_text()
    return time.perf_counter() - start


def per_operator(data: bytes, budget: float) -> float:
    start = time.perf_counter()
    deadline = start + budget

    def visit(*_: object) -> None:
        if time.perf_counter() > deadline:
            raise _Late

    try:
        PdfReader(io.BytesIO(data)).pages[0].extract_text(visitor_operand_before=visit)
    except _Late:
        pass
    return time.perf_counter() - start


def worker(data: bytes, budget: float) -> float:
    start = time.perf_counter()
    found = pdf_text(data, limits=Budget(200, 10**6, budget))
    assert found.stopped is not None, "the page was read within the budget: not a pathological case"
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--budget", type=float, default=1.0, help="seconds (default: 1)")
    args = parser.parse_args()
    data = slow_page()
    ways = {"no budget": no_budget, "a check on every operator": per_operator, "a worker process": worker}
    seconds = {name: way(data, args.budget) for name, way in ways.items()}
    peer = seconds["no budget"]
    print(f"\none page, {len(data):,} bytes, {OPERATORS:,} operators; budget {args.budget:g} s\n")
    print_table(
        ["way", "s until the answer", "vs no budget", "vs the budget"],
        [[name, s, f"{s / peer:.3f}x", f"{s / args.budget:.1f}x"] for name, s in seconds.items()],
    )
    ratio = seconds["a worker process"] / args.budget
    save(
        "bench_pdf_budget",
        "Wall time until the caller has the text (or the budget's line) of a one-page hostile PDF, "
        "each way once in the same run.",
        {"budget_s": args.budget, "operators": OPERATORS, "pdf_bytes": len(data)},
        {"seconds": seconds},
        [
            summary_row(
                "hostile PDF page under a budget: time / budget",
                f"{seconds['a worker process']:.1f} s",
                f"in-thread check {seconds['a check on every operator']:.1f} s, none {peer:.1f} s",
                ratio,
                "<= 2x the budget",
                ratio <= 2,
            )
        ],
    )


if __name__ == "__main__":
    main()
