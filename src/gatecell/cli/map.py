"""``gatecell map``: the template over the rows of a JSONL or CSV file (or stdin), one JSON
object per row on stdout (or ``-o``), in input order, each written as soon as it and the rows
before it are done.

Nothing is sent before the whole input has been read once: a line that is not JSON, a byte
the encoding cannot read (``--encoding``; UTF-8, with or without a BOM, by default), a row
longer than `ROW_CAP` is one line on stderr naming the file and the line or the byte, and no
row has been paid for. The output file is opened before the first request too, so a missing
folder or a file that cannot be written is said then. Stdin is read to its end first, into a
temporary file (the user's alone), so that it can be read twice.

The second reading feeds the batch lazily, and each finished row is written and let go (the
engine's ``on_row``): only the rows in flight, and those finished ahead of a slower one
before them, are held, whatever the length of the input. Each output line holds the row's
position, its fields, and the reply or the one-line error. A field's value is text, whatever
file or URL it names, unless ``--image-column`` names its field: then it is the path or URL
of a picture to attach. Errors of a whole run (a bad
option, a missing file) are one line on stderr before any request; rows that fail are in the
output, and the exit status is 1 when any did. Ctrl-C writes the rows done so far and exits
with 130.
"""

from __future__ import annotations

import argparse
import codecs
import csv
import io
import json
import shutil
import sys
import tempfile
from collections.abc import Generator, Iterable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from gatecell.wire.transport.errors import GatecellError

from . import stdout_gone

if TYPE_CHECKING:
    from gatecell.batch import Row
    from gatecell.wire.typed.structured import Schema

__all__ = ["add_parser", "ROW_CAP"]

ROW_CAP = 16 * 2**20
"""Characters a row may have (a JSONL line, a CSV line or field): more than any model's
context takes (a million tokens is about 4 MB of text), and few enough that a CSV whose
unclosed quote swallows the rest of the file fails in one line, not after filling the memory."""
_TOO_LONG = f"{ROW_CAP:,} characters, more than a row may have"


def add_parser(sub: Any) -> None:
    """The ``map`` subcommand, on the ``gatecell`` command's subparsers."""
    p = sub.add_parser(
        "map",
        help="one prompt per row of a JSONL or CSV file, many at once; one JSON line per row",
        description="Fill TEMPLATE's {field}s from each row (a JSONL object's keys, a CSV's columns; "
        "{item} for a JSONL line that is not an object) and send the rows, up to -j at a time, within "
        "--rpm/--tpm. The whole input is read before the first request: a bad line or byte is one "
        "line, with nothing sent. Finished rows are logged and answered from the log when run again, "
        "so an interrupted run resumes where it stopped (GATECELL_HOME, GATECELL_LOG).",
        epilog="Output: one JSON object per input row, in order, written as soon as the rows before it "
        "are done: index, input, text, error, prompt_tokens, completion_tokens, total_tokens, cached "
        "(and parsed, with --schema or --choices: the validated value, null where the answer never "
        "validated and error says why). Exit status 1 when a row failed.",
    )
    p.add_argument("template", help="the prompt, with {field} placeholders ({{ and }} for braces)")
    p.add_argument("-i", "--input", metavar="FILE", help="rows.jsonl or rows.csv (default: JSONL on stdin)")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the JSON lines to this new file, 0600 (default: stdout); never through a symbolic link",
    )
    p.add_argument("--force", action="store_true", help="with -o: replace an existing file")
    p.add_argument(
        "--encoding",
        default="utf-8-sig",
        help="of the input (default: %(default)s, UTF-8 with or without a BOM; e.g. utf-16, latin-1, cp1252)",
    )
    p.add_argument("-m", "--model", help="default: GATECELL_MODEL, else local-chat")
    p.add_argument(
        "-j", "--jobs", type=int, metavar="N", help="requests at once (GATECELL_MAP_CONCURRENCY, else 8)"
    )
    p.add_argument("--rpm", type=float, help="at most this many requests per minute (GATECELL_RPM)")
    p.add_argument(
        "--tpm", type=float, help="at most this many tokens per minute, estimated then counted (GATECELL_TPM)"
    )
    p.add_argument(
        "--patience",
        type=float,
        metavar="SECONDS",
        help="seconds 429s may pause the batch in all; then rows fail (GATECELL_MAP_PATIENCE, else 600)",
    )
    p.add_argument("--api", help="chat (default), messages, generate-content or responses")
    p.add_argument("-s", "--system", help="system prompt")
    p.add_argument("-t", "--temperature", type=float, help="0 to 2")
    p.add_argument("--top-p", type=float, help="0 to 1")
    p.add_argument("--max-tokens", type=int)
    p.add_argument(
        "--schema", metavar="FILE", help="a typed answer per row: a JSON Schema file (see the output)"
    )
    p.add_argument("--choices", metavar="A,B,C", help="a typed answer per row: exactly one of these labels")
    p.add_argument(
        "--image-column",
        action="append",
        metavar="NAME",
        help="a field whose values are picture paths or URLs to attach (repeatable); every other "
        "value is sent as text, whatever it names",
    )
    p.add_argument("--no-cache", action="store_true", help="send every row, even those the log can answer")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(run=run)


# -- the input ------------------------------------------------------------------------------


@contextmanager
def _opened(path: str | None) -> Iterator[IO[bytes]]:
    """The input as a binary file: ``path``, or stdin copied to a temporary file."""
    if path is None:
        with tempfile.TemporaryFile() as spool:
            shutil.copyfileobj(sys.stdin.buffer, spool)
            yield spool
        return
    if not Path(path).is_file():
        raise GatecellError(f"map: no such file: {path}")
    try:
        source = open(path, "rb")
    except OSError as exc:
        raise GatecellError(f"map: cannot read {path}: {exc.strerror or exc}") from None
    with source:
        yield source


def _rows(source: IO[bytes], csv_input: bool, encoding: str, name: str) -> Generator[Any, None, None]:
    """The rows of the input, read from its start: dicts of a CSV's columns, or JSONL's values
    (objects; other values as they are). Every fault is a `GatecellError` of one line."""
    source.seek(0)
    text = io.TextIOWrapper(source, encoding=encoding, newline="")
    lines = _Lines(text, name)
    try:
        if csv_input:
            try:
                yield from csv.DictReader(lines)
            except csv.Error as exc:
                raise GatecellError(f"map: {name} line {lines.number}: {_csv_fault(exc)}") from None
            return
        for line in lines:
            if line.strip():
                try:
                    yield json.loads(line)
                except ValueError as exc:
                    raise GatecellError(f"map: {name} line {lines.number} is not JSON ({exc})") from None
    except UnicodeDecodeError:
        raise GatecellError(_undecodable(source, encoding, name)) from None
    finally:
        text.detach()  # the caller closes the file


class _Lines:
    """The lines of a text, none longer than `ROW_CAP` (never read whole if it is), counted."""

    def __init__(self, text: IO[str], name: str) -> None:
        self.text, self.name = text, name
        self.number = 0

    def __iter__(self) -> Iterator[str]:
        while line := self.text.readline(ROW_CAP + 1):
            self.number += 1
            if len(line) > ROW_CAP and not line.endswith(("\n", "\r")):
                raise GatecellError(f"map: {self.name} line {self.number} is longer than {_TOO_LONG}")
            yield line


def _csv_fault(exc: csv.Error) -> str:
    if "field limit" in str(exc):
        return f"a field is longer than {_TOO_LONG}"
    return str(exc)


def _undecodable(source: IO[bytes], encoding: str, name: str) -> str:
    """The line for an input ``encoding`` cannot read: the first byte it cannot (decoded
    again in steps, as the text reader only says that one failed), and how to say another."""
    source.seek(0)
    head = source.read(2)
    source.seek(0)
    decoder = codecs.getincrementaldecoder(encoding)()
    fed = 0
    where, reason = "it", "cannot be read"
    while True:
        chunk = source.read(2**16)
        fed += len(chunk)
        try:
            decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError as exc:
            # What the codec was reading is the tail of all that was fed (less a BOM it skipped).
            where, reason = f"byte {fed - len(exc.object) + exc.start}", exc.reason
            break
        if not chunk:
            break
    if head in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        hint = "it starts as UTF-16 does: --encoding utf-16"
    else:
        hint = "say the file's encoding with --encoding (e.g. --encoding latin-1, or cp1252 from Windows)"
    return f"map: {name}: {where} is not {encoding} ({reason}); {hint}"


def _encoding(name: str) -> str:
    try:
        io.TextIOWrapper(io.BytesIO(), encoding=name)  # refuses what is no text encoding (base64)
    except LookupError as exc:
        raise GatecellError(f"map: --encoding: {exc}") from None
    return name


# -- the output -----------------------------------------------------------------------------


def _output(path: str | None, force: bool) -> IO[str]:
    """Where the lines go, opened now: a folder or a file that is not there to write is said
    before the first request. A new file is 0600 and never reached through a symbolic link
    (`gatecell.wire.util.private.open_output`); an existing one is refused unless ``--force``,
    and then kept as it is until the first row is done (`_Writer` empties it then): options
    the batch refuses lose nothing."""
    if path is None:
        return sys.stdout
    from gatecell.wire.util.private import open_output

    try:
        return io.TextIOWrapper(open_output(path, force=force), encoding="utf-8")
    except FileExistsError:
        raise GatecellError(f"map: {path} exists; add --force to replace it") from None
    except OSError as exc:
        folder = Path(path).parent
        why = f"there is no folder {folder}" if not folder.is_dir() else exc.strerror or str(exc)
        raise GatecellError(f"map: cannot write {path}: {why}") from None


class _Writer:
    """Writes each row's line in input order, as soon as it and every row before it are done.
    Everything here runs in the map's thread: the engine pulls the rows and hands them back."""

    def __init__(self, out: IO[str], *, typed: bool = False) -> None:
        from gatecell.store.report import json_line  # strict JSON, controls escaped as JSON escapes

        self.line = json_line
        self.out = out
        self.typed = typed  # each line gets the row's parsed value
        self.emptied = out is sys.stdout  # a file: emptied when the first row is done
        self.fields: dict[int, Any] = {}  # the input of each row pulled and not yet written
        self.ahead: dict[int, Row] = {}  # rows finished before one that comes before them
        self.next = 0  # the position of the next line
        self.written = 0
        self.gone = False  # the reader went away (``| head``): no row is pulled after that

    def pulled(self, rows: Iterable[Any]) -> Iterator[Any]:
        for position, fields in enumerate(rows):
            if self.gone:  # the rows in flight finish and are logged; no more are sent
                return
            self.fields[position] = fields
            yield fields

    def finished(self, position: int, row: Row) -> None:
        self.ahead[position] = row
        self._drain(every=False)

    def rest(self) -> None:
        """At the end: the rows done after one that never finished (an interrupt), in order."""
        self._drain(every=True)

    def _drain(self, every: bool) -> None:
        """Write the rows next in order (``every``: all those held). Once the reader of a pipe
        has gone (``| head``), nothing more is written, quietly, as Unix tools do."""
        if self.gone:
            return
        try:
            self._empty()
            while self.next in self.ahead or (every and self.ahead):
                position = self.next if self.next in self.ahead else min(self.ahead)
                self._write(position, self.ahead.pop(position))
                self.next = position + 1
            self.out.flush()
        except BrokenPipeError:
            self.gone = True
            stdout_gone()

    def _empty(self) -> None:
        if not self.emptied:
            self.out.truncate(0)
            self.emptied = True

    def _write(self, index: int, row: Row) -> None:
        usage = row.usage
        line = {
            "index": index,
            "input": self.fields.pop(index),
            "text": row.text,
            "error": row.error,
            "prompt_tokens": usage.prompt_tokens if usage else None,
            "completion_tokens": usage.completion_tokens if usage else None,
            "total_tokens": usage.total_tokens if usage else None,
            "cached": row.cached,
        }
        if self.typed:
            line["parsed"] = row.value
        self.out.write(self.line(line) + "\n")
        self.written += 1


def _typed(args: argparse.Namespace) -> dict[str, Schema]:
    """The ``schema=`` of ``--schema FILE`` or ``--choices A,B,C``: a missing or unreadable
    file, or one that holds no usable JSON Schema, is one line before any request."""
    from gatecell.wire.transport.errors import InvalidRequest
    from gatecell.wire.typed.structured import Schema

    if args.schema is not None and args.choices is not None:
        raise GatecellError("map: --schema or --choices, not both")
    try:
        if args.choices is not None:
            return {
                "schema": Schema.of([label.strip() for label in args.choices.split(",") if label.strip()])
            }
        if args.schema is None:
            return {}
        try:
            spec = json.loads(Path(args.schema).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise GatecellError(f"map: no such file: {args.schema}") from None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise GatecellError(f"map: {args.schema} is not a JSON file ({exc})") from None
        if not isinstance(spec, dict):
            raise GatecellError(
                f"map: {args.schema} must hold a JSON Schema (an object), not {type(spec).__name__}"
            )
        return {"schema": Schema.of(spec)}
    except InvalidRequest as exc:
        raise GatecellError(
            f"map: {'--choices' if args.choices is not None else args.schema}: {exc}"
        ) from None


def run(args: argparse.Namespace) -> int:
    from gatecell.batch.options import from_flags
    from gatecell.batch.rows import Rows, Template
    from gatecell.gateway import Gateway

    try:
        options = from_flags(args)
    except ValueError as exc:
        raise GatecellError(f"map: {exc}") from None
    options["cache"] = not args.no_cache
    options["patience"] = args.patience
    options["images"] = args.image_column
    typed = _typed(args)
    options["schema"] = typed.get("schema")
    encoding = _encoding(args.encoding)
    csv.field_size_limit(ROW_CAP)
    name = args.input or "stdin"
    csv_input = args.input is not None and Path(args.input).suffix.lower() == ".csv"
    template = Template(args.template)
    with _opened(args.input) as source:
        first: list[Any] = []
        try:
            for row in _rows(source, csv_input, encoding, name):  # the whole input, before any request
                if not first:
                    first.append(row)
        except GatecellError as exc:
            raise GatecellError(f"{exc}; nothing was sent") from None
        Rows(first).check(template)  # a wrong field is the one line, before a gateway starts
        out = _output(args.output, args.force)
        writer = _Writer(out, typed=bool(typed))
        try:
            with Gateway() as gw, closing(_rows(source, csv_input, encoding, name)) as rows:
                batch = gw.map(
                    args.template,
                    writer.pulled(rows),
                    progress=not args.no_progress,
                    on_row=writer.finished,
                    **options,
                )
            writer.rest()
        finally:
            if args.output:
                out.close()
    if writer.gone:  # a reader that went away (| head) is no failure
        return 0
    if batch.interrupted:
        print(f"gatecell: interrupted: {writer.written} rows written", file=sys.stderr)
        return 130
    if batch.failed:
        print(f"gatecell: {batch.failed} of {len(batch)} rows failed (see their error)", file=sys.stderr)
        return 1
    return 0
