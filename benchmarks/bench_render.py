"""CPU time of rendering a 20 KB reply to safe HTML (`gatecell.notebook.markdown.to_html`).

Three replies of about 20 KB: prose (paragraphs, lists, emphasis, links), dense (tables and
highlighted Python), and math-dense (inline and display formulas in all four delimiters,
TeX with underscores, stars and backslashes, and price lines). Contenders take turns on the
same text: gatecell's renderer (markdown-it with the math rules, Pygments, nh3), the same
renderer as it was at a git ref (``--baseline``, default ``main``; skipped outside a
checkout), and bare markdown-it-py (CommonMark and tables, no math, no highlighting, no
cleaning) as the floor. The renderer's caches are warm, as in a notebook after the first
reply; the median over repetitions is reported.

A live reply is rendered again at most every update interval, which the Coalescer stretches
to five times a render's cost, so rendering takes at most a fifth of a stream's time; the
per-render cost here says how often a long reply can be refreshed.

    .venv/bin/python benchmarks/bench_render.py [--reps 30] [--baseline main]
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import time
import types
from collections.abc import Callable

from _common import HERE, median, print_table, save, summary_row

SIZE = 20_000


def _fill(unit: str) -> str:
    return (unit * (SIZE // len(unit) + 1))[: SIZE + len(unit)].rsplit("\n\n", 1)[0]


PROSE = _fill(
    "## A section\n\nThe model reads the **question**, weighs the *evidence* and answers in a few "
    "sentences, citing [the documentation](https://example.com/docs) where it helps. It keeps "
    "`names` and numbers as written, and says when it is unsure.\n\n- a first point, short\n"
    "- a second point, with a little more to say about it\n\n"
)
DENSE = _fill(
    "| model | tokens | latency (ms) | cost |\n|:---|---:|---:|---:|\n"
    + "".join(f"| model-{i} | {i * 137} | {i * 11} | {i * 0.002:.3f} |\n" for i in range(1, 9))
    + "\n```python\nimport statistics\n\n\ndef summary(rows: list[dict]) -> dict[str, float]:\n"
    '    """Median latency and total cost of the rows."""\n'
    '    latencies = [r["latency"] for r in rows if r.get("ok")]  # the successes only\n'
    '    return {"p50": statistics.median(latencies), "cost": sum(r["cost"] for r in rows)}\n```\n\n'
)
MATH = _fill(
    r"The variance is $\sigma^2 = E[(X-\mu)^2]$, the mean \(\bar x = \tfrac1n \sum_i x_i\) and "
    r"the estimator $\hat\sigma^2 = \frac{1}{n-1}\sum_{i=1}^n (x_i - \bar x)^2$ is unbiased; "
    r"a coffee costs $5 and a sandwich $10. In a line, $$\int_0^\infty e^{-x^2}\,dx = "
    r"\frac{\sqrt\pi}{2}$$ and as a block:"
    "\n\n$$\n"
    r"\mathbf{A} = \begin{pmatrix} a_{11} & a_{12} \\ a_{21} & a_{22} \end{pmatrix}, \quad"
    r" \det \mathbf{A} = a_{11}a_{22} - a_{12}a_{21}"
    "\n$$\n\n"
    r"Then \[ \nabla \cdot \mathbf{E} = \frac{\rho}{\varepsilon_0} \] holds, with $k_B T$ and "
    r"$*p*_1 * q_2$ kept as written."
    "\n\n"
)
TEXTS = {"prose": PROSE, "dense": DENSE, "math": MATH}


def gatecell_renderer() -> Callable[[str], str]:
    from gatecell.notebook.markdown import to_html

    return to_html


def baseline_renderer(ref: str) -> Callable[[str], str] | None:
    """`to_html` of the renderer at git ``ref``, loaded from its source; None outside a checkout."""
    try:
        source = subprocess.run(
            ["git", "show", f"{ref}:src/gatecell/notebook/markdown.py"],
            cwd=HERE.parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    module = types.ModuleType(f"markdown_at_{ref}")
    exec(compile(source, f"{ref}:markdown.py", "exec"), module.__dict__)
    return module.to_html


def bare_renderer() -> Callable[[str], str]:
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False}).enable("table")
    return parser.render


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--baseline", default="main", help="git ref of the renderer to compare with")
    args = parser.parse_args()

    contenders: dict[str, Callable[[str], str]] = {"gatecell": gatecell_renderer()}
    before = baseline_renderer(args.baseline)
    if before is not None:
        contenders[f"gatecell@{args.baseline}"] = before
    else:
        print(f"no renderer at {args.baseline!r} (not a git checkout?): measured without it", file=sys.stderr)
    contenders["bare markdown-it"] = bare_renderer()

    for render in contenders.values():  # warm up: imports, lexers, the cleaner, the stylesheet
        for text in TEXTS.values():
            render(text)
    runs: dict[str, dict[str, list[float]]] = {kind: {name: [] for name in contenders} for kind in TEXTS}
    names = list(contenders)
    for rep in range(args.reps):
        for kind, text in TEXTS.items():
            for name in names[rep % len(names) :] + names[: rep % len(names)]:
                gc.collect()
                start = time.process_time()
                contenders[name](text)
                runs[kind][name].append(time.process_time() - start)
    ms = {kind: {name: median(times) * 1e3 for name, times in by.items()} for kind, by in runs.items()}

    sizes = {kind: f"{len(text.encode()) / 1000:.1f} KB" for kind, text in TEXTS.items()}
    print(f"\nCPU ms per render, median of {args.reps} (process_time), warm caches\n")
    print_table(["reply", "size", *names], [[kind, sizes[kind], *ms[kind].values()] for kind in TEXTS])

    base = f"gatecell@{args.baseline}"
    summary = []
    for kind in TEXTS:
        now = ms[kind]["gatecell"]
        if base not in ms[kind]:
            bare = ms[kind]["bare markdown-it"]
            summary.append(
                summary_row(
                    f"render a 20 KB {kind} reply (CPU)",
                    f"{now:.2f} ms",
                    f"bare {bare:.2f} ms",
                    now / bare,
                    "info",
                    None,
                )
            )
            continue
        ratio = now / ms[kind][base]
        if kind == "math":  # the reply the math rules are for: as cheap as before, and no dearer than dense
            target, met = "<= 1.1x before, <= dense", ratio <= 1.1 and now <= ms["dense"]["gatecell"]
        else:
            target, met = "<= 1.1x before", ratio <= 1.1
        row = summary_row(
            f"render a 20 KB {kind} reply (CPU)",
            f"{now:.2f} ms",
            f"{base} {ms[kind][base]:.2f} ms",
            ratio,
            target,
            met,
        )
        summary.append(row)
    summary.append(
        summary_row(
            "render vs bare markdown-it, 20 KB math reply (info)",
            f"{ms['math']['gatecell']:.2f} ms",
            f"bare {ms['math']['bare markdown-it']:.2f} ms",
            ms["math"]["gatecell"] / ms["math"]["bare markdown-it"],
            "info",
            None,
        )
    )
    save(
        "bench_render",
        "CPU (process_time) of one render of each ~20 KB reply, contenders taking turns on the same "
        "text, median over repetitions, caches warm. The baseline is the renderer's source at a git "
        "ref, loaded into this process; bare markdown-it renders CommonMark and tables only.",
        {"reps": args.reps, "baseline": args.baseline, "sizes": sizes},
        {"cpu_ms": ms, "runs_s": runs},
        summary,
    )


if __name__ == "__main__":
    main()
