"""`kernel_cells` (tests/conftest.py) waits for a kernel that is slow to answer, as one starting
on a loaded machine is (the suite runs on two xdist workers), instead of calling it dead."""

from __future__ import annotations

import os
import signal
import threading

from jupyter_client import KernelManager


def test_a_kernel_that_stalls_for_seconds_at_start_still_runs_its_cells(kernel_cells, tmp_path):
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(tmp_path))
    pid = km.provisioner.process.pid
    os.kill(pid, signal.SIGSTOP)  # no heartbeat answered for 4 s
    resume = threading.Timer(4, os.kill, (pid, signal.SIGCONT))
    resume.start()
    try:
        (cell,) = kernel_cells(km.connection_file, "print(6 * 7)")
    finally:
        resume.join()
        km.shutdown_kernel(now=True)
    assert cell["ok"] and cell["stdout"] == "42\n"
