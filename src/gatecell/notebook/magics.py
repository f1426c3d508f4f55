"""The magics: ``%%chat`` ``%%reason`` ``%%image`` ``%%speak`` ``%%imagine`` ``%%video``
``%%music`` and the line magic ``%gatecell``.

Every magic parses its options before anything is sent (see `options`), fills ``{name}``
from the notebook (see `template`), calls the client (never HTTP directly), shows the
result (see `display`) and returns it as the cell's value (see `values`). Errors of the
gateway are raised as they are and printed as one line by the handler that
`gatecell.notebook` installs; ``--debug`` asks for the traceback instead.

What a magic sends is redacted first (`gatecell.wire.util.secret.redact`), all of it: the cell
with its ``{name}`` and ``{In[N]}`` filled in, what ``--cells``, ``--error`` and
``%gatecell explain`` gather, and the text and names of the files ``--file`` attaches
(`gatecell.wire.apis.conversation.redacted`). The redacted prompt is the one sent (the client
redacts it again on its way out, to the same text), the one ``--show-prompt`` shows, and the
one the conversation and the provenance keep: the display never differs from what left the
notebook. A string is never read as a file: only ``--image``/``--file`` typed in the cell,
and pictures or ``pathlib`` paths in ``{name}``, attach one.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand

from .options import OPTIONS, HelpShown, MagicParser, parse, parse_words, parser_for

if TYPE_CHECKING:
    from .plots import LastPlot
    from .session import NotebookSession

__all__ = ["GatecellMagics", "Interrupted", "PARSERS"]


class Interrupted(KeyboardInterrupt):
    """Ctrl-C / a kernel interrupt stopped a magic; what had arrived was kept."""


# magic -> (description, options)
SPECS: dict[str, tuple[str, tuple[str, ...]]] = {
    "chat": (
        "Chat with a model; the reply streams in as Markdown and joins the conversation.",
        (
            *("model", "temperature", "top_p", "max_tokens", "system", "conversation", "new", "no_stream"),
            *("api", "cells", "error", "code", "show_prompt"),
            *("image", "last_plot", "file", "as_text"),
            "cache",
            *("over", "jobs", "rpm", "tpm", "schema", "choices"),
            *("tools", "mcp", "yes", "max_rounds"),
        ),
    ),
    "reason": (
        "Ask a reasoning model through /v1/responses (no conversation memory).",
        (
            *("model", "effort", "max_tokens", "no_stream", "cells", "error", "code", "show_prompt"),
            *("image", "last_plot", "file", "as_text", "cache"),
        ),
    ),
    "image": (
        "Generate an image (/v1/images/generations); it is embedded in the output.",
        ("model", "size", "save", "force"),
    ),
    "speak": (
        "Text to speech (/v1/audio/speech); the audio is embedded in the output.",
        ("model", "voice", "format", "autoplay", "save", "force"),
    ),
    "imagine": (
        "Job-style image generation: submit, show progress, show the images.",
        ("no_wait", "save", "force"),
    ),
    "video": (
        "Generate a video (a job): submit, show progress, show the video.",
        ("model", "no_wait", "autoplay", "save", "force"),
    ),
    "music": (
        "Job-style music generation: submit, show progress, show the tracks.",
        ("style", "no_wait", "autoplay", "save", "force"),
    ),
}

PARSERS: dict[str, MagicParser] = {}

_TEXT_MAGICS = ("chat", "reason")  # the magics whose prompt may hold pictures and files

HELP = """gatecell magics (each takes --help):
  %%chat     chat; streams live; conversation memory (-c NAME, --new);
             --api chat|messages|generate-content|responses
  %%reason   a reasoning model through /v1/responses (--effort)
  %%image    image generation            %%speak   text to speech (-v VOICE, --autoplay, --save PATH)
  %%imagine  job-style image generation  %%video   video generation (a job)
  %%music    job-style music (--style)
  Line forms work too: %chat what is 2+2?
  Context: {df} {Out[3]} {_} fill in values, summarised; --cells N adds the last N cells,
  --error the last error; --code puts the reply's code in a new cell; --show-prompt shows what is sent.
  Pictures and files: {fig} puts a figure, an image or an array in the prompt; --image PATH|URL|VAR,
  --last-plot (the last picture shown), --file PATH (text, or a PDF; --as-text sends its text).
  Tools: %%chat --tools f,g offers your functions to the model (--mcp NAME an MCP server's); each
  call is asked about first (not with --yes, safe=True, %config Gatecell.approve_tools = False).
%gatecell models | config | key | history [NAME] [--all] | reset [NAME] [--all] | explain [--code] | help
%gatecell log [-n N] [-q TEXT] [--similar TEXT] | usage [--since DATE] | jobs | job ID | export NAME [PATH]
  | restore NAME
%gatecell search "TEXT" --in DF.COLUMN [-k 5] [--rerank MODEL]: the rows nearest TEXT by meaning
%gatecell mcp list | add NAME -- CMD ARGS | prompt NAME PROMPT [K=V...] | read NAME URI
%gatecell resume CHAIN --tools f,g [--yes]   a tool chain cut short goes on
  every exchange is logged in GATECELL_HOME/gatecell.db (off: %config Gatecell.log = False);
  --cache (or %config Gatecell.cache = True) answers a request made before from the log
Defaults: %config Gatecell (or GATECELL_MODEL, GATECELL_IMAGE_MODEL, ... in the environment).
The API key is never typed on a magic line: use %gatecell key or GATECELL_API_KEY."""


def parser(name: str) -> MagicParser:
    """The (cached) option parser of magic ``name``."""
    if name not in PARSERS:
        if name == "gatecell":
            PARSERS[name] = _gatecell_parser()
        else:
            description, names = SPECS[name]
            PARSERS[name] = parser_for(f"%%{name}", description, names)
    return PARSERS[name]


def _gatecell_parser() -> MagicParser:
    p = MagicParser(prog="%gatecell", description="Everything around the magics.", allow_abbrev=False)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("models", help="table of the models the gateway serves")
    sub.add_parser("config", help="current defaults, gateway address, whether a key is set")
    sub.add_parser("key", help="ask for the API key (getpass); kept in this process only")
    for name, what in (("history", "show"), ("reset", "forget")):
        s = sub.add_parser(name, help=f"{what} a conversation (default: the notebook's)")
        s.add_argument("name", nargs="?", default="default", help="conversation name")
        s.add_argument("--all", action="store_true", help=f"{what} every conversation")
    job = sub.add_parser("job", help="pick up a job (--no-wait, or from before a restart) by its id")
    job.add_argument("id", help="the job id")
    job.add_argument(
        "--kind", choices=("imagine", "video", "music"), help="needed only for a job the log does not know"
    )
    for opt in ("save", "force", "autoplay", "out", "footer", "debug"):
        flags, kw = OPTIONS[opt]
        job.add_argument(*flags, dest=opt, **kw)
    explain = sub.add_parser(
        "explain", help="explain the last error and suggest a fix (joins the conversation: %%chat --error)"
    )
    options = ("model", "conversation", "cells", "code", "show_prompt", "no_stream", "out", "footer", "debug")
    for opt in options:
        flags, kw = OPTIONS[opt]
        explain.add_argument(*flags, dest=opt, **kw)
    sub.add_parser("help", help="overview of the magics")
    search = sub.add_parser("search", help="the rows of a column nearest a text by meaning, best first")
    search.add_argument("query", help="what to look for (quote it)")
    search.add_argument(
        "--in", dest="source", metavar="NAME.COLUMN", required=True, help="a DataFrame's column, or a Series"
    )
    search.add_argument("-k", type=int, default=5, help="how many rows (default 5)")
    search.add_argument("--threshold", type=float, help="only rows at least this similar (cosine, -1 to 1)")
    search.add_argument("-m", "--model", help="the embedding model (GATECELL_EMBED_MODEL, else local-embed)")
    search.add_argument(
        "--rerank", metavar="MODEL", help="order the nearest through the gateway's /v1/rerank"
    )
    for opt in ("out", "debug"):
        flags, kw = OPTIONS[opt]
        search.add_argument(*flags, dest=opt, **kw)
    mcp = sub.add_parser(
        "mcp",
        help="MCP servers: list | add NAME -- CMD ARGS | prompt NAME PROMPT [KEY=VALUE...] | read NAME URI",
    )
    resume = sub.add_parser("resume", help="go on with a tool chain cut short (its id: r.tool_calls.chain)")
    resume.add_argument("chain", help="the chain's id (the log's tool_calls.chain)")
    for opt in ("tools", "yes", "out", "debug"):
        flags, kw = OPTIONS[opt]
        resume.add_argument(*flags, dest=opt, **kw)
    mcp.add_argument("action", choices=("list", "add", "prompt", "read"))
    mcp.add_argument("words", nargs=argparse.REMAINDER, help="what the action takes")
    _store_commands(sub)
    return p


def _store_commands(sub: Any) -> None:
    """The subcommands that read the log (GATECELL_HOME/gatecell.db)."""
    log = sub.add_parser("log", help="the last exchanges logged, as a table")
    log.add_argument("-n", "--count", type=int, default=10, help="how many, newest (default 10; 0: all)")
    log.add_argument(
        "-q", "--query", metavar="TEXT", help="only exchanges whose prompt or reply has all these words"
    )
    log.add_argument("-m", "--model", help="only this model")
    log.add_argument("-c", "--conversation", metavar="NAME", help="only this conversation")
    log.add_argument(
        "--similar",
        metavar="TEXT",
        help="the exchanges nearest TEXT by meaning (prompts and replies embedded once)",
    )
    usage = sub.add_parser("usage", help="requests, tokens and cost (with its source) per model per day")
    usage.add_argument("--since", metavar="DATE", help="from this UTC date (YYYY-MM-DD) or ISO time on")
    jobs = sub.add_parser("jobs", help="recent imagine, video and music jobs, from every kernel")
    jobs.add_argument("-n", "--count", type=int, default=20, help="how many (default 20; 0: all)")
    export = sub.add_parser("export", help="write a logged conversation to a file (Markdown, or .jsonl)")
    export.add_argument("name", help="conversation name (-c NAME of %%chat; the notebook's is 'default')")
    export.add_argument("path", nargs="?", help="the file (default NAME.md; .jsonl or .ndjson: JSON Lines)")
    export.add_argument("--force", action="store_true", help="replace the file if it exists")
    restore = sub.add_parser("restore", help="bring a logged conversation back (after a restart, say)")
    restore.add_argument("name", help="conversation name; %%chat -c NAME goes on from it")


@magics_class
class GatecellMagics(Magics):
    """gatecell's magics. The state (gateway, conversations, jobs) lives in ``session``."""

    def __init__(self, shell: Any, session: NotebookSession) -> None:
        super().__init__(shell)
        self.session = session
        self.plots: LastPlot | None = None  # set by %load_ext: the last picture shown, for --last-plot

    @property
    def namespace(self) -> dict[str, Any]:
        """The notebook's variables."""
        assert self.shell is not None
        return self.shell.user_ns

    @property
    def defaults(self) -> Any:
        """The `Gatecell` configurable: the defaults of every option."""
        return self.session.config

    # -- the cell magics (each also works as a line magic) --------------------------------

    @line_cell_magic
    @no_var_expand
    def chat(self, line: str, cell: str | None = None) -> Any:
        """Chat with a model; the reply streams in as Markdown. See %chat --help."""
        return self._run("chat", line, cell, self._chat)

    @line_cell_magic
    @no_var_expand
    def reason(self, line: str, cell: str | None = None) -> Any:
        """Ask a reasoning model through /v1/responses. See %reason --help."""
        return self._run("reason", line, cell, self._reason)

    @line_cell_magic
    @no_var_expand
    def image(self, line: str, cell: str | None = None) -> Any:
        """Generate an image, embedded in the output. See %image --help."""
        return self._run("image", line, cell, self._image)

    @line_cell_magic
    @no_var_expand
    def speak(self, line: str, cell: str | None = None) -> Any:
        """Text to speech, an audio player in the output. See %speak --help."""
        return self._run("speak", line, cell, self._speak)

    @line_cell_magic
    @no_var_expand
    def imagine(self, line: str, cell: str | None = None) -> Any:
        """Job-style image generation with progress. See %imagine --help."""
        return self._run("imagine", line, cell, self._imagine)

    @line_cell_magic
    @no_var_expand
    def video(self, line: str, cell: str | None = None) -> Any:
        """Generate a video (a job) with progress. See %video --help."""
        return self._run("video", line, cell, self._video)

    @line_cell_magic
    @no_var_expand
    def music(self, line: str, cell: str | None = None) -> Any:
        """Job-style music with progress. See %music --help."""
        return self._run("music", line, cell, self._music)

    def _run(
        self, name: str, line: str, cell: str | None, handler: Callable[[argparse.Namespace, Any], Any]
    ) -> Any:
        try:
            ns, text = parse(parser(name), line, cell)
        except HelpShown:
            return None
        if ns.out is not None and not ns.out.isidentifier():
            raise UsageError(f"%{name}: -o/--out needs a variable name, got {ns.out!r}")
        attached = self._attached(name, ns)  # --image, --last-plot, --file: read before anything is sent
        if not text.strip() and not getattr(ns, "error", False) and not attached:
            raise UsageError(f"%{name}: nothing to send: write the prompt in the cell, or after the options")
        prompt: Any = text
        if not getattr(ns, "over", None):  # --over fills {field} per row
            if not ns.no_interpolate:
                from .display import show_note
                from .template import fill

                rows, chars = self.defaults.context_rows, self.defaults.context_chars
                pictures = name in _TEXT_MAGICS
                filled = fill(text, self.namespace, rows=rows, chars=chars, pictures=pictures)
                prompt, ns.filled, unknown = filled
                if unknown:  # braces of the prompt's own (LaTeX, JSON), or a name not defined yet
                    show_note(f"sent as written, no such variable in the notebook: {', '.join(unknown)}")
        ns.footer = ns.footer or self.defaults.footer
        from .log import calls_in
        from .template import joined

        prompt = joined([*_stripped(prompt), *attached])  # the text, then what the options attach
        if not getattr(ns, "over", None):  # a map's rows are redacted as each leaves
            prompt = self._redact(prompt)
        cache = True if getattr(ns, "cache", False) else None
        with calls_in(self.shell, conversation=getattr(ns, "conversation", None), cache=cache):
            return self._guard(ns, lambda: handler(ns, prompt))

    def _attached(self, name: str, ns: argparse.Namespace) -> list[Any]:
        """The pictures and documents ``--image``, ``--last-plot`` and ``--file`` name, read
        now: a path that does not exist, a file over the cap, a value that is no picture is
        one line, and nothing is sent."""
        if name not in _TEXT_MAGICS:
            return []
        from gatecell.wire.apis.attachments import attachment_of, load
        from gatecell.wire.transport.errors import InvalidRequest

        found: list[Any] = []
        chars = self.defaults.context_chars
        try:
            for source in ns.image or []:
                named = source.isidentifier() and source in self.namespace
                value = self.namespace[source] if named else source
                if named and isinstance(value, str):  # text the user did not type
                    raise UsageError(
                        f"%{name} --image {source}: the variable holds text, not a picture: type the "
                        "path or URL after --image, or hold a pathlib.Path"
                    )
                picture = load(value, chars=chars) if isinstance(value, str) else attachment_of(value)
                if picture is None or picture.kind != "image":
                    what = type(value).__name__ if picture is None else picture.description
                    raise UsageError(
                        f"%{name} --image {source}: not a picture ({what}); --file attaches documents"
                    )
                found.append(picture)
            if ns.last_plot:
                png = self.plots.last() if self.plots is not None else None
                if png is None:
                    raise UsageError(
                        f"%{name} --last-plot: no cell has shown a picture yet (nothing was sent)"
                    )
                found.append(attachment_of(png))
            for path in ns.file or []:
                document = load(path, chars=chars)
                found.append(
                    document.as_text(chars) if ns.as_text and document.kind == "document" else document
                )
        except InvalidRequest as exc:
            raise UsageError(f"%{name}: {exc.message}") from None
        return found

    def _redact(self, prompt: Any) -> Any:
        """``prompt`` as it will leave the notebook (`conversation.redacted`, with this
        session's key): its text, and the text and names of the files attached; a picture's
        bytes go as they are."""
        from gatecell.wire.apis.conversation import redacted

        return redacted(prompt, self.session.gateway.api_key)

    def _guard(self, ns: argparse.Namespace, call: Callable[[], Any]) -> Any:
        """Run a magic's work; mark errors for ``--debug`` and store the value for ``-o``."""
        from gatecell.wire.transport.errors import GatecellError

        try:
            value = call()
        except (GatecellError, Interrupted) as exc:
            setattr(exc, "gatecell_debug", ns.debug)  # noqa: B010 - read back by the error handler
            raise
        except KeyboardInterrupt:  # before anything arrived: nothing to keep
            raise Interrupted("interrupted before the gateway answered") from None
        self._store(ns, value)
        return value

    @contextmanager
    def _serving(self, ns: argparse.Namespace, model: str, trait: str) -> Iterator[None]:
        """A 400/404 on a model the gateway does not list also says which models it does
        list (asked once per connection) and how to choose one."""
        from gatecell.wire.transport.errors import APIError

        try:
            yield
        except APIError as exc:
            from gatecell.connect import explain_unserved

            from .config import ENV

            how = (
                "choose one with -m MODEL"
                if getattr(ns, "model", None)
                else f"set the default with %config Gatecell.{trait} = '...' or {ENV[trait][0]}"
            )
            explain_unserved(exc, model, self.session.served, how)
            raise

    def _store(self, ns: argparse.Namespace, value: Any) -> None:
        if getattr(ns, "out", None):
            self.namespace[ns.out] = value

    # -- conversation --------------------------------------------------------------------

    def _chat(self, ns: argparse.Namespace, prompt: Any) -> Any:
        from .typed import typed_options

        typed = typed_options("chat", ns, self.namespace)  # a bad NAME: one line, nothing sent
        if ns.over:
            return self._over(ns, prompt, typed)
        prompt = self._context(ns, prompt)
        if not prompt:
            return None
        memory = self.session.memory
        if ns.new:
            memory.reset(ns.conversation)
        conv = memory.get(ns.conversation)
        if ns.system:
            conv.set_system(ns.system)
        elif self.defaults.system and not conv.turns:
            conv.set_system(self.defaults.system)
        model = ns.model or self.defaults.model
        tools = self._tools(ns)
        with self._serving(ns, model, "model"):
            return self._converse(
                ns,
                prompt,
                conv.messages(prompt),
                model,
                ns.api or self.defaults.api,
                conv=conv,
                typed=typed,
                tools=tools,
            )

    def _tools(self, ns: argparse.Namespace) -> dict[str, Any] | None:
        """``--tools``, ``--mcp``, ``--yes``, ``--max-rounds``: the chain's options, checked
        before anything is sent (see `tooling`)."""
        if not ns.tools and not ns.mcp:
            return None
        from .tooling import asker, tools_named

        given = tools_named(ns.tools or "", self.namespace)
        if ns.mcp:
            from gatecell.tools.mcp import servers_tools

            try:
                given += servers_tools(ns.mcp)
            except (ValueError, RuntimeError) as exc:
                raise UsageError(f"%chat --mcp: {exc}") from None
        options: dict[str, Any] = {"tools": given, "approve": asker(ns.yes, self.defaults.approve_tools)}
        if ns.max_rounds is not None:
            options["max_rounds"] = ns.max_rounds
        return options

    def _over(self, ns: argparse.Namespace, template: str, typed: dict[str, Any]) -> Any:
        """``%%chat --over NAME``: the cell once per row of NAME (`Gateway.map`), with a progress
        bar in the cell; a kernel interrupt stops it and the rows done so far are the value."""
        if ns.over not in self.namespace:
            raise UsageError(f"%chat --over: no variable {ns.over!r} in the notebook")
        from gatecell.batch.options import from_flags

        try:
            options = from_flags(ns)
        except ValueError as exc:
            raise UsageError(f"%chat: {exc}") from None
        options["model"] = ns.model or self.defaults.model
        options["api"] = ns.api or self.defaults.api
        options["system"] = ns.system or self.defaults.system or None
        return self.session.gateway.map(template, self.namespace[ns.over], **options, **typed)

    def _reason(self, ns: argparse.Namespace, prompt: Any) -> Any:
        prompt = self._context(ns, prompt)
        if not prompt:
            return None
        model = ns.model or self.defaults.reasoning_model
        with self._serving(ns, model, "reasoning_model"):
            return self._converse(
                ns, prompt, [{"role": "user", "content": prompt}], model, "responses", effort=ns.effort
            )

    def _context(self, ns: argparse.Namespace, prompt: Any) -> Any:
        """The prompt with what ``--cells`` and ``--error`` ask for ahead of it, redacted.
        Empty when ``--error`` finds no error: that is said in one line, and nothing is sent."""
        cells, error = getattr(ns, "cells", None), getattr(ns, "error", False)
        if not cells and not error:
            return prompt
        from .context import EXPLAIN, last_error, recent_cells

        rows, chars = self.defaults.context_rows, self.defaults.context_chars
        parts = [recent_cells(self.shell, cells, rows=rows, chars=chars)] if cells else []
        if error:
            found = last_error(self.shell, chars=chars)
            if found is None:
                print("no error to explain yet: run the cell that fails first (nothing was sent)")
                return ""
            parts.append(found)
        context = self._redact("\n\n".join(p for p in parts if p))
        question = prompt or EXPLAIN
        if not context:
            return question
        if isinstance(question, str):
            return f"{context}\n\n---\n\n{question}"
        from .template import joined

        return joined([f"{context}\n\n---\n\n", *question])

    def _converse(
        self,
        ns: argparse.Namespace,
        prompt: Any,
        messages: list[dict[str, Any]],
        model: str,
        api: str,
        *,
        conv: Any = None,
        effort: str | None = None,
        typed: dict[str, Any] | None = None,
        tools: dict[str, Any] | None = None,
    ) -> Any:
        from gatecell.wire.transport.errors import StreamError

        from .display import LiveMarkdown, limit_note, provenance, rich_output
        from .values import Text

        sent = prompt  # what left the notebook, as shown and kept: redacted already (`_run`, `_context`)
        if getattr(ns, "show_prompt", False):
            from .display import show_prompt

            show_prompt(sent, filled=getattr(ns, "filled", ()))
        # a typed answer is read whole; a tool chain too (its answer shows whole, and the log keeps
        # whole answers, which `%gatecell resume` goes on from)
        stream = not ns.no_stream and not typed and tools is None
        sampling: dict[str, Any] = {k: getattr(ns, k, None) for k in ("temperature", "top_p", "max_tokens")}
        live = LiveMarkdown(rich=rich_output(self.defaults.output), interval=self.defaults.update_interval)
        if tools is not None:  # the chain's calls show as they end, its answer whole after them
            from .tooling import ToolLines

            tools = {**tools, "on_event": ToolLines(live.rich)}
        result: Any = self.session.gateway.converse(
            api, model, messages, stream=stream, effort=effort, **sampling, **(typed or {}), **(tools or {})
        )
        error: BaseException | None = None
        if stream and tools is None:
            try:
                for fragment in result:
                    live.append(fragment)
            except KeyboardInterrupt:
                result.close()
                error = Interrupted(f"interrupted: kept the {len(result.text)} characters that had arrived")
            except StreamError as exc:
                error = exc
            text, reasoning, usage = result.text, result.reasoning, result.usage
        else:
            text, reasoning, usage = (
                _reply_text(result),
                getattr(result, "reasoning", None),
                getattr(result, "usage", None),
            )
        meta = result.meta  # every answer has one (`gatecell.wire.transport.results.Answer`)
        prov = provenance(
            meta,
            model=getattr(result, "model", None) or model,
            usage=usage,
            placeholders=len(getattr(ns, "filled", ())) or None,
            **_prompt_prov(sent),
        )
        note = limit_note(result)
        if error is not None:
            what = "interrupted" if isinstance(error, Interrupted) else "the stream ended early"
            note = f"{what}: partial reply" + (
                f", kept in conversation '{conv.name}'" if conv is not None and text else ""
            )
        if tools is not None and result.tool_calls.stopped:
            note = result.tool_calls.stopped
        aside = ("Reasoning summary", reasoning) if reasoning else None
        shown = text
        if typed:
            from .typed import shown_typed

            shown, problem = shown_typed(result, text, typed["schema"])
            note = problem or note
        live.finish(shown, prov=prov, footer=ns.footer, note=note, aside=aside)
        if conv is not None and (text or error is None):
            conv.add(prompt, text, partial=error is not None, prov=prov)
        parsed = {"parsed": result.parsed, "parse_error": result.parse_error} if typed else {}
        value = Text(text, prov, partial=error is not None, reasoning=reasoning, **parsed).quiet()
        if tools is not None:
            value.tool_calls = result.tool_calls
        if error is not None:
            self._store(ns, value)
            raise error
        if getattr(ns, "code", False):
            self._next_cell(text)
        return value

    def _next_cell(self, reply: str) -> None:
        """The reply's code blocks, in order, into a new cell below (never run, never replacing
        the cell that asked); with several, each is headed by a comment naming its language."""
        from .markdown import code_blocks

        blocks = code_blocks(reply)
        if not blocks:
            print("the reply has no code block: no cell added")
            return
        if len(blocks) == 1:
            source = blocks[0][1]
        else:
            source = "\n\n".join(
                f"# [{i}/{len(blocks)}] {lang or 'no language given'}\n{code}"
                for i, (lang, code) in enumerate(blocks, 1)
            )
        assert self.shell is not None
        self.shell.set_next_input(source, replace=False)

    # -- media ---------------------------------------------------------------------------

    def _image(self, ns: argparse.Namespace, prompt: str) -> Any:
        from .display import provenance

        model = ns.model or self.defaults.image_model
        with self._serving(ns, model, "image_model"):
            result = self.session.gateway.image(
                model, prompt, size=ns.size or self.defaults.image_size or None
            )
        prov = provenance(result.meta, model=model)
        if not result.images:
            return self._unrecognised("no image in the reply", result.raw, prov)
        return self._show_all(ns, result.images, prov, "image")

    def _speak(self, ns: argparse.Namespace, prompt: str) -> Any:
        from .display import provenance

        model = ns.model or self.defaults.tts_model
        voice = ns.voice or self.defaults.voice
        extra = {"response_format": ns.format} if ns.format else {}
        with self._serving(ns, model, "tts_model"):
            audio = self.session.gateway.speech(model, voice, prompt, **extra)
        return self._show_all(ns, [audio], provenance(audio.meta, model=model, voice=voice), "speech")

    def _show_all(self, ns: argparse.Namespace, media: list[Any], prov: dict[str, Any], name: str) -> Any:
        """Show every media item, save them for ``--save``, return one value or a list."""
        from .display import media_type, show_media
        from .values import MediaBytes

        values = []
        for i, item in enumerate(media):
            data = item.data
            mime = media_type(data, item.mime)
            show_media(
                data,
                mime,
                prov=prov,
                footer=ns.footer,
                autoplay=getattr(ns, "autoplay", False) and i == 0,
                embed_limit=self.defaults.video_embed_limit,
                media_dir=self.defaults.media_dir,
                name=f"{name}-{i}",
            )
            if ns.save:
                _save(ns.save, i, len(media), data, ns.force)
            values.append(MediaBytes(data, mime, prov).quiet())
        return values[0] if len(values) == 1 else values

    def _unrecognised(self, what: str, raw: Any, prov: dict[str, Any]) -> None:
        from gatecell.wire.util._text import fence

        from .display import show_markdown
        from .markdown import escape

        body = (
            json.dumps(raw, indent=2, default=str)[:4000]
            if not isinstance(raw, bytes)
            else f"{len(raw)} bytes"
        )
        show_markdown(f"*{escape(what)}; the gateway sent:*\n\n{fence(body, 'json')}", prov=prov)

    # -- jobs ----------------------------------------------------------------------------

    def _imagine(self, ns: argparse.Namespace, prompt: str) -> Any:
        return self._submit(ns, lambda gw: gw.imagine(prompt))

    def _video(self, ns: argparse.Namespace, prompt: str) -> Any:
        model = ns.model or self.defaults.video_model

        def submit(gw: Any) -> Any:
            with self._serving(ns, model, "video_model"):
                return gw.video(model, prompt)

        return self._submit(ns, submit)

    def _music(self, ns: argparse.Namespace, prompt: str) -> Any:
        return self._submit(
            ns, lambda gw: gw.music(prompt, style=ns.style or self.defaults.music_style or None)
        )

    def _submit(self, ns: argparse.Namespace, submit: Callable[[Any], Any]) -> Any:
        job = submit(self.session.gateway)
        self.session.jobs[job.id] = job.kind
        if ns.no_wait:
            print(f"{job.kind} job {job.id} submitted; pick it up with: %gatecell job {job.id}")
            return job.id
        return self._follow(ns, job)

    def _follow(self, ns: argparse.Namespace, job: Any) -> Any:
        """Poll ``job`` with a progress bar until it ends; show and return what it made."""
        from gatecell.wire.transport.errors import JobError

        from .display import JobProgress, provenance, rich_output
        from .values import finished_job

        bar = JobProgress(f"{job.kind} {job.id}", rich=rich_output(self.defaults.output))
        try:
            job = self.session.gateway.wait(
                job, on_progress=lambda j: bar.update(j.progress, j.status), timeout=self.defaults.job_timeout
            )
        except KeyboardInterrupt:
            bar.close("stopped waiting")
            raise Interrupted(f"stopped waiting; the job goes on: %gatecell job {job.id}") from None
        except JobError as exc:
            bar.close("failed")
            raise exc
        bar.close(job.status)
        if job.status != "succeeded":
            raise JobError(f"{job.kind} job {job.id} {job.status}: {job.error or 'no reason given'}", job=job)
        prov = provenance(job.meta, job_id=job.id, kind=job.kind)
        if job.media:
            self._show_all(ns, job.media, prov, f"{job.kind}-{job.id}")
        else:
            self._unrecognised(
                f"{job.kind} job {job.id} succeeded but no media was recognised", job.raw, prov
            )
        return finished_job(job)

    # -- %gatecell ------------------------------------------------------------------------

    @line_magic
    def gatecell(self, line: str) -> Any:
        """%gatecell models | config | key | history | reset | job ID | help"""
        try:
            ns = parse_words(parser("gatecell"), line)
        except HelpShown:
            return None
        command = ns.command or "help"
        if command == "job":
            from .log import calls_in

            with calls_in(self.shell):
                return self._guard(ns, lambda: self._resume(ns))
        return getattr(self, f"_cmd_{command}")(ns)

    def _cmd_resume(self, ns: argparse.Namespace) -> Any:
        """``%gatecell resume CHAIN --tools f,g``: the chain goes on (`Gateway.resume`), each
        call a line, the answer shown; the calls that finished before are not run again."""
        if not ns.tools:
            raise UsageError("%gatecell resume: name the chain's functions again with --tools f,g")
        from .display import rich_output, show_markdown
        from .log import calls_in
        from .tooling import ToolLines, asker, tools_named
        from .values import Text

        tools = tools_named(ns.tools, self.namespace)
        approve = asker(ns.yes, self.defaults.approve_tools)
        lines = ToolLines(rich_output(self.defaults.output))

        def go() -> Any:
            result = self.session.gateway.resume(ns.chain, tools=tools, approve=approve, on_event=lines)
            text = _reply_text(result)
            show_markdown(text)
            value = Text(text).quiet()
            value.tool_calls = result.tool_calls
            return value

        with calls_in(self.shell):
            return self._guard(ns, go)

    def _cmd_mcp(self, ns: argparse.Namespace) -> Any:
        from .tooling import mcp_command

        return mcp_command(ns.action, ns.words)

    def _cmd_help(self, ns: argparse.Namespace) -> None:
        print(HELP)

    def _cmd_explain(self, ns: argparse.Namespace) -> Any:
        """``%%chat --error`` with its default question: the chat's options, defaulted."""
        chat = parser("chat").parse_args([])
        vars(chat).update(vars(ns), error=True)
        chat.footer = chat.footer or self.defaults.footer
        return self._guard(chat, lambda: self._chat(chat, ""))

    def _cmd_models(self, ns: argparse.Namespace) -> None:
        from .display import show_markdown, show_table

        models = self.session.gateway.models()
        if not len(models):
            return show_markdown("*the gateway lists no models*")
        rows = [(m.id, m.owned_by or "", ", ".join(map(str, m.endpoints or []))) for m in models]
        show_table(("model", "owned by", "endpoints"), rows)

    def _cmd_config(self, ns: argparse.Namespace) -> None:
        from .display import show_table

        settings = {**self.session.describe(), **self.defaults.summary()}
        show_table(
            ("setting", "value"),
            [(k, repr(v)) for k, v in settings.items()],
            note="Change with `%config Gatecell.NAME = VALUE`; the key with `%gatecell key`.",
        )

    def _cmd_key(self, ns: argparse.Namespace) -> None:
        import getpass

        from gatecell.wire.util.secret import Secret

        value = getpass.getpass("gatecell API key (kept in this kernel only): ").strip()
        if not value:
            print("no key entered; nothing changed")
            return
        self.session.set_key(Secret(value))
        print("key set for this session; it is not saved in the notebook")

    def _cmd_history(self, ns: argparse.Namespace) -> None:
        from .display import show_markdown

        memory = self.session.memory
        names = list(memory.conversations) if ns.all else [n for n in [ns.name] if n in memory.conversations]
        if not names:
            print(
                "no conversation yet"
                if ns.all or ns.name == "default"
                else f"no conversation named {ns.name!r}"
            )
            return
        show_markdown("\n\n---\n\n".join(memory.get(n).markdown() for n in names))

    def _cmd_reset(self, ns: argparse.Namespace) -> None:
        forgotten = self.session.memory.reset(None if ns.all else ns.name)
        print(f"forgot {', '.join(repr(n) for n in forgotten)}" if forgotten else "nothing to forget")

    def _resume(self, ns: argparse.Namespace) -> Any:
        """A job by its id: this kernel's, or any the log knows (another kernel's, one from
        before a restart); ``--kind`` for a job the log does not know."""
        from gatecell.wire.transport.errors import InvalidRequest

        try:
            job = self.session.gateway.job(ns.id, kind=ns.kind or self.session.jobs.get(ns.id))
        except InvalidRequest as exc:
            if exc.field != "kind":
                raise
            raise UsageError(
                f"%gatecell job: the log does not know {ns.id!r}; "
                "say which it is with --kind imagine|video|music"
            ) from None
        self.session.jobs[ns.id] = job.kind
        return self._follow(ns, job)

    # -- the log ---------------------------------------------------------------------------

    def _cmd_log(self, ns: argparse.Namespace) -> None:
        from .log import show_log, show_similar

        if ns.similar:
            show_similar(self.session.gateway, ns.similar, ns.count)
        else:
            show_log(ns.count, ns.query, ns.model, ns.conversation)

    def _cmd_search(self, ns: argparse.Namespace) -> Any:
        from gatecell.batch.meaning import search_frame

        name, _, column = ns.source.partition(".")
        if name not in self.namespace:
            raise UsageError(f"--in {ns.source}: no variable {name!r} in the notebook")
        data = self.namespace[name]
        if not type(data).__module__.startswith("pandas") or getattr(data, "ndim", 0) not in (1, 2):
            raise UsageError(
                f"--in {ns.source}: {name} is a {type(data).__name__}, not a DataFrame or Series"
            )
        options = {"model": ns.model} if ns.model else {}

        def search() -> Any:
            return search_frame(
                self.session.gateway,
                data,
                ns.query,
                column or None,
                ns.k,
                ns.threshold,
                ns.rerank,
                options=options,
            )

        return self._guard(ns, search)

    def _cmd_usage(self, ns: argparse.Namespace) -> None:
        from .log import show_usage

        show_usage(ns.since, self.defaults.prices)

    def _cmd_jobs(self, ns: argparse.Namespace) -> None:
        from .log import show_jobs

        show_jobs(ns.count)

    def _cmd_export(self, ns: argparse.Namespace) -> None:
        from .log import export

        export(ns.name, ns.path, force=ns.force)

    def _cmd_restore(self, ns: argparse.Namespace) -> None:
        from .log import restore

        restore(ns.name, self.session.memory)


def _stripped(prompt: Any) -> list[Any]:
    """A prompt's items with the whitespace at its two ends taken off its text."""
    items = [prompt] if isinstance(prompt, str) else list(prompt)
    if items and isinstance(items[0], str):
        items[0] = items[0].lstrip()
    if items and isinstance(items[-1], str):
        items[-1] = items[-1].rstrip()
    return items


def _prompt_prov(sent: Any) -> dict[str, Any]:
    """The provenance of a prompt: its text, and what each picture or file was (type, size,
    sha256; never the bytes)."""
    if isinstance(sent, str):
        return {"prompt": sent}
    from gatecell.wire.apis.conversation import content_text

    return {
        "prompt": content_text(sent),
        "attachments": [item.summary() for item in sent if not isinstance(item, str)],
    }


def _reply_text(result: Any) -> str:
    """Text of a whole reply; the raw JSON as a code block when no text is recognised."""
    text = getattr(result, "text", None)
    if isinstance(text, str):
        return text
    from gatecell.wire.util._text import fence

    return fence(json.dumps(getattr(result, "raw", None), indent=2, default=str)[:4000], "json")


_SAVED: set[tuple[int, int]] = set()  # (device, inode) of each file --save wrote in this kernel


def _save(path: str, index: int, count: int, data: bytes, force: bool) -> None:
    """Write ``data`` to ``path``; several items go to ``name-1.ext``, ``name-2.ext``... A new
    file is 0600; an existing one is replaced only with ``--force``, or when this kernel's
    --save wrote it (running the cell again); a symbolic link is never followed."""
    from IPython.core.error import UsageError

    from gatecell.wire.util.private import write_output

    if count > 1:
        stem, ext = os.path.splitext(path)
        path = f"{stem}-{index + 1}{ext}"
    try:
        st = os.lstat(path)
        force = force or (st.st_dev, st.st_ino) in _SAVED
    except OSError:
        pass
    try:
        write_output(path, data, force=force)
    except FileExistsError:
        raise UsageError(f"--save: {path} exists; add --force to replace it") from None
    except OSError as exc:
        raise UsageError(f"--save: cannot write {path}: {exc.strerror or exc}") from None
    st = os.stat(path)
    _SAVED.add((st.st_dev, st.st_ino))
