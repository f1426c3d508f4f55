"""Issue 33.6: a JSON Schema whose ``$ref``s fan out (each definition naming the next twice)
doubles at each step when its references are inlined: 4 KB held ``gatecell map --schema``
past 90 s and 2.5 GB before any request. The forms that inline (`tightened` for a ``$ref``
with keywords beside it, `openapi` for generate-content) stop at ``GATECELL_SCHEMA_MAX_NODES``
nodes with one line; a ``$ref`` strict mode takes alone is kept, not inlined."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from typing import Any

import pytest
from hostile_gateway import KEY

from gatecell import Gateway
from gatecell.wire.transport.errors import InvalidRequest
from gatecell.wire.typed.structured import Schema
from gatecell.wire.typed.structured.json_schema import openapi, tightened

LEVELS = 16  # 65,536 leaves inlined: past the cap, and seconds (not hours) for the code before it
FANNED = "its $refs fan out: inlined, it passes 10,000 nodes (GATECELL_SCHEMA_MAX_NODES)"


def fan(levels: int, described: bool) -> dict[str, Any]:
    """Definitions N0..N{levels}, each an object whose two properties refer to the next: the
    inlined schema has 2**levels leaves. ``described``: each reference has a description
    beside it (as pydantic writes a described field of a model's type)."""
    defs: dict[str, Any] = {}
    for i in range(levels):
        ref = {"$ref": f"#/$defs/N{i + 1}"}
        a, b = ({**ref, "description": side} if described else ref for side in ("left", "right"))
        defs[f"N{i}"] = {"type": "object", "properties": {"a": a, "b": b}}
    defs[f"N{levels}"] = {"type": "string"}
    return {"title": "Fan", "type": "object", "properties": {"root": {"$ref": "#/$defs/N0"}}, "$defs": defs}


def _limited() -> None:  # today's code would take gigabytes: the machine is shared
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))


def test_gatecell_map_refuses_a_4_kb_fan_out_schema_at_once_in_one_line(tmp_path):
    schema = tmp_path / "fan.json"
    schema.write_text(json.dumps(fan(30, described=True)))
    assert 4000 < schema.stat().st_size < 5000
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATECELL_")}
    env |= {
        "GATECELL_BASE_URL": "http://127.0.0.1:9",
        "GATECELL_API_KEY": KEY,
        "GATECELL_HOME": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "gatecell", "map", "say {w}", "--schema", str(schema), "--no-progress"],
        input='{"w": 1}\n',
        env=env,
        capture_output=True,
        text=True,
        timeout=60,  # today: minutes, then gigabytes
        preexec_fn=_limited,
    )
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"gatecell: map: {schema}: schema: {FANNED}")  # before any request: the
    # gateway's address is a closed port, which would have been the line had one been sent


@pytest.mark.parametrize("described", [True, False])
def test_the_forms_that_inline_stop_at_the_cap(described):
    with pytest.raises(InvalidRequest, match="fan out") as caught:
        openapi(fan(LEVELS, described))
    assert FANNED in str(caught.value) and "\n" not in str(caught.value)
    if described:
        with pytest.raises(InvalidRequest, match="fan out"):
            tightened(fan(LEVELS, described))
        with pytest.raises(InvalidRequest, match="fan out"):
            Schema.of(fan(LEVELS, described))


def test_a_ref_strict_mode_takes_is_kept_and_the_cap_is_a_setting(monkeypatch):
    plain = fan(LEVELS, described=False)
    wire = tightened(plain)
    assert len(json.dumps(wire)) < 2 * len(json.dumps(plain))  # kept as $refs, not inlined
    assert wire["$defs"]["N0"]["properties"]["a"] == {"$ref": "#/$defs/N1"}
    schema = Schema.of(plain)  # the chat APIs send it as it is
    with pytest.raises(InvalidRequest, match="fan out"):
        schema.openapi  # noqa: B018 - generate-content's form inlines: refused, in one line
    small = fan(8, described=True)
    assert Schema.of(small).openapi["type"] == "OBJECT"  # 2**8 leaves: well within the cap
    monkeypatch.setenv("GATECELL_SCHEMA_MAX_NODES", "100")
    with pytest.raises(InvalidRequest, match="passes 100 nodes"):
        Schema.of(small)


def test_generate_content_refuses_a_fan_out_before_sending(hostile):
    with Gateway(hostile.base_url, KEY, structured="native", max_retries=0) as gw:
        with pytest.raises(InvalidRequest, match="fan out"):  # an APIError (404) had it been sent
            gw.generate_content("hostile-chat", "say hi", schema=fan(LEVELS, described=False))
