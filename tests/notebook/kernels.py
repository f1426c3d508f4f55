"""Running cells in a real kernel the way a frontend does, for the kernel-level tests."""

from __future__ import annotations

import os
import queue
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def kernel_env(**extra: str) -> dict[str, str]:
    """This process's environment without any gateway setting of the developer's, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_"))}
    env.update(extra)
    return env


@contextmanager
def running(cwd: Any, **env: str) -> Iterator[Any]:
    """A python3 kernel started in ``cwd`` with `kernel_env` (``env`` on top), ready, with
    gatecell loaded; yields its client and shuts it down afterwards."""
    from jupyter_client import KernelManager

    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=kernel_env(**env), cwd=str(cwd))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        execute(kc, "%load_ext gatecell")
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def execute(kc: Any, code: str, *, timeout: float = 60, on_message: Any = None) -> tuple[dict, list[dict]]:
    """Run ``code``; return the execute reply and every iopub message of it."""
    msg_id = kc.execute(code)
    messages: list[dict] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(
                f"no idle within {timeout} s; got {[m['msg_type'] for m in messages]}"
            ) from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        if on_message is not None:
            on_message(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    reply = kc.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=timeout)
    return reply, messages


def stream_text(messages: list[dict], name: str) -> str:
    return "".join(
        m["content"]["text"] for m in messages if m["msg_type"] == "stream" and m["content"]["name"] == name
    )


def displays(messages: list[dict]) -> list[dict]:
    return [m for m in messages if m["msg_type"] in ("display_data", "update_display_data")]
