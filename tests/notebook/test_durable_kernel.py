"""What a notebook showed is in the log, however its kernel ends: killed outright (SIGKILL, as
the out-of-memory killer does) right after a cell showed a job id, shut down or restarted
from the front end (ipykernel's own shutdown path).

Each test gives its kernels a GATECELL_HOME of its own and reads the log from the file, or
from a new kernel, as a user would after the old one is gone.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from test_log_kernel import kernel, run  # noqa: F401  (kernel: the fixture)


def test_a_job_id_shown_right_before_the_kernel_is_killed_is_listed_and_collected(
    kernel, kernel_cells, tmp_path
):
    home = tmp_path / "home"
    first = kernel(home)
    run(kernel_cells, first, "%load_ext gatecell")
    kc = first.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        msg_id = kc.execute("%%video --no-wait\nwaves on a beach")
        while True:  # the reply: the cell returned, the job id is on the screen; kill at once
            reply = kc.get_shell_msg(timeout=120)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        os.kill(first.provisioner.process.pid, signal.SIGKILL)
        first.provisioner.process.wait(30)
        assert reply["content"]["status"] == "ok", reply["content"]
        shown = ""
        while True:
            try:
                msg = kc.get_iopub_msg(timeout=1)
            except queue.Empty:
                break
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
                shown += msg["content"]["text"]
    finally:
        kc.stop_channels()
    job_id = re.search(r"video job (video_\w+) submitted", shown)[1]  # type: ignore[index]
    second = kernel(home)
    out = run(kernel_cells, second, "%load_ext gatecell", "%gatecell jobs", f"%gatecell job {job_id}")
    assert job_id in out[1]["text"] and "waves on a beach" in out[1]["text"]
    assert any("<video" in d["data"].get("text/html", "") for d in out[2]["displays"])  # collected


QUEUE = (
    "from gatecell import store\n"
    "store.default_store().record_exchange('/v1/chat/completions', 'm', "
    "{{'model': 'm', 'messages': [{{'role': 'user', 'content': {prompt!r}}}]}}, text='ok')\n"
)


def _prompts(home: Path) -> list[str]:
    with sqlite3.connect(home / "gatecell.db") as conn:
        return [row[0] for row in conn.execute("SELECT prompt FROM exchanges ORDER BY id")]


@contextmanager
def held(path: Path) -> Iterator[Callable[[float], None]]:
    """Another process's write transaction on the log, held until ``release(seconds)`` ends
    it that many seconds later (from a thread): what a kernel logs meanwhile waits."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("BEGIN IMMEDIATE")
    timer: list[threading.Timer] = []

    def release(seconds: float) -> None:
        timer.append(threading.Timer(seconds, conn.execute, ("COMMIT",)))
        timer[0].start()

    try:
        yield release
    finally:
        for t in timer:
            t.join()
        if conn.in_transaction:
            conn.execute("COMMIT")
        conn.close()


def test_shutdown_and_restart_from_the_front_end_lose_nothing(kernel, kernel_cells, tmp_path):
    """``restart_kernel(now=False)`` and ``shutdown_kernel(now=False)`` are what JupyterLab's
    Restart and Shut Down send: a shutdown request, which ipykernel answers by leaving its
    loop and exiting (atexit runs), with a kill only after 5 s. An entry still queued (the
    file locked by another process) is committed on the way out."""
    home = tmp_path / "home"
    km = kernel(home)
    run(kernel_cells, km, QUEUE.format(prompt="first"), "store.default_store().flush()")
    for name, end in (("restart", km.restart_kernel), ("shutdown", km.shutdown_kernel)):
        with held(home / "gatecell.db") as release:
            run(kernel_cells, km, QUEUE.format(prompt=f"before the {name}"))
            release(1.0)  # while the kernel is on its way out
            end(now=False)
    assert _prompts(home) == ["first", "before the restart", "before the shutdown"]
