"""Wall time of ``python -c "import gatecell"`` vs ``python -c "import openai"``.

Each run is a fresh interpreter of this venv (bytecode already cached by warm-up runs);
the statements take turns, the median of many runs is reported. ``python -c pass`` shows
the interpreter's own start-up, and ``from gatecell import Gateway`` what the first use of
the client costs (information, no target). ``-X importtime`` lists the heaviest imports.

    .venv/bin/python benchmarks/bench_import.py [--runs 20]
"""

from __future__ import annotations

import argparse
import subprocess
import time

from _common import PYTHON, median, print_table, save, summary_row

STATEMENTS = {
    "python -c pass": "pass",
    "import gatecell": "import gatecell",
    "import openai": "import openai",
    "from gatecell import Gateway": "from gatecell import Gateway",
}


def wall(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([PYTHON, "-c", code], check=True)
    return time.perf_counter() - start


def heaviest_imports(code: str, top: int = 10) -> list[tuple[str, int]]:
    """Imports of the first two levels by cumulative microseconds, from ``-X importtime``
    (a nested module is shown indented under what imported it)."""
    err = subprocess.run(
        [PYTHON, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True
    ).stderr
    rows = []
    for line in err.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _self, cumulative, name = line[len("import time:") :].split("|")
        depth = (len(name) - len(name.lstrip()) - 1) // 2
        if depth <= 1:
            rows.append(("  " * depth + name.strip(), int(cumulative)))
    return sorted(rows, key=lambda r: -r[1])[:top]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()

    for code in STATEMENTS.values():  # warm up: bytecode caches, page cache
        wall(code)
    times: dict[str, list[float]] = {name: [] for name in STATEMENTS}
    for _ in range(args.runs):
        for name, code in STATEMENTS.items():
            times[name].append(wall(code))
    ms = {name: median(t) * 1e3 for name, t in times.items()}

    print(f"\nfresh interpreter per run, {args.runs} runs each, median wall time\n")
    base = ms["import openai"]
    print_table(["statement", "ms", "vs import openai"], [[n, v, f"{v / base:.3f}x"] for n, v in ms.items()])
    breakdown = {code: heaviest_imports(code) for code in ("import gatecell", "from gatecell import Gateway")}
    for code, rows in breakdown.items():
        print(f"\nheaviest imports of {code!r} (-X importtime, cumulative):")
        print_table(["module", "ms"], [[name, us / 1e3] for name, us in rows])

    ratio = ms["import gatecell"] / base
    print(f"\nimport gatecell / import openai = {ratio:.3f}x (target <= 0.15x)")
    save(
        "bench_import",
        "Wall time of a fresh `python -c <statement>` of the project venv, statements interleaved, "
        "median of runs, after warm-up runs.",
        {"runs": args.runs, "python": PYTHON},
        {"median_ms": ms, "runs_s": times, "importtime_top_ms": breakdown},
        [
            summary_row(
                '`python -c "import gatecell"` wall',
                f"{ms['import gatecell']:.0f} ms",
                f"openai {base:.0f} ms",
                ratio,
                "<= 0.15x",
                ratio <= 0.15,
            ),
            summary_row(
                "`from gatecell import Gateway` wall (info)",
                f"{ms['from gatecell import Gateway']:.0f} ms",
                f"openai {base:.0f} ms",
                ms["from gatecell import Gateway"] / base,
                "info",
                None,
            ),
        ],
    )


if __name__ == "__main__":
    main()
