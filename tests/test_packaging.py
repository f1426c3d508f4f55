"""The wheel as a user installs it: it ships the tutorials, and `gatecell lab` finds them
wherever gatecell is installed, or says in one line how to install JupyterLab.

A throwaway venv gets the wheel (``--no-deps``) and, for its dependencies, a folder of links
to the project venv's packages, without JupyterLab; a second folder holds JupyterLab alone
and is put on PYTHONPATH where a test wants it. No network, a few seconds.
"""

from __future__ import annotations

import stat
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HINT = "gatecell: gatecell lab needs JupyterLab, which is not installed: pip install 'gatecell[lab]'\n"


def _is_jupyterlab(name: str) -> bool:
    return name == "jupyterlab" or (name.startswith("jupyterlab-") and name.endswith(".dist-info"))


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(tmp / "dist"), str(ROOT)], check=True, timeout=300)
    (wheel,) = (tmp / "dist").glob("gatecell-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [*pip, "--python", str(python), "install", "--no-deps", str(wheel)], check=True, timeout=300
    )
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    deps, lab = tmp / "deps", tmp / "lab"
    deps.mkdir()
    lab.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if "gatecell" in entry.name or entry.name.startswith("__editable__"):
            continue  # the project's own editable install: the wheel is what is tested
        (lab if _is_jupyterlab(entry.name) else deps).joinpath(entry.name).symlink_to(entry)
    (site / "project_deps.pth").write_text(f"{deps}\n")
    return {
        "wheel": wheel,
        "venv": venv,
        "lab": lab,
        "home": tmp / "home",
        "elsewhere": tmp_path_factory.mktemp("cwd"),
    }


def gatecell(installed: dict[str, Path], *args: str, lab: bool = True) -> subprocess.CompletedProcess:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(installed["home"]),
        "XDG_DATA_HOME": str(installed["home"] / "data"),
    }
    if lab:
        env["PYTHONPATH"] = str(installed["lab"])
    return subprocess.run(
        [str(installed["venv"] / "bin" / "gatecell"), *args],
        cwd=installed["elsewhere"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_wheel_ships_every_tutorial_and_nothing_else_of_notebooks(installed):
    tracked = subprocess.run(
        ["git", "ls-files", "notebooks/*.ipynb"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    with zipfile.ZipFile(installed["wheel"]) as whl:
        shipped = {n for n in whl.namelist() if n.startswith("gatecell/tutorials/")}
        assert shipped == {f"gatecell/tutorials/{Path(t).name}" for t in tracked}
        for name in tracked:
            assert whl.read(f"gatecell/tutorials/{Path(name).name}") == (ROOT / name).read_bytes()


def test_lab_without_jupyterlab_says_how_to_install_it(installed):
    done = gatecell(installed, "lab", lab=False)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", HINT)


def test_lab_help_and_dry_run_from_another_folder_use_a_copy_of_the_tutorials(installed):
    shown = gatecell(installed, "lab", "--help")
    assert shown.returncode == 0, shown.stderr
    assert "--dry-run" in shown.stdout and "GATECELL_NOTEBOOKS" in shown.stdout
    copy = installed["home"] / "data" / "gatecell" / "tutorials"
    done = gatecell(installed, "lab", "--dry-run", "--no-browser")
    assert done.returncode == 0, done.stderr
    assert f"-m jupyterlab --notebook-dir={copy} " in done.stdout and done.stdout.endswith(" --no-browser\n")
    assert 'websocket_max_message_size": 34603008' in done.stdout  # a 32 MiB file fits one message
    assert done.stderr == ""  # a dry run starts no gateway, so nothing to announce
    with zipfile.ZipFile(installed["wheel"]) as whl:
        shipped = {Path(n).name: whl.read(n) for n in whl.namelist() if n.startswith("gatecell/tutorials/")}
    assert {p.name: p.read_bytes() for p in copy.iterdir()} == shipped
    for folder in (copy, copy.parent):  # the copy is made in GATECELL_HOME's default: private (issue 20)
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    edited = copy / "01-quickstart.ipynb"
    edited.write_text("{}")  # the user's edits survive the next start
    assert gatecell(installed, "lab", "--dry-run").returncode == 0
    assert edited.read_text() == "{}"
