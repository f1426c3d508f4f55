"""The notebook as context, part by part: value summaries, code left alone in prompts, code
blocks out of replies, the last error, redaction (no gateway, no kernel)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from IPython.core.error import UsageError

from gatecell.notebook.markdown import code_blocks, to_html
from gatecell.notebook.summary import clip, summarize
from gatecell.notebook.template import interpolate


def table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


# -- values ------------------------------------------------------------------------------


def test_a_big_dataframe_is_its_shape_dtypes_and_first_rows_as_a_table():
    df = pd.DataFrame(
        {"id": range(10_000), "price": np.linspace(0, 1, 10_000), "note|x": ["two\nlines"] * 10_000}
    )
    text = summarize(df, rows=3, chars=1000)
    assert len(text) <= 1000
    assert text.startswith("pandas DataFrame: 10,000 rows × 3 columns")
    assert "columns: id int64, price float64, note\\|x " in text
    rows = table_lines(text)
    assert rows[0] == "|  | id | price | note\\|x |" and rows[1] == "|---|---|---|---|"
    assert rows[2:] == [
        "| 0 | 0 | 0 | two lines |",
        "| 1 | 1 | 0.00010001 | two lines |",
        "| 2 | 2 | 0.00020002 | two lines |",
    ]
    assert text.endswith("… 9,997 more rows")
    assert "9999" not in text


def test_a_wide_dataframe_shows_twenty_columns_and_counts_the_rest():
    df = pd.DataFrame([range(30)], columns=[f"c{i}" for i in range(30)])
    text = summarize(df)
    assert "… 10 more columns" in text
    assert table_lines(text)[0].count("|") == 22  # the index and 20 columns
    assert "c20" not in text


def test_series_arrays_dicts_and_strings_are_bounded_with_a_visible_marker():
    series = summarize(pd.Series(range(1000), name="n"), rows=2)
    assert series.startswith("pandas Series n: 1,000 values, dtype int64")
    assert table_lines(series)[2:] == ["| 0 | 0 |", "| 1 | 1 |"] and series.endswith("… 998 more values")
    array = summarize(np.arange(100_000).reshape(1000, 100), rows=2)
    assert array.startswith("numpy array: shape (1000, 100), dtype int64") and "..." in array
    assert len(array) < 600
    big = {i: "x" * (i % 50) for i in range(100_000)}
    text = summarize(big, chars=2000)
    assert len(text) <= 2000 and text.startswith("{0: '', 1: 'x'") and text.endswith(" more items}")
    assert int(text.rsplit("… ", 1)[1].split()[0].replace(",", "")) + text.count(": '") == 100_000
    long = summarize("word " * 5000, chars=500)
    assert len(long) <= 500 and long.endswith(" more characters")
    assert summarize("short") == "short" and summarize([1, (2,), {3}]) == "[1, (2,), {3}]"
    nested = summarize({"rows": [list(range(10_000))]}, chars=300)
    assert len(nested) <= 300 and "more items" in nested


def test_clip_can_keep_both_ends():
    text = "".join(f"line {i}\n" for i in range(1000))
    kept = clip(text, 200, ends=True)
    assert len(kept) <= 200 and kept.startswith("line 0\n") and kept.endswith("line 999\n")
    assert "characters left out" in kept


def test_an_objects_own_representation_wins():
    class ForModels:
        def _repr_llm_(self) -> str:
            return "three sensors, all calibrated"

        def _repr_markdown_(self) -> str:
            return "# not this"

    class AsMarkdown:
        def _repr_markdown_(self):
            return "**bold** " * 1000, {"meta": 1}  # (data, metadata), as IPython allows

    class Anything:
        def __getattr__(self, name):  # answers every attribute: not a representation
            return lambda: "nonsense"

        def __str__(self) -> str:
            return "plain str"

    assert summarize(ForModels()) == "three sensors, all calibrated"
    assert summarize(AsMarkdown(), chars=300).startswith("**bold** **bold**")
    assert len(summarize(AsMarkdown(), chars=300)) <= 300
    assert summarize(Anything()) == "plain str"
    assert summarize(ForModels) == str(ForModels)  # a class is not its instances


def test_pandas_is_not_imported_for_other_values():
    code = (
        "import sys; from gatecell.notebook.summary import summarize\n"
        "summarize({'a': [1, 2]}); summarize('x'); summarize(3.5)\n"
        "print('pandas' in sys.modules, 'numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# -- prompts -------------------------------------------------------------------------------

CODE = """Why does this fail?

```python
name = "Ada"
print(f"{name!r} has {len(items)} items: {items[0]:>4}")
config = {"a": {"b": 1}, "c": {{}}}
```

Also `f"{x}"` and ``{y} `z` {w}`` stay; {who} is filled, and so is {n:03d}.
~~~
{tilde}
~~~
"""


def test_code_in_a_prompt_passes_through_untouched():
    filled = interpolate(CODE, {"who": "Grace", "n": 7})
    assert filled == CODE.replace("{who}", "Grace").replace("{n:03d}", "007")


def test_code_is_what_markdown_calls_code():
    ns = {"a": 1}
    # an escaped backtick opens nothing: the span is "` and `", as the renderer shows it
    assert interpolate("\\`{a}` and `{a}`", ns) == "\\`1` and `1`"
    assert "<code>and</code>" in to_html("\\`{a}` and `{a}`")
    assert interpolate("`` {a} ` {a}", ns) == "`` 1 ` 1"  # backticks nothing closes are literal
    assert interpolate("- item\n  ```\n  {a}\n  ```\n{a}", ns) == "- item\n  ```\n  {a}\n  ```\n1"
    assert interpolate("```\n{a}\nno closing fence", ns) == "```\n{a}\nno closing fence"
    assert interpolate("| `{a}` | {a} |\n|---|---|\n| {a} | `{a}` |", ns) == (
        "| `{a}` | 1 |\n|---|---|\n| 1 | `{a}` |"
    )


def test_fields_for_cells_and_their_errors():
    ns = {"In": ["", "x = 6 * 7\n", "x"], "Out": {2: 42}, "_": 42, "x": 42}
    assert interpolate("cell: {In[1]}", ns) == "cell: \n\n```python\nx = 6 * 7\n```"
    assert interpolate("{Out[2]} and {_} and {In[1]!r}", ns) == "42 and 42 and 'x = 6 * 7\\n'"
    with pytest.raises(UsageError, match=r"\{Out\[1\]\} in the prompt: Out has no item 1 \(Out keeps"):
        interpolate("{Out[1]}", ns)
    with pytest.raises(UsageError, match=r"In holds cells 1 to 2"):
        interpolate("{In[9]}", ns)
    with pytest.raises(UsageError, match=r"\{x\.nope\} in the prompt: 'int' object has no attribute 'nope'"):
        interpolate("{x.nope}", ns)


def test_a_table_goes_on_lines_of_its_own():
    df = pd.DataFrame({"a": [1, 2]})
    filled = interpolate("Look at {df} and say what stands out.", {"df": df})
    before, after = filled.split("\n\n", 1)[0], filled.rsplit("\n\n", 1)[1]
    assert before.rstrip() == "Look at" and after.lstrip() == "and say what stands out."
    assert "\n| 1 | 2 |\n\n" in filled and "<table>" in to_html(filled)


def test_a_failing_representation_is_one_line_before_sending():
    class Broken:
        def _repr_llm_(self):
            raise RuntimeError("sensor offline")

    with pytest.raises(
        UsageError, match=r"\{b\} in the prompt: cannot show its value: RuntimeError: sensor offline"
    ):
        interpolate("{b}", {"b": Broken()})


# -- replies ---------------------------------------------------------------------------------


def test_code_blocks_come_in_order_with_their_language():
    reply = (
        "Try:\n\n```python\nx = 1\n```\n\nthen\n\n~~~ bash extra\nls `pwd`\n~~~\n\n```\nplain\n```\n`inline`"
    )
    assert code_blocks(reply) == [("python", "x = 1"), ("bash", "ls `pwd`"), ("", "plain")]
    assert code_blocks("no code, only `inline` code") == []
