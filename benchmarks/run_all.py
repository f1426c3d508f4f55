"""Run every benchmark, then print the Markdown table of their latest results (for the README).

    .venv/bin/python benchmarks/run_all.py              # all of them, about 10 minutes
    .venv/bin/python benchmarks/run_all.py --only bench_import bench_memory
    .venv/bin/python benchmarks/run_all.py --table      # only the table, from results/*.json

The table also goes into benchmarks/README.md, between its results markers.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from _common import HERE, PYTHON, RESULTS

BENCHMARKS = [
    "bench_import",
    "bench_request",
    "bench_commit",
    "bench_stream",
    "bench_cache",
    "bench_forward",
    "bench_concurrency",
    "bench_memory",
    "bench_batch",
    "bench_render",
    "bench_local_embed",
    "bench_embed",
    "bench_tools",
]
TIMEOUT_S = 1200  # bench_batch takes about 7 minutes on a slow 2-core machine
START, END = "<!-- results -->", "<!-- /results -->"  # where README.md holds the table


def run(name: str) -> bool:
    print(f"\n=== {name}", flush=True)
    start = time.perf_counter()
    try:
        code = subprocess.run([PYTHON, str(HERE / f"{name}.py")], timeout=TIMEOUT_S).returncode
    except subprocess.TimeoutExpired:
        code = "timeout"
    print(
        f"=== {name}: {'ok' if code == 0 else f'FAILED ({code})'} in {time.perf_counter() - start:.0f} s",
        flush=True,
    )
    return code == 0


def table(names: list[str]) -> str:
    lines = [
        "| Benchmark | Measure | gatecell | Peer (same run) | Ratio | Target | Met |",
        "|---|---|---|---|---|---|---|",
    ]
    stamps = []
    for name in names:
        path = RESULTS / f"{name}.json"
        if not path.exists():
            lines.append(f"| {name} | no results yet | | | | | |")
            continue
        data = json.loads(path.read_text())
        stamps.append(f"{name} {data['when']} (load {data['machine'].get('loadavg_1m_at_end', 0):.1f})")
        for row in data["summary"]:
            ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}x"
            met = {True: "yes", False: "**no**", None: "-"}[row["met"]]
            lines.append(
                f"| {name} | {row['measure']} | {row['gatecell']} | {row['peer']} | {ratio} "
                f"| {row['target']} | {met} |"
            )
    return "\n".join(lines) + "\n\nRuns (UTC, 1-minute load average at the end): " + "; ".join(stamps)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, help="run these benchmarks only")
    parser.add_argument(
        "--table", action="store_true", help="print the table from the last results, run nothing"
    )
    args = parser.parse_args()
    failed = []
    if not args.table:
        failed = [name for name in args.only or BENCHMARKS if not run(name)]
    text = table(BENCHMARKS)
    print("\n" + text)
    readme = HERE / "README.md"
    head, _, rest = readme.read_text().partition(START)
    readme.write_text(f"{head}{START}\n{text}\n{END}{rest.partition(END)[2]}")
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
