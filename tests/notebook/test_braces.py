"""A prompt keeps its braces: only a placeholder is filled (issue 32, section 2). The rule of
`gatecell.batch.rows.fields`, through the notebook's `fill` and a map's `Template`."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from gatecell.batch.rows import Rows, Template
from gatecell.notebook.template import fill
from gatecell.wire.transport.errors import InvalidRequest

LATEX = r"Simplify $\frac{1}{\sqrt{2}}$ and $e^{x}$, then $\sqrt[3]{x} + \mathbf{v}_{i}$ and \{x\}."
JSON = '{"name": "Ada", "tags": {"a": [1, {"b": 2}]}} {{ }} {} { x }'
CODE = "def f(x):\n    return {x: {y} for y in range(x)}  # {{not an escape}}"


@pytest.mark.parametrize("text", [LATEX, JSON, CODE])
def test_latex_json_and_code_go_byte_for_byte_whatever_the_notebook_defines(text):
    ns = {"x": 7, "y": 8, "v": 9, "name": "n"}
    assert fill(text, ns).prompt == text.replace("{x: {y}", "{x: 8")


def test_only_a_defined_name_is_filled_the_rest_is_sent_as_written_and_named():
    ns = {"df": "DF", "items": [1, 2], "point": complex(1, 2)}
    filled = fill("{df} {items[1]} {point.imag:.1f} {later} {later} {cfg.path} {{df}}", ns)
    assert filled.prompt == "DF 2 2.0 {later} {later} {cfg.path} {df}"
    assert filled.filled == ("{df}", "{items[1]}", "{point.imag:.1f}")
    assert filled.unknown == ("{later}", "{cfg.path}")


def test_a_defined_name_with_a_missing_item_is_still_an_error():
    with pytest.raises(UsageError, match=r"\{items\[5\]\} in the prompt: list index out of range"):
        fill("{items[5]}", {"items": [1]})


def test_a_brace_tex_groups_is_never_a_placeholder():
    ns = {"a": "A", "b": "B"}
    assert fill(r"\frac{a}{b}{a} then {a}{b}", ns).prompt == r"\frac{a}{b}{a} then AB"
    assert fill(r"x^{a} \section*{a} \sqrt[3]{a} \{a\}", ns).prompt == r"x^{a} \section*{a} \sqrt[3]{a} \{a\}"
    assert fill("x_{a}, report_{a}, {{a}} and {{b}}", ns).prompt == "x_{a}, report_A, {a} and {b}"


def test_a_map_template_keeps_its_braces_and_fills_its_fields():
    template = Template(LATEX + " " + JSON + " {{item}} {item!r}")
    assert template.names == ("item",)
    assert template.fill({"item": "w"}) == LATEX + " " + JSON + " {item} 'w'"


def test_a_map_template_naming_a_missing_column_is_one_line_before_anything():
    missing = r"^template: \{review\} is not a field of the rows \(they have: text\)"
    with pytest.raises(InvalidRequest, match=missing):
        Rows([{"text": "t"}]).check(Template(r"$e^{x}$ {review}"))
    with pytest.raises(InvalidRequest, match="has no {field}"):
        Template(r"$\frac{1}{\sqrt{2}}$ and {}")
