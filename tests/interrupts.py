"""Python children that a test interrupts with SIGINT, as Ctrl-C does.

A process started with SIGINT ignored (``nohup``, ``&`` in a non-interactive shell, some CI
runners) hands the ignoring on to its children, and Python then never raises
KeyboardInterrupt: a test's Ctrl-C would do nothing. So each such child puts the default
handler back first, as the benchmarks' children do.
"""

from __future__ import annotations

import sys

RESTORE = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"


def python(*argv: str) -> list[str]:
    """The command line of ``python ARGV`` (``-c CODE ...`` or ``-m MODULE ...``) with Ctrl-C
    restored before the code runs."""
    option, target, *rest = argv
    if option == "-c":
        return [sys.executable, "-c", RESTORE + target, *rest]
    assert option == "-m", argv
    run = f"import runpy; runpy.run_module({target!r}, run_name='__main__', alter_sys=True)"
    return [sys.executable, "-c", RESTORE + run, *rest]
