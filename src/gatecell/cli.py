"""The ``gatecell`` command: chat and list models from a terminal, run the local gateway,
open JupyterLab on the tutorials.

Errors print as one line on stderr and exit with status 1; Ctrl-C exits with 130 after
keeping what a stream already printed.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]

_DEFAULT_MODEL = "local-chat"


def _gateway():
    """A client from the settings, or from the embedded gateway when none is configured."""
    from gatecell.wire.client import Gateway
    from gatecell.wire.settings import resolve

    if resolve().base_url:
        return Gateway()
    from gatecell.local.embedded import start

    local = start()
    print(
        f"gatecell: no gateway configured, using the embedded local one at {local.base_url} "
        "(set GATECELL_BASE_URL and GATECELL_API_KEY to use yours)",
        file=sys.stderr,
    )
    return Gateway(base_url=local.base_url, api_key=local.api_key)


def _chat(args: argparse.Namespace) -> int:
    prompt = " ".join(args.prompt)
    if not prompt or prompt == "-":
        prompt = sys.stdin.read()
    messages = [{"role": "system", "content": args.system}] if args.system else []
    messages.append({"role": "user", "content": prompt})
    params = {
        "model": args.model,
        "messages": messages,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_tokens": args.max_tokens,
    }
    with _gateway() as gw:
        if args.no_stream:
            print(gw.chat(**params).text)
            return 0
        stream = gw.chat(**params, stream=True)
        try:
            for fragment in stream:
                sys.stdout.write(fragment)
                sys.stdout.flush()
        finally:
            sys.stdout.write("\n")
    return 0


def _models(args: argparse.Namespace) -> int:
    with _gateway() as gw:
        for model in gw.models():
            endpoints = ", ".join(model.endpoints or [])
            print(f"{model.id:<32} {model.owned_by or '':<20} {endpoints}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from gatecell.local.server import serve

    serve(
        host=args.host,
        port=args.port,
        api_keys=args.api_key or None,
        upstream=args.upstream,
        upstream_key_env=args.upstream_key_env,
        pace=args.pace,
        job_seconds=args.job_seconds,
        max_body=args.max_body,
        max_relay=args.max_relay,
        log_level=args.log_level,
        access_log=args.access_log,
    )
    return 0


def _lab(args: argparse.Namespace) -> int:
    """JupyterLab on the tutorials, its kernels pointed at one embedded gateway."""
    import subprocess

    from gatecell.wire.settings import resolve

    env = dict(os.environ)
    if not resolve().base_url:
        from gatecell.local.embedded import start

        local = start()
        env["GATECELL_BASE_URL"] = local.base_url
        env["GATECELL_API_KEY"] = local.api_key.reveal()
        print(f"gatecell: embedded local gateway at {local.base_url}", file=sys.stderr)
    command = [sys.executable, "-m", "jupyterlab", f"--notebook-dir={args.notebooks}"]
    if args.port:
        command.append(f"--port={args.port}")
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers and CI machines run as root
        command.append("--allow-root")
    child = subprocess.Popen(command + args.jupyter_args, env=env)
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:  # jupyter asks for confirmation itself; serve until it exits
            continue


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gatecell", description=__doc__.split("\n\n")[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)

    chat = sub.add_parser("chat", help="stream a chat reply to stdout")
    chat.add_argument("prompt", nargs="*", help="the message ('-' or nothing: read stdin)")
    chat.add_argument("-m", "--model", default=os.environ.get("GATECELL_MODEL", _DEFAULT_MODEL))
    chat.add_argument("-s", "--system", help="system prompt")
    chat.add_argument("-t", "--temperature", type=float, help="0 to 2")
    chat.add_argument("--top-p", type=float, help="0 to 1")
    chat.add_argument("--max-tokens", type=int)
    chat.add_argument("--no-stream", action="store_true", help="wait for the whole reply")
    chat.set_defaults(run=_chat)

    models = sub.add_parser("models", help="list the models the gateway serves")
    models.set_defaults(run=_models)

    serve = sub.add_parser("serve", help="run the local gateway")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--api-key",
        action="append",
        help="a key clients must send (repeatable; default: GATECELL_LOCAL_KEYS, else a new random key)",
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
    serve.add_argument("--log-level", default="info")
    serve.add_argument("--access-log", action="store_true", help="log every request (costs CPU per request)")
    serve.set_defaults(run=_serve)

    lab = sub.add_parser(
        "lab",
        help="open JupyterLab on the tutorials, served by the embedded gateway",
        description="Other options (--no-browser, ...) are passed on to jupyter lab.",
    )
    lab.add_argument("--notebooks", default=str(Path.cwd() / "notebooks"))
    lab.add_argument("--port", type=int)
    lab.set_defaults(run=_lab)
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
    except Exception as exc:
        from gatecell.wire.errors import GatecellError

        if args.debug or not isinstance(exc, (GatecellError, OSError)):
            raise
        print(f"gatecell: {exc}", file=sys.stderr)
        return 1
