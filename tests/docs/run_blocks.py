"""Run a page's examples in order, as the cells of one notebook: one real IPython shell with
gatecell loaded (``%load_ext gatecell``, as the guide says to start), so Python blocks and
magic cells share their variables. Reads the blocks as JSON (a file named on the command line);
stops at the first block that fails, printing where it is and what it printed."""

from __future__ import annotations

import json
import sys


def main() -> int:
    from IPython.testing.globalipapp import start_ipython
    from IPython.utils.capture import capture_output

    with open(sys.argv[1], encoding="utf-8") as f:
        cells = json.load(f)
    shell = start_ipython()
    shell.run_line_magic("load_ext", "gatecell")
    for cell in cells:
        with capture_output() as out:
            result = shell.run_cell(cell["code"], store_history=True)
        if not result.success:
            error = result.error_before_exec or result.error_in_exec
            print(f"{cell['where']}: the example failed: {error!r}\n{out.stdout}{out.stderr}")
            return 1
        print(f"{cell['where']}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
