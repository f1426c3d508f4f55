"""What an exchange cost, and who said so: never guessed.

In this order (`Pricing.cost`, the ``cost_source`` of each):

- ``gateway``: the gateway's own figure for that answer (LiteLLM's ``x-litellm-response-cost``
  header, or the ``cost`` of a stream's usage);
- ``model-info``: the tokens at the prices the gateway's model info gives (LiteLLM's
  ``GET /model/info``: ``input_cost_per_token``, ``output_cost_per_token``);
- ``prices``: the tokens at the prices the user gave. ``GATECELL_PRICES`` names a TOML or JSON
  file of US dollars per million tokens::

    {"gpt-4o": {"input": 2.5, "output": 10}}

    ["gpt-4o"]
    input = 2.5
    output = 10

Else the cost is unknown. A malformed prices file is a `ConfigError` naming the variable and
what is wrong.

Every figure is bounded before it is kept or summed: a price from 0 to `MAX_PRICE` dollars
per million tokens (a file's, a model info's), a cost from 0 to
`gatecell.wire.transport.results.MAX_COST` (the gateway's, or one worked out here); anything else
(``inf``, ``NaN``, ``1e308``, a negative) is refused or unknown, so a hostile gateway cannot
make a total ``inf`` in the log, and a price it gave earlier is checked again when read back.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gatecell.wire.transport.errors import ConfigError
from gatecell.wire.transport.results import dollars

__all__ = [
    "Price",
    "Pricing",
    "SOURCES",
    "MAX_PRICE",
    "load_prices",
    "prices_from",
    "model_info_prices",
    "per_token",
    "usage_cost",
]

SOURCES = ("gateway", "model-info", "prices")
MAX_PRICE = 100_000.0
"""Dollars per million tokens a price may be, at most (the dearest models ask hundreds)."""


@dataclass(frozen=True)
class Price:
    input: float  # per million prompt tokens
    output: float  # per million completion tokens (reasoning included)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Dollars for these tokens (``inf`` for counts past what a float holds: the callers
        keep only a finite cost within their bound)."""
        try:
            return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6
        except OverflowError:
            return math.inf


def _parse(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - exercised on 3.10 only
            import tomli as tomllib
        return tomllib.loads(text)
    return json.loads(text)


def _number(value: Any, cap: float = MAX_PRICE) -> bool:
    """A price: a number (not text) from 0 to ``cap``."""
    return isinstance(value, (int, float)) and dollars(value, cap) is not None


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
                f"{where}: {model!r} needs numbers 'input' and 'output' from 0 to {MAX_PRICE:,.0f} "
                "(dollars per million tokens)"
            )
        prices[model] = Price(float(entry["input"]), float(entry["output"]))
    return prices


def model_info_prices(body: Any) -> dict[str, Price]:
    """The prices in a LiteLLM ``/model/info`` body (``data[].model_name`` and its
    ``model_info`` costs per token), by model name; a model without both is left out."""
    entries = body.get("data") if isinstance(body, dict) else None
    prices = {}
    for entry in entries if isinstance(entries, list) else ():
        name = entry.get("model_name") if isinstance(entry, dict) else None
        info = entry.get("model_info") if isinstance(entry, dict) else None
        if not (isinstance(name, str) and isinstance(info, dict)):
            continue
        price = per_token(info.get("input_cost_per_token"), info.get("output_cost_per_token"))
        if price is not None and name not in prices:
            prices[name] = price
    return prices


def per_token(input_cost: Any, output_cost: Any) -> Price | None:
    """A `Price` from dollars per token (LiteLLM's model info, and the log's copy of it),
    None unless both are prices within `MAX_PRICE` per million."""
    if not (_number(input_cost, MAX_PRICE / 1e6) and _number(output_cost, MAX_PRICE / 1e6)):
        return None
    return Price(input_cost * 1e6, output_cost * 1e6)


def usage_cost(usage: Any) -> float | None:
    """The ``cost`` a usage block carries (LiteLLM's last stream chunk), whatever its type."""
    if not isinstance(usage, dict):
        usage = getattr(usage, "model_extra", None)
    value: Any = usage.get("cost") if isinstance(usage, dict) else None
    return dollars(value) if isinstance(value, (int, float)) else None


class Pricing:
    """The cost of an exchange, and its source (`SOURCES`): the gateway's own figure, else
    its model info's price for the model, else the user's price for it, else unknown.

    **Parameters:** ``model_info``: prices by (gateway address, model) from the gateways'
    model info; ``prices``: the user's, by model. (Gateways are named by their address,
    `keys.gateway_address`.)
    """

    def __init__(
        self,
        model_info: Mapping[tuple[str, str], Price] | None = None,
        prices: Mapping[str, Price] | None = None,
    ) -> None:
        self.model_info = dict(model_info or {})
        self.prices = dict(prices or {})

    def knows(self, gateway: str, model: str | None) -> bool:
        """Whether a model has a price here (else only the gateway can say what it cost)."""
        return model is not None and ((gateway, model) in self.model_info or model in self.prices)

    def cost(
        self,
        said: Any,
        gateway: str,
        model: str | None,
        prompt_tokens: int | None,
        completion_tokens: int | None,
    ) -> tuple[float | None, str | None]:
        """(dollars, source), or (None, None). ``said`` is the gateway's own figure, if any."""
        if isinstance(said, (int, float)) and dollars(said) is not None:
            return float(said), "gateway"
        if model is None or (prompt_tokens is None and completion_tokens is None):
            return None, None
        price = self.model_info.get((gateway, model))
        source = "model-info"
        if price is None:
            price, source = self.prices.get(model), "prices"
        cost = None if price is None else dollars(price.cost(prompt_tokens or 0, completion_tokens or 0))
        return (None, None) if cost is None else (cost, source)
