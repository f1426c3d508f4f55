"""The ``gatecell`` command: chat and list models from a terminal, run the local gateway,
open JupyterLab on the tutorials.

Errors print as one line on stderr and exit with status 1; Ctrl-C exits with 130 after
keeping what a stream already printed. Everything printed that a gateway or a model chose
(replies, model ids, error messages, the log) goes through
`gatecell.wire.util._terminal.printable`: control sequences are shown escaped, never obeyed.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gatecell.cli.tools import add_options, options_of
from gatecell.connect import explain_unserved
from gatecell.wire.transport.errors import APIError, GatecellError
from gatecell.wire.util._terminal import printable

__all__ = ["main", "stdout_gone"]

_DEFAULT_MODEL = "local-chat"
_LAB_HINT = "gatecell lab needs JupyterLab, which is not installed: pip install 'gatecell[lab]'"
_QUICKSTART = "01-quickstart.ipynb"  # marks a folder holding gatecell's tutorials


def _gateway():
    """A client by the one policy of `gatecell.connect` (`Gateway()` follows it)."""
    from gatecell.gateway import Gateway

    return Gateway()


def _chat(args: argparse.Namespace) -> int:
    prompt = " ".join(args.prompt)
    if not prompt or prompt == "-":
        prompt = sys.stdin.read()
    messages = [{"role": "system", "content": args.system}] if args.system else []
    messages.append({"role": "user", "content": prompt})
    model = args.model or os.environ.get("GATECELL_MODEL") or _DEFAULT_MODEL
    params = {
        "model": model,
        "messages": messages,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_tokens": args.max_tokens,
    }
    tooling = options_of(args)
    with _gateway() as gw:
        try:
            if tooling:  # the chain: text streamed through on_event, each call a line on stderr
                reply = gw.chat(**params, stream=not args.no_stream, **tooling)
                ending = "\n" if not args.no_stream else printable(reply.text or "") + "\n"
                sys.stdout.write(ending)
                if reply.tool_calls.stopped:
                    print(printable(f"gatecell: {reply.tool_calls.stopped}"), file=sys.stderr)
                return 0
            if args.no_stream:
                print(printable(gw.chat(**params).text or ""))
                return 0
            stream = gw.chat(**params, stream=True)
        except APIError as exc:
            how = "choose one with -m MODEL" if args.model else "choose one with -m MODEL or GATECELL_MODEL"
            explain_unserved(exc, model, lambda: _models_or_none(gw), how)
            raise
        try:
            for fragment in stream:
                sys.stdout.write(printable(fragment))
                sys.stdout.flush()
        finally:
            sys.stdout.write("\n")
    return 0


def _models_or_none(gw: Any) -> Any:
    try:
        return gw.models()
    except GatecellError:  # the error being explained matters more than this hint
        return None


def _models(args: argparse.Namespace) -> int:
    with _gateway() as gw:
        for model in gw.models():
            endpoints = ", ".join(model.endpoints or [])
            print(printable(f"{model.id:<32} {model.owned_by or '':<20} {endpoints}"))
    return 0


def _serve(args: argparse.Namespace) -> int:
    from gatecell.local.server import serve

    try:
        serve(
            host=args.host,
            port=args.port,
            api_keys=args.api_key or None,
            api_key_file=args.api_key_file,
            upstream=args.upstream,
            upstream_key_env=args.upstream_key_env,
            pace=args.pace,
            job_seconds=args.job_seconds,
            max_body=args.max_body,
            max_relay=args.max_relay,
            log_level=args.log_level,
            access_log=args.access_log,
            data=args.data,
        )
    except ValueError as exc:  # a bad option or key file: one line, before anything starts
        if args.debug:
            raise
        print(printable(f"gatecell: {exc}"), file=sys.stderr)
        return 2
    return 0


def _lab(args: argparse.Namespace) -> int:
    """JupyterLab on the tutorials, its kernels pointed at the gateway of the one policy.

    When that is the local gateway, it runs here, and the kernels get its address in
    GATECELL_LOCAL_URL and its key in GATECELL_LOCAL_KEYS, so they use it (and say so) as
    a plain kernel uses its own, instead of taking it for a configured real gateway.
    """
    import importlib.util
    import subprocess

    if importlib.util.find_spec("jupyterlab") is None:
        print(f"gatecell: {_LAB_HINT}", file=sys.stderr)
        return 1
    folder = _tutorials(args.notebooks)
    from gatecell.wire.apis.attachments import file_cap

    # A file the chat panel attaches reaches the kernel in one websocket message: the server
    # must take one as large as gatecell takes a file (tornado's default is 10 MiB).
    message = max(10 * 2**20, file_cap() + 2**20)
    settings = f'{{"websocket_max_message_size": {message}}}'
    command = [
        *(sys.executable, "-m", "jupyterlab", f"--notebook-dir={folder}"),
        f"--ServerApp.tornado_settings={settings}",
    ]
    if args.port:
        command.append(f"--port={args.port}")
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers and CI machines run as root
        command.append("--allow-root")
    command += args.jupyter_args
    if args.dry_run:
        print(shlex.join(command))
        return 0
    from gatecell.connect import ENV_LOCAL_URL, choose
    from gatecell.local.config import ENV_KEYS

    env = dict(os.environ)
    target = choose()
    if target.local and target.api_key:
        env[ENV_LOCAL_URL] = target.base_url
        env[ENV_KEYS] = target.api_key.reveal()
    child = subprocess.Popen(command, env=env)
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:  # jupyter asks for confirmation itself; serve until it exits
            continue


def _tutorials(explicit: str | None) -> Path:
    """The folder to open: ``--notebooks``; else the tutorials of a checkout (``./notebooks``,
    or the one gatecell runs from); else a copy of those shipped in the package, made under
    the user's data folder on first use (site-packages is never written to)."""
    if explicit:
        return Path(explicit).expanduser().resolve()
    package = Path(__file__).resolve().parents[1]  # the gatecell folder
    for checkout in (Path.cwd() / "notebooks", package.parents[1] / "notebooks"):
        if (checkout / _QUICKSTART).is_file():
            return checkout.resolve()
    shipped = package / "tutorials"
    if not (shipped / _QUICKSTART).is_file():
        raise GatecellError(f"no tutorials found (looked for {shipped}); pass --notebooks DIR")
    import shutil

    from platformdirs import user_data_path

    from gatecell.wire.util.private import private_folder

    copy = private_folder(private_folder(user_data_path("gatecell")) / "tutorials")  # the log's folder: 0700
    for notebook in shipped.glob("*.ipynb"):
        if not (copy / notebook.name).exists():  # the user's edits are theirs
            shutil.copyfile(notebook, copy / notebook.name)
    return copy


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gatecell", description=__doc__.split("\n\n")[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)

    chat = sub.add_parser("chat", help="stream a chat reply to stdout")
    chat.add_argument("prompt", nargs="*", help="the message ('-' or nothing: read stdin)")
    chat.add_argument("-m", "--model", help=f"default: GATECELL_MODEL, else {_DEFAULT_MODEL}")
    chat.add_argument("-s", "--system", help="system prompt")
    chat.add_argument("-t", "--temperature", type=float, help="0 to 2")
    chat.add_argument("--top-p", type=float, help="0 to 1")
    chat.add_argument("--max-tokens", type=int)
    chat.add_argument("--no-stream", action="store_true", help="wait for the whole reply")
    add_options(chat)
    chat.set_defaults(run=_chat)

    models = sub.add_parser("models", help="list the models the gateway serves")
    models.set_defaults(run=_models)

    serve = sub.add_parser(
        "serve",
        help="run the local gateway",
        description="Run the local gateway. Keys: prefer GATECELL_LOCAL_KEYS (comma separated) or a key "
        "file (--api-key-file, GATECELL_LOCAL_KEY_FILE); --api-key puts the key on the command line, "
        "where any local user sees it in ps. With none of them the local gateway's own key is used "
        "(GATECELL_HOME/local-key, made on first use, readable by you alone) and printed once.",
        epilog="Limits (environment): GATECELL_LOCAL_JOB_QUEUE, GATECELL_LOCAL_JOB_QUEUE_PER_KEY, "
        "GATECELL_LOCAL_JOBS_KEPT, GATECELL_LOCAL_MEDIA_BYTES, GATECELL_LOCAL_MAX_AGE (seconds jobs and "
        "files are kept, default 7 days), GATECELL_LOCAL_HEAD_TIMEOUT, GATECELL_LOCAL_IDLE_TIMEOUT, "
        "GATECELL_LOCAL_MAX_CONNECTIONS; file URLs: GATECELL_LOCAL_PUBLIC_URL.",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--api-key",
        action="append",
        help="a key clients must send (repeatable). Visible to other users in ps: prefer "
        "GATECELL_LOCAL_KEYS or --api-key-file",
    )
    serve.add_argument(
        "--api-key-file",
        metavar="PATH",
        help="a file of keys clients may send, one per line (env GATECELL_LOCAL_KEY_FILE)",
    )
    serve.add_argument("--upstream", help="forward models not served locally to this gateway")
    serve.add_argument(
        "--upstream-key-env",
        default="GATECELL_UPSTREAM_KEY",
        help="environment variable holding the upstream key (default: %(default)s)",
    )
    serve.add_argument(
        "--pace", type=float, help="seconds between streamed tokens of local-chat (env GATECELL_LOCAL_PACE)"
    )
    serve.add_argument(
        "--job-seconds", type=float, help="how long a local media job takes (env GATECELL_LOCAL_JOB_SECONDS)"
    )
    serve.add_argument("--max-body", type=int, help="request body cap in bytes (env GATECELL_LOCAL_MAX_BODY)")
    serve.add_argument(
        "--max-relay",
        type=int,
        metavar="BYTES",
        help="most of one upstream answer relayed to a client (env GATECELL_LOCAL_MAX_RELAY, default 1 GiB)",
    )
    serve.add_argument(
        "--data",
        metavar="DIR",
        help="keep jobs and generated files in DIR, served again after a restart (env GATECELL_LOCAL_DATA; "
        "default: GATECELL_HOME/local; ':memory:' keeps them in memory only)",
    )
    serve.add_argument("--log-level", default="info")
    serve.add_argument("--access-log", action="store_true", help="log every request (costs CPU per request)")
    serve.set_defaults(run=_serve)

    lab = sub.add_parser(
        "lab",
        help="open JupyterLab on the tutorials, served by the embedded gateway",
        description="Other options (--no-browser, ...) are passed on to jupyter lab.",
    )
    lab.add_argument(
        "--notebooks",
        default=os.environ.get("GATECELL_NOTEBOOKS"),
        help="folder to open (env GATECELL_NOTEBOOKS; default: ./notebooks in a checkout, "
        "else a copy of the shipped tutorials in the user's data folder)",
    )
    lab.add_argument("--port", type=int)
    lab.add_argument(
        "--dry-run", action="store_true", help="print the jupyter command and exit; start nothing"
    )
    lab.set_defaults(run=_lab)
    _add_store_commands(sub)
    from .map import add_parser as add_map_command

    add_map_command(sub)
    from .meaning import add_parsers as add_meaning_commands

    add_meaning_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "lab":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.jupyter_args = extra
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout went away (| head): done, as Unix tools are
        stdout_gone()
        return 0
    except Exception as exc:
        if args.debug or not isinstance(exc, (GatecellError, OSError)):
            raise
        print(printable(f"gatecell: {exc}"), file=sys.stderr)
        return 1


def stdout_gone() -> None:
    """After the reader of stdout went away: stdout points at nothing, so that nothing said
    later (Python flushing it at exit) fails again."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, sys.stdout.fileno())
    finally:
        os.close(null)


# -- the store's readers: logs, usage, jobs ------------------------------------------------


def _log_store():
    """The log the settings name, for reading only; None (said on stderr) when there is none yet."""
    from gatecell.store import Store, settings

    path = settings().path
    if not path.exists():
        print(f"gatecell: no log yet at {path}", file=sys.stderr)
        return None
    return Store(path, log=False)


def _logs(args: argparse.Namespace) -> int:
    from gatecell.store.report import exchange_text, json_line

    store = _log_store()
    if store is None:
        return 0
    if args.similar:
        from .meaning import similar

        return similar(store, args.similar, args.count)
    rows = store.logs(n=args.count, q=args.query, model=args.model, conversation=args.conversation)
    for row in reversed(rows):  # oldest first: the newest ends up last, nearest the prompt
        print(json_line(row) if args.json else exchange_text(row))
    return 0


def _usage(args: argparse.Namespace) -> int:
    from gatecell.store import settings
    from gatecell.store.prices import load_prices
    from gatecell.store.report import json_line, since_value, usage_table

    since = since_value(args.since) if args.since else None
    prices_path = settings().prices
    prices = load_prices(prices_path) if prices_path else {}
    store = _log_store()
    if store is None:
        return 0
    rows = store.usage(since=since, prices=prices)
    if args.json:
        for row in rows:
            print(json_line(row))
    elif rows:
        print(usage_table(rows, with_cost=prices_path is not None))
    return 0


def _jobs(args: argparse.Namespace) -> int:
    from gatecell.store.report import jobs_table, json_line

    store = _log_store()
    if store is None:
        return 0
    jobs = store.jobs(limit=args.count)
    if args.json:
        for job in jobs:
            print(json_line(job))
    elif jobs:
        print(jobs_table(jobs))
    return 0


def _add_store_commands(sub: argparse._SubParsersAction) -> None:
    where = "the log is GATECELL_HOME/gatecell.db (default: the user data folder)"
    logs = sub.add_parser(
        "logs", help="show logged exchanges, oldest of the selection first", description=where
    )
    logs.add_argument("-n", "--count", type=int, default=3, help="how many, newest (default 3; 0: all)")
    logs.add_argument("-q", "--query", help="only exchanges whose prompt or reply has all these words")
    logs.add_argument("-m", "--model", help="only this model")
    logs.add_argument("-c", "--conversation", help="only this named conversation")
    logs.add_argument(
        "--similar",
        metavar="TEXT",
        help="the exchanges nearest TEXT by meaning, best first (prompts and replies embedded once, kept)",
    )
    logs.add_argument("--json", action="store_true", help="one JSON object per line")
    logs.set_defaults(run=_logs)

    usage = sub.add_parser(
        "usage",
        help="requests, tokens and cost per model per day, from the log",
        description=f"{where}; the cost of each request as its gateway said, else by the prices of the "
        "gateway's model info, else by GATECELL_PRICES (a TOML or JSON file of dollars per million "
        'tokens: {"gpt-4o": {"input": 2.5, "output": 10}}), else unknown; its source beside it. '
        "Days are UTC.",
    )
    usage.add_argument("--since", help="from this UTC date (YYYY-MM-DD) or ISO time on")
    usage.add_argument("--json", action="store_true", help="one JSON object per line")
    usage.set_defaults(run=_usage)

    jobs = sub.add_parser("jobs", help="recent imagine, video and music jobs", description=where)
    jobs.add_argument("-n", "--count", type=int, default=20, help="how many (default 20; 0: all)")
    jobs.add_argument("--json", action="store_true", help="one JSON object per line")
    jobs.set_defaults(run=_jobs)
