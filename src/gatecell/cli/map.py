"""``gatecell map``: the template over the rows of a JSONL or CSV file (or stdin), one JSON
object per row on stdout (or ``-o``), in input order, once the batch ends.

Rows are read lazily, so a file of any length streams through; each output line holds the
row's position, its fields, and the reply or the one-line error. Errors of a whole run
(a bad option, a missing file) are one line on stderr before any request; rows that fail
are in the output, and the exit status is 1 when any did. Ctrl-C writes the rows done so
far and exits with 130.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from gatecell.wire.errors import GatecellError

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    """The ``map`` subcommand, on the ``gatecell`` command's subparsers."""
    p = sub.add_parser(
        "map",
        help="one prompt per row of a JSONL or CSV file, many at once; one JSON line per row",
        description="Fill TEMPLATE's {field}s from each row (a JSONL object's keys, a CSV's columns; "
        "{item} for a JSONL line that is not an object) and send the rows, up to -j at a time, within "
        "--rpm/--tpm. Finished rows are logged and answered from the log when run again, so an "
        "interrupted run resumes where it stopped (GATECELL_HOME, GATECELL_LOG).",
        epilog="Output: one JSON object per input row, in order: index, input, text, error, "
        "prompt_tokens, completion_tokens, total_tokens, cached. Exit status 1 when a row failed.",
    )
    p.add_argument("template", help="the prompt, with {field} placeholders ({{ and }} for braces)")
    p.add_argument("-i", "--input", metavar="FILE", help="rows.jsonl or rows.csv (default: JSONL on stdin)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the JSON lines here (default: stdout)")
    p.add_argument("-m", "--model", help="default: GATECELL_MODEL, else local-chat")
    p.add_argument(
        "-j", "--jobs", type=int, metavar="N", help="requests at once (GATECELL_MAP_CONCURRENCY, else 8)"
    )
    p.add_argument("--rpm", type=float, help="at most this many requests per minute (GATECELL_RPM)")
    p.add_argument(
        "--tpm", type=float, help="at most this many tokens per minute, estimated then counted (GATECELL_TPM)"
    )
    p.add_argument("--api", help="chat (default), messages, generate-content or responses")
    p.add_argument("-s", "--system", help="system prompt")
    p.add_argument("-t", "--temperature", type=float, help="0 to 2")
    p.add_argument("--top-p", type=float, help="0 to 1")
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--no-cache", action="store_true", help="send every row, even those the log can answer")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(run=run)


def _rows(path: str | None) -> Iterator[Any]:
    """The rows of a .csv (dicts of its columns) or of JSONL (objects; other values as they are)."""
    if path is not None and Path(path).suffix.lower() == ".csv":
        with open(path, newline="", encoding="utf-8") as f:
            yield from csv.DictReader(f)
        return
    source: IO[str] = open(path, encoding="utf-8") if path else sys.stdin
    try:
        for number, line in enumerate(source, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except ValueError as exc:
                    raise GatecellError(f"{path or 'stdin'} line {number} is not JSON ({exc})") from None
    finally:
        if path:
            source.close()


def run(args: argparse.Namespace) -> int:
    from gatecell.batch.options import from_flags
    from gatecell.gateway import Gateway

    try:
        options = from_flags(args)
    except ValueError as exc:
        raise GatecellError(f"map: {exc}") from None
    if args.input and not Path(args.input).is_file():
        raise GatecellError(f"map: no such file: {args.input}")
    rows = _rows(args.input)
    inputs: list[Any] = []

    def remembered() -> Iterator[Any]:  # the output repeats each row's fields
        for row in rows:
            inputs.append(row)
            yield row

    with Gateway() as gw:
        options["cache"] = not args.no_cache
        batch = gw.map(args.template, remembered(), progress=not args.no_progress, **options)
    out: IO[str] = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        for index, (fields, row) in enumerate(zip(inputs, batch.results, strict=False)):
            if row is None:
                continue
            usage = row.usage
            line = {
                "index": index,
                "input": fields,
                "text": row.text,
                "error": row.error,
                "prompt_tokens": usage.prompt_tokens if usage else None,
                "completion_tokens": usage.completion_tokens if usage else None,
                "total_tokens": usage.total_tokens if usage else None,
                "cached": row.cached,
            }
            out.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
    finally:
        if args.output:
            out.close()
    if batch.interrupted:
        print(f"gatecell: interrupted: {batch.done + batch.failed} rows written", file=sys.stderr)
        return 130
    if batch.failed:
        print(f"gatecell: {batch.failed} of {len(batch)} rows failed (see their error)", file=sys.stderr)
        return 1
    return 0
