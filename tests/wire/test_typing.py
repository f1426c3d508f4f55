"""The clients' types, checked by mypy on typing_check.py so they cannot silently regress:
every assertion there holds, every revealed type is the one written, and every line marked
as an error is refused (and no other)."""

from __future__ import annotations

import re
from pathlib import Path

from mypy import api

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
CHECKED = HERE / "typing_check.py"


def test_the_clients_types_are_true():
    out, err, _ = api.run(
        [
            str(CHECKED),
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--no-error-summary",
            "--show-column-numbers",
            "--no-pretty",
        ]
    )
    assert not err, err
    errors: set[int] = set()
    reveals: dict[int, str] = {}
    for line in out.splitlines():
        found = re.match(r".*typing_check\.py:(\d+):\d+: (error|note): (.*)", line)
        assert found, line  # nothing from any other file
        number, kind, text = int(found[1]), found[2], found[3]
        if kind == "error":
            errors.add(number)
        elif text.startswith("Revealed type is "):
            reveals[number] = text.removeprefix("Revealed type is ").strip('"')
    source = CHECKED.read_text().splitlines()
    marked = {i for i, text in enumerate(source, 1) if text.endswith("# error")}
    wanted = {i: text.split("# reveal: ")[1] for i, text in enumerate(source, 1) if "# reveal: " in text}
    assert errors == marked, out
    assert reveals == wanted, out
    assert len(marked) >= 5 and len(wanted) == 2  # the file still says what it should


def test_every_text_answer_has_the_one_answer_protocol(make):
    from gatecell.wire.transport.results import Answer

    gw = make("ok")
    hi = [{"role": "user", "content": "hi"}]
    answers = [
        gw.chat("m", hi),
        gw.messages("m", hi),
        gw.responses("m", "hi"),
        gw.generate_content("m", "hi"),
        gw.chat("m", hi, stream=True),
        gw.messages("m", hi, stream=True),
    ]
    for answer in answers:
        assert isinstance(answer, Answer), type(answer).__name__
        if hasattr(answer, "read"):
            answer.read()
        assert answer.meta.endpoint.startswith("/v1") and answer.parsed is None
