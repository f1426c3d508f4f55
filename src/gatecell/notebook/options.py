"""Option parsing shared by every magic, so options are spelled alike everywhere.

Each option is declared once in `OPTIONS`; a magic names the ones it takes. Bad options
raise IPython's `UsageError`, which IPython prints as one line; ``--help`` prints usage
and raises `HelpShown`, which the magic swallows. Nothing here talks to a gateway: every
check runs before a request is made.

The line form of a magic (``%chat -t 0.2 what is 2+2?``) takes options first; the prompt
starts at the first word that is not an option (or after ``--``) and is kept verbatim, so
apostrophes and quotes in it need no escaping.
"""

from __future__ import annotations

import argparse
import io
import re
import shlex
from typing import Any

from IPython.core.error import UsageError

from gatecell.wire.transport.errors import echo

__all__ = [
    "HelpShown",
    "MagicParser",
    "OPTIONS",
    "COMMON",
    "parser_for",
    "split_line",
    "parse",
    "parse_words",
    "check_ranges",
]

API_CHOICES = ("chat", "messages", "generate-content", "responses")

# name -> (flags, argparse keywords)
OPTIONS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "model": (("-m", "--model"), {"metavar": "MODEL", "help": "model id (default: %%config Gatecell)"}),
    "temperature": (
        ("-t", "--temperature"),
        {"type": float, "metavar": "T", "help": "sampling temperature, 0 to 2"},
    ),
    "top_p": (("--top-p",), {"type": float, "metavar": "P", "help": "nucleus sampling, 0 to 1"}),
    "max_tokens": (("--max-tokens",), {"type": int, "metavar": "N", "help": "maximum tokens to generate"}),
    "system": (("-s", "--system"), {"metavar": "TEXT", "help": "system prompt of the conversation"}),
    "conversation": (
        ("-c", "--conversation"),
        {"metavar": "NAME", "default": "default", "help": "named conversation (default: the notebook's)"},
    ),
    "new": (("--new",), {"action": "store_true", "help": "start the conversation afresh"}),
    "no_stream": (
        ("--no-stream",),
        {"action": "store_true", "help": "wait for the whole reply instead of streaming"},
    ),
    "api": (
        ("--api",),
        {
            "choices": API_CHOICES,
            "help": "wire format (default chat; reasoning models go to responses by themselves)",
        },
    ),
    "effort": (("--effort",), {"metavar": "LEVEL", "help": "reasoning effort, e.g. low, medium, high"}),
    "size": (("--size",), {"metavar": "WxH", "help": "image size, e.g. 1024x1024"}),
    "voice": (("-v", "--voice"), {"metavar": "VOICE", "help": "voice name"}),
    "format": (("--format",), {"metavar": "FMT", "help": "audio format (wav, mp3, ...)"}),
    "autoplay": (("--autoplay",), {"action": "store_true", "help": "start playing at once"}),
    "style": (("--style",), {"metavar": "STYLE", "help": "music style"}),
    "no_wait": (
        ("--no-wait",),
        {
            "action": "store_true",
            "help": "submit, print the job id and return it; resume with %%gatecell job ID",
        },
    ),
    "cache": (
        ("--cache",),
        {
            "action": "store_true",
            "help": "answer from the log when this very request was answered before: nothing is sent "
            "(all magics: %%config Gatecell.cache = True)",
        },
    ),
    "save": (
        ("--save",),
        {
            "metavar": "PATH",
            "help": "also write the result to this new file (0600, never through a symbolic link; "
            "one this kernel saved is replaced)",
        },
    ),
    "force": (("--force",), {"action": "store_true", "help": "with --save: replace an existing file"}),
    "out": (("-o", "--out"), {"metavar": "VAR", "help": "store the result in this variable"}),
    "footer": (("--footer",), {"action": "store_true", "help": "show a provenance line under the output"}),
    "debug": (("--debug",), {"action": "store_true", "help": "show the full traceback of an error"}),
    "over": (
        ("--over",),
        {
            "metavar": "NAME",
            "help": "once per row of the DataFrame, Series or list NAME: the cell is a template whose "
            "{field}s come from each row; the Batch is the cell's value (and -o VAR's)",
        },
    ),
    "jobs": (
        ("-j", "--jobs"),
        {"type": int, "metavar": "N", "help": "with --over: requests at once (8, GATECELL_MAP_CONCURRENCY)"},
    ),
    "schema": (
        ("--schema",),
        {
            "metavar": "NAME",
            "help": "a typed answer: NAME is a pydantic model class, a TypedDict, a JSON Schema dict, "
            "an Enum or a list of labels in the notebook; -o VAR's .parsed holds the value (with "
            "--over: the Batch's .frame)",
        },
    ),
    "choices": (
        ("--choices",),
        {"metavar": "A,B,C", "help": "a typed answer: exactly one of these labels (comma separated)"},
    ),
    "tools": (
        ("--tools",),
        {
            "metavar": "F,G",
            "help": "offer these functions (or lists or Toolboxes of them) of the notebook to the model "
            "as tools; each call is asked about first and shown as a line",
        },
    ),
    "mcp": (
        ("--mcp",),
        {"metavar": "NAME", "action": "append", "help": "offer the tools of this MCP server (mcp.json)"},
    ),
    "yes": (
        ("--yes",),
        {
            "action": "store_true",
            "help": "run the tools' calls without asking (%%config Gatecell.approve_tools)",
        },
    ),
    "max_rounds": (
        ("--max-rounds",),
        {"type": int, "metavar": "N", "help": "with --tools: at most N requests in the chain (8)"},
    ),
    "rpm": (("--rpm",), {"type": float, "metavar": "R", "help": "with --over: at most R requests a minute"}),
    "tpm": (("--tpm",), {"type": float, "metavar": "T", "help": "with --over: at most T tokens a minute"}),
    "no_interpolate": (
        ("--no-interpolate",),
        {"action": "store_true", "help": "do not fill {name} from the notebook's variables"},
    ),
    "cells": (
        ("--cells",),
        {
            "type": int,
            "metavar": "N",
            "help": "put the last N cells (source, what they printed, error, Out value) ahead of the prompt",
        },
    ),
    "error": (
        ("--error",),
        {
            "action": "store_true",
            "help": "put the last error (its cell and trimmed traceback) ahead of the prompt; "
            "with no prompt, ask for an explanation and a fix",
        },
    ),
    "code": (
        ("--code",),
        {"action": "store_true", "help": "put the reply's code blocks in a new cell below (never run)"},
    ),
    "show_prompt": (
        ("--show-prompt",),
        {"action": "store_true", "help": "show the prompt as sent, with everything filled in"},
    ),
    "image": (
        ("--image",),
        {
            "action": "append",
            "metavar": "PATH|URL|VAR",
            "help": "attach a picture: a file, an http(s) URL (passed on, never fetched) or a variable "
            "holding one (a figure, an image, an array, bytes, a pathlib.Path; not text); repeatable",
        },
    ),
    "last_plot": (
        ("--last-plot",),
        {"action": "store_true", "help": "attach the last picture (image/png) an earlier cell showed"},
    ),
    "file": (
        ("--file",),
        {
            "action": "append",
            "metavar": "PATH",
            "help": "attach a document: text files as fenced text (within context_chars), a PDF as a "
            "file part; repeatable",
        },
    ),
    "as_text": (
        ("--as-text",),
        {"action": "store_true", "help": "send each --file as its text (a PDF's extracted with pypdf)"},
    ),
}

COMMON = ("out", "footer", "debug", "no_interpolate")

_KEY_OPTION = re.compile(r"^--?(api[-_]?key|key|token)(=|$)", re.I)
_KEY_SHAPE = re.compile(r"sk-[A-Za-z0-9_\-]{8,}")
_OPTION = re.compile(r"^--?[A-Za-z]")


class HelpShown(Exception):
    """``--help`` was printed; the magic returns without doing anything."""


class MagicParser(argparse.ArgumentParser):
    """An ArgumentParser that reports errors as one-line `UsageError`s instead of exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        if message:
            raise UsageError(f"{self.prog}: {message.strip()}")
        raise HelpShown


def parser_for(
    prog: str, description: str, names: tuple[str, ...], *, prompt: str | None = "PROMPT"
) -> MagicParser:
    """A parser for magic ``prog`` with the named options of `OPTIONS` (plus `COMMON`)."""
    p = MagicParser(prog=prog, description=description, allow_abbrev=False, add_help=True)
    for name in (*names, *COMMON):
        flags, kw = OPTIONS[name]
        p.add_argument(*flags, dest=name, **kw)
    if prompt:
        what = prompt.lower()
        p.epilog = f"The cell body is the {what}; as a line magic, the {what} follows the options."
    return p


def _refuse_keys(token: str) -> None:
    if _KEY_OPTION.match(token) or _KEY_SHAPE.search(token):
        raise UsageError(
            "API keys are not accepted on a magic line (it is saved with the notebook): "
            "use %gatecell key, or set GATECELL_API_KEY before starting Jupyter."
        )


def split_line(line: str, parser: argparse.ArgumentParser) -> tuple[list[str], str]:
    """Split a magic line into option words and the verbatim rest (the line-form prompt)."""
    source = io.StringIO(line)
    lex = shlex.shlex(source, posix=True)
    lex.whitespace_split = True
    lex.commenters = ""
    argv: list[str] = []
    expect_value = False
    while True:
        pos = source.tell()
        try:
            token = lex.get_token()
        except ValueError as exc:  # an unclosed quote
            if expect_value:
                raise UsageError(f"{parser.prog}: {exc}") from None
            return argv, line[pos:].strip()
        if token is None:
            return argv, ""
        if expect_value:
            _refuse_keys(token)
            argv.append(token)
            expect_value = False
            continue
        if token == "--":
            return argv, line[source.tell() :].strip()
        if not _OPTION.match(token):
            return argv, line[pos:].strip()
        _refuse_keys(token)
        argv.append(token)
        action = parser._option_string_actions.get(token)
        expect_value = action is not None and action.nargs != 0 and "=" not in token


def check_ranges(ns: argparse.Namespace) -> None:
    """SPEC 2.1/8 bounds, checked before anything is sent."""
    from gatecell.wire.apis.spec import RANGES, SIZE

    for field, (lo, hi) in RANGES.items():
        value = getattr(ns, field, None)
        if value is not None and not lo <= value <= hi:
            raise UsageError(f"{field.replace('_', '-')} must be between {lo:g} and {hi:g}, got {value:g}")
    if getattr(ns, "max_tokens", None) is not None and ns.max_tokens < 1:
        raise UsageError(f"max-tokens must be at least 1, got {ns.max_tokens}")
    if getattr(ns, "cells", None) is not None and ns.cells < 1:
        raise UsageError(f"cells must be at least 1, got {ns.cells}")
    size = getattr(ns, "size", None)
    if size is not None and not SIZE.fullmatch(size):
        raise UsageError(f"size must look like WIDTHxHEIGHT (e.g. 1024x1024), got {echo(size)}")


def parse(parser: MagicParser, line: str, cell: str | None) -> tuple[argparse.Namespace, str]:
    """Options and prompt of one magic call. The prompt is the cell body, or the rest of the line."""
    argv, rest = split_line(line, parser)
    ns = parser.parse_args(argv)
    check_ranges(ns)
    if cell is not None and rest:
        raise UsageError(
            f"{parser.prog}: unexpected text on the magic line: {rest!r} (the prompt goes in the cell)"
        )
    return ns, (cell if cell is not None else rest)


def parse_words(parser: MagicParser, line: str) -> argparse.Namespace:
    """Options of a line that is all options and words (``%gatecell job ID --kind video``)."""
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"{parser.prog}: {exc}") from None
    for token in argv:
        _refuse_keys(token)
    ns = parser.parse_args(argv)
    check_ranges(ns)
    return ns
