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

__all__ = ["Price", "Pricing", "SOURCES", "load_prices", "prices_from", "model_info_prices", "usage_cost"]

SOURCES = ("gateway", "model-info", "prices")


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
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


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
        per_token: list[Any] = [info.get("input_cost_per_token"), info.get("output_cost_per_token")]
        if all(_number(value) for value in per_token) and name not in prices:
            prices[name] = Price(per_token[0] * 1e6, per_token[1] * 1e6)
    return prices


def usage_cost(usage: Any) -> float | None:
    """The ``cost`` a usage block carries (LiteLLM's last stream chunk), whatever its type."""
    if not isinstance(usage, dict):
        usage = getattr(usage, "model_extra", None)
    value: Any = usage.get("cost") if isinstance(usage, dict) else None
    return float(value) if _number(value) else None


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
        if _number(said):
            return float(said), "gateway"
        if model is None or (prompt_tokens is None and completion_tokens is None):
            return None, None
        price = self.model_info.get((gateway, model))
        source = "model-info"
        if price is None:
            price, source = self.prices.get(model), "prices"
        if price is None:
            return None, None
        return price.cost(prompt_tokens or 0, completion_tokens or 0), source
