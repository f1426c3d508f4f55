"""Issue 33.8 and 33.9: what ``gatecell map`` and ``--save`` write.

33.8: a reply's C1 controls and bidi overrides never reach a terminal raw. ``gatecell map``
writes each line as the log's JSON lines are written (`gatecell.store.report.json_line`):
those characters become JSON ``\\u`` escapes, which parse back to the very same text, so the
output is the same valid JSON whether it goes to a terminal, a pipe or a file (and a file
later shown with ``cat`` is as safe).

33.9: a file a command creates is 0600 and never written through a symbolic link; an
existing file is replaced only with ``--force`` (``gatecell map -o``), or for ``--save`` one
this kernel's ``--save`` wrote (running the cell again)."""

from __future__ import annotations

import json
import os
import pty
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_gateway import KEY, start
from probes import pointed_at

CLI = [sys.executable, "-m", "gatecell"]
# CSI as one C1 byte (a red screen), NEL, a right-to-left override, a pop, an OSC title, a BEL
REPLY = "total: 12\x9b31m \x85 price \u202e$01\u202c done \x1b]0;pwned\x07 café ünïcode"
RAW = ("\x9b", "\x85", "\u202e", "\u202c", "\x1b", "\x07")


@pytest.fixture(scope="module")
def gateway():
    server = start(reply=REPLY)
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def umask():
    """What most shells have: a plain open() makes a file 0644 under it."""
    before = os.umask(0o022)
    yield
    os.umask(before)


def _env(gateway, tmp_path: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_"))}
    return {
        **base,
        "GATECELL_BASE_URL": gateway.base_url,
        "GATECELL_API_KEY": KEY,
        "GATECELL_HOME": str(tmp_path / "home"),
    }


def _map(gateway, tmp_path: Path, *argv: str, stdout: int | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, "map", "say {w}", "-m", "hostile-chat", "--no-progress", "--no-cache", *argv],
        input=b'{"w": 1}\n{"w": 2}\n',
        stdout=stdout if stdout is not None else subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(gateway, tmp_path),
        timeout=120,
    )


def _same_json_no_raw_controls(output: str) -> None:
    lines = [line for line in output.replace("\r\n", "\n").splitlines() if line.strip()]
    assert len(lines) == 2, output
    for raw in RAW:
        assert raw not in output, f"{raw!r} written raw"
    assert "café ünïcode" in output  # letters stay letters (no ensure_ascii)
    assert [json.loads(line)["text"] for line in lines] == [REPLY, REPLY]  # the same text, escaped


def test_map_to_a_terminal_shows_controls_escaped(gateway, tmp_path):
    leader, follower = pty.openpty()
    try:
        done = _map(gateway, tmp_path, stdout=follower)
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed and all was read
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert done.returncode == 0, done.stderr
    _same_json_no_raw_controls(b"".join(chunks).decode("utf-8"))


def test_map_to_a_pipe_or_a_file_is_the_same_json(gateway, tmp_path):
    piped = _map(gateway, tmp_path)
    assert piped.returncode == 0, piped.stderr
    _same_json_no_raw_controls(piped.stdout.decode("utf-8"))
    out = tmp_path / "out.jsonl"
    assert _map(gateway, tmp_path, "-o", str(out)).returncode == 0
    assert out.read_bytes() == piped.stdout


def test_map_output_is_a_new_0600_file_never_written_through_a_link(gateway, tmp_path):
    out = tmp_path / "out.jsonl"
    assert _map(gateway, tmp_path, "-o", str(out)).returncode == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600

    victim = tmp_path / "victim.txt"
    victim.write_text("not yours to empty")
    link = tmp_path / "link.jsonl"
    link.symlink_to(victim)
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "made-through-a-link.jsonl")
    for path, force in ((link, ()), (link, ("--force",)), (dangling, ()), (dangling, ("--force",))):
        done = _map(gateway, tmp_path, "-o", str(path), *force)
        assert done.returncode == 1
        assert done.stderr.decode().splitlines() == [
            f"gatecell: map: cannot write {path}: it is a symbolic link (not followed)"
        ]
    assert victim.read_text() == "not yours to empty" and link.is_symlink()
    assert not (tmp_path / "made-through-a-link.jsonl").exists()


def test_map_replaces_an_existing_file_only_with_force(gateway, tmp_path):
    out = tmp_path / "results.jsonl"
    out.write_text("yesterday's results\n")
    out.chmod(0o640)
    done = _map(gateway, tmp_path, "-o", str(out))
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == [f"gatecell: map: {out} exists; add --force to replace it"]
    assert out.read_text() == "yesterday's results\n"
    assert _map(gateway, tmp_path, "-o", str(out), "--force").returncode == 0
    assert [json.loads(line)["index"] for line in out.read_text().splitlines()] == [0, 1]


@pytest.fixture
def local(ipshell, local_gateway, monkeypatch, tmp_path):
    """The shell pointed at the local gateway, working in ``tmp_path``."""
    monkeypatch.setenv("GATECELL_API_KEY", local_gateway.api_key.reveal())
    monkeypatch.chdir(tmp_path)
    with pointed_at(ipshell, local_gateway.base_url) as magics:
        yield magics


def test_save_makes_a_new_0600_file_and_never_follows_a_link(local, cell_runner, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("not yours to write")
    (tmp_path / "link.png").symlink_to(victim)
    (tmp_path / "dangling.png").symlink_to(tmp_path / "made-through-a-link.png")
    mine = tmp_path / "mine.png"
    mine.write_text("the user's own picture")
    for line, said in (
        (
            "%image --size 64x64 --save link.png a cat",
            "cannot write link.png: it is a symbolic link (not followed)",
        ),
        (
            "%image --size 64x64 --save link.png --force a cat",
            "link.png: it is a symbolic link (not followed)",
        ),
        (
            "%image --size 64x64 --save dangling.png a cat",
            "dangling.png: it is a symbolic link (not followed)",
        ),
        ("%image --size 64x64 --save mine.png a cat", "--save: mine.png exists; add --force to replace it"),
    ):
        result, captured = cell_runner(line)
        assert not result.success and "Traceback" not in captured.stderr, (line, captured.stderr)
        (shown,) = captured.stderr.strip().splitlines()
        assert shown.endswith(said), (line, shown)
    assert victim.read_text() == "not yours to write" and mine.read_text() == "the user's own picture"
    assert not (tmp_path / "made-through-a-link.png").exists()

    for _ in range(2):  # the second run replaces the file the first one saved: the kernel's own
        result, _ = cell_runner("%image --size 64x64 --save new.png a cat")
        assert result.success, result.error_in_exec
        assert stat.S_IMODE((tmp_path / "new.png").stat().st_mode) == 0o600
    assert cell_runner("%image --size 64x64 --save mine.png --force a cat")[0].success
    assert mine.read_bytes().startswith(b"\x89PNG")
