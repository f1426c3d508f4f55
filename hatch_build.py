"""Build hook: the tutorials of notebooks/ ship in the wheel as ``gatecell/tutorials/``.

``gatecell lab`` copies them out of an installed gatecell before opening them. The
repository keeps them in notebooks/ (nbval runs them there), and editable installs use that
folder itself, so they get no copy.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

TUTORIAL = re.compile(r"^(\d\d-[a-z0-9-]+|dashboard)\.ipynb$")  # as notebooks/conftest.py collects


class TutorialsHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version != "standard":
            return
        for path in sorted(Path(self.root, "notebooks").glob("*.ipynb")):
            if TUTORIAL.match(path.name):
                build_data["force_include"][str(path)] = f"gatecell/tutorials/{path.name}"
