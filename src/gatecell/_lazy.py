"""Names a package exports without importing their modules until first asked for: what keeps
``import gatecell`` and ``%load_ext gatecell`` fast."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing itself would cost ``import gatecell`` a third of its time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def exports(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each of ``names`` from its module (the
    table's value), imported on first use and kept in the package from then on."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib  # here: not a cost of the import itself

        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
