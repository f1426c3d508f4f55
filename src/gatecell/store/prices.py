"""Prices the user gave, for the cost column of ``usage``: never guessed.

``GATECELL_PRICES`` names a TOML or JSON file of US dollars per million tokens::

    {"gpt-4o": {"input": 2.5, "output": 10}}

    ["gpt-4o"]
    input = 2.5
    output = 10

A model missing from the file has no cost (shown as unknown). A malformed file is a
`ConfigError` naming the variable and what is wrong.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gatecell.wire.errors import ConfigError

__all__ = ["Price", "load_prices", "prices_from"]


@dataclass(frozen=True)
class Price:
    input: float  # per million prompt tokens
    output: float  # per million completion tokens (reasoning included)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


def _parse(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - exercised on 3.10 only
            import tomli as tomllib
        return tomllib.loads(text)
    return json.loads(text)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def load_prices(path: Path) -> dict[str, Price]:
    """The prices in ``path``, by model name."""
    where = f"GATECELL_PRICES ({path})"
    try:
        data = _parse(path)
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror or exc}") from None
    except ValueError as exc:  # json.JSONDecodeError and tomllib.TOMLDecodeError are ValueErrors
        raise ConfigError(f"{where}: not valid {path.suffix.lstrip('.') or 'JSON'}: {exc}") from None
    return prices_from(data, where)


def prices_from(data: Any, where: str = "prices") -> dict[str, Price]:
    """Prices from their table (``{model: {"input": ..., "output": ...}}``), by model name;
    ``where`` names the source in the error of a malformed one."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a table of models, got {type(data).__name__}")
    prices = {}
    for model, entry in data.items():
        if not (isinstance(entry, dict) and _number(entry.get("input")) and _number(entry.get("output"))):
            raise ConfigError(
                f"{where}: {model!r} needs numbers 'input' and 'output' (dollars per million tokens)"
            )
        prices[model] = Price(float(entry["input"]), float(entry["output"]))
    return prices
