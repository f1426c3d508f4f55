"""`Batch`: what a map over rows gives back, row by row, aligned to the input."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from gatecell.wire.transport.errors import GatecellError, InvalidRequest
from gatecell.wire.typed.structured import parse, parse_reply

if TYPE_CHECKING:
    from gatecell.wire.apis.spec import Usage
    from gatecell.wire.typed.structured import Schema

__all__ = ["Batch", "Row", "Tokens", "BatchError"]


class Tokens(NamedTuple):
    """A row's token usage, in chat terms whatever the API (a tuple: the garbage collector
    skips it, which matters when a batch keeps 100,000 of them)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int

    @classmethod
    def of(cls, usage: Usage | None) -> Tokens | None:
        if usage is None:
            return None
        return cls(usage.prompt_tokens or 0, usage.completion_tokens or 0, usage.total_tokens or 0)


@dataclass(slots=True)
class Row:
    """One row's outcome: the reply text, or the one-line error, and where the answer came from.

    ``latency`` is the seconds the row took, retries and waits included; ``cached`` says it
    was answered from the log. ``reply`` is the reply body as the gateway sent it (JSON; for
    a row from the log, the body logged then, None if that reply was streamed). Rows keep the
    body as bytes and parse it when asked: a batch of many rows stays small and cheap to keep.
    ``value`` is the answer's validated value when the batch had a ``schema`` (a row whose
    answer never validated has none, and its ``error`` says why), read from the answer when
    asked, for the same reason: a model instance per row is several objects the garbage
    collector would walk, again and again, while the batch runs. ``cost`` is what the row
    cost in US dollars when known, and ``cost_source`` who said (``gateway``, ``model-info``,
    ``prices``; see `gatecell.store.prices`); a row from the log cost nothing and has none.
    """

    label: Any
    text: str | None = None
    error: str | None = None
    usage: Tokens | None = None
    latency: float | None = None
    cached: bool = False
    request_id: str | None = None
    endpoint: str | None = None
    model: str | None = None
    attempts: int = 0
    body: Any = None
    schema: Schema | None = field(default=None, repr=False)
    cost: float | None = None
    cost_source: str | None = None

    @property
    def reply(self) -> Any:
        body = self.body
        return json.loads(body) if isinstance(body, bytes) else body

    @property
    def value(self) -> Any:
        schema = self.schema
        if schema is None or self.error is not None:
            return None
        value, _ = parse(self.text, schema)  # the answer validated once: it does again
        if value is None and self.body is not None:  # a messages reply's tool call holds it
            value, _ = parse_reply(self.reply, self.text, schema)
        return value


class BatchError(GatecellError):
    """A row failed with ``on_error="raise"``; ``batch`` holds the rows done until then."""

    def __init__(self, message: str, batch: Batch) -> None:
        self.batch = batch
        super().__init__(message)


_USAGE = ("prompt_tokens", "completion_tokens", "total_tokens")


class Batch:
    """The outcome of ``gw.map``: one `Row` per input row, in input order.

    ``text`` and ``errors`` follow the input: pandas Series on its index for a DataFrame or
    Series, a list (``text``) and a dict by position (``errors``) otherwise. A row that never
    ran (the batch was interrupted first) has neither text nor error.

    With a ``schema`` (a `gatecell.wire.typed.structured.Schema`), ``parsed`` holds each row's
    validated value and ``frame`` the typed columns (`gatecell.batch.frame`); with choices,
    ``text`` holds each row's label (a Categorical for pandas input).
    """

    def __init__(
        self,
        labels: list[Any],
        rows: list[Row | None],
        *,
        index: Any = None,
        pandas: bool = False,
        interrupted: bool = False,
        seconds: float = 0.0,
        requests: int = 0,
        rate_limited: int = 0,
        schema: Schema | None = None,
    ) -> None:
        self.labels = labels
        self.rows = rows
        self.index = index
        self.pandas = pandas
        self.interrupted = interrupted
        self.seconds = seconds
        self.requests = requests  # HTTP requests sent, retries included
        self.rate_limited = rate_limited  # 429s among them
        self.schema = schema
        self._read: list[Any] | None = None

    # -- counts -----------------------------------------------------------------------

    @property
    def done(self) -> int:
        """Rows answered (from the gateway or from the log)."""
        return sum(1 for r in self.rows if r is not None and r.error is None)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.rows if r is not None and r.error is not None)

    @property
    def not_run(self) -> int:
        return sum(1 for r in self.rows if r is None)

    @property
    def cached(self) -> int:
        return sum(1 for r in self.rows if r is not None and r.cached)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[Row | None]:
        return iter(self.rows)

    # -- views ------------------------------------------------------------------------

    @property
    def results(self) -> list[Row | None]:
        """Per input row: its `Row` (reply, usage, provenance, error), or None if it never ran."""
        return self.rows

    @property
    def text(self) -> Any:
        """The reply texts, None where a row failed or never ran; with choices, the labels."""
        schema = self.schema
        if schema is None or schema.kind != "choices":
            texts = [None if r is None else r.text for r in self.rows]
            if self.pandas:
                import pandas as pd

                return pd.Series(texts, index=self._index(), dtype=object, name="text")
            return texts
        if self.pandas:
            import pandas as pd

            return pd.Series(self._labels(schema), index=self._index(), name="text")
        return [schema.label(value) if value is not None else None for value in self._values()]

    @property
    def parsed(self) -> Any:
        """The validated values (an object Series for pandas input), None where a row failed,
        never ran, or the batch had no schema."""
        values = self._values()
        if self.pandas:
            import pandas as pd

            return pd.Series(values, index=self._index(), dtype=object, name="parsed")
        return values

    @property
    def frame(self) -> Any:
        """The typed columns of the answers: `to_frame` with lists exploded into rows."""
        return self.to_frame()

    def to_frame(self, *, explode: bool = True) -> Any:
        """A DataFrame with one column per field of the schema, typed, on the input's index
        (see `gatecell.batch.frame`); ``explode=False`` keeps a ``list[...]`` answer in one row."""
        if self.schema is None:
            raise InvalidRequest(
                "frame", "this batch ran without schema= or choices=: its answers are text (see .text)"
            )
        from .frame import frame

        return frame(self._values(), self._index(), self.schema, explode=explode)

    def _values(self) -> list[Any]:
        """Each row's value (None where it has none), read from the answers once."""
        if self._read is None:
            self._read = [r.value if r is not None else None for r in self.rows]
        return self._read

    def _labels(self, schema: Schema) -> Any:
        """The rows' labels as a Categorical of the choices."""
        import pandas as pd

        labels = [schema.label(value) if value is not None else None for value in self._values()]
        return pd.Categorical(labels, categories=list(schema.labels))

    @property
    def errors(self) -> Any:
        """The failed rows' one-line errors, by label (a Series for pandas input)."""
        failed = [i for i, r in enumerate(self.rows) if r is not None and r.error is not None]
        errors = [self.rows[i].error for i in failed]  # type: ignore[union-attr]
        if self.pandas:
            import pandas as pd

            return pd.Series(errors, index=self._index(failed), dtype=object, name="error")
        return {self.labels[i]: e for i, e in zip(failed, errors, strict=True)}

    @property
    def usage(self) -> dict[str, Any]:
        """Tokens of the rows answered, how many were sent or came from the log, and what
        they cost: ``cost`` the known costs added (None when none is known), ``cost_source``
        where they came from (``gateway``, ``model-info``, ``prices``, several joined by
        ``+``), ``unpriced_rows`` the rows sent whose cost is unknown."""
        from gatecell.store.prices import SOURCES

        totals: dict[str, Any] = dict.fromkeys(_USAGE, 0)
        cost: float | None = None
        sources: set[str] = set()
        unpriced = 0
        for r in self.rows:
            if r is not None and r.usage is not None:
                for name in _USAGE:
                    totals[name] += getattr(r.usage, name)
            if r is None or r.cached:
                continue
            if r.cost is not None:  # a row that failed may have cost something too (a typed one)
                cost = (cost or 0.0) + r.cost
                sources.update((r.cost_source or "").split("+"))
            elif r.error is None:
                unpriced += 1
        totals["requests"] = self.requests
        totals["cached_rows"] = self.cached
        totals["cost"] = cost
        totals["cost_source"] = "+".join(s for s in SOURCES if s in sources) or None
        totals["unpriced_rows"] = unpriced
        return totals

    def to_pandas(self) -> Any:
        """One row per input row: text, error, tokens, latency, cached, request id, cost and
        its source."""
        import pandas as pd

        records = []
        for r in self.rows:
            usage = r.usage if r is not None else None
            records.append(
                {
                    "text": r.text if r else None,
                    "error": r.error if r else None,
                    "prompt_tokens": usage.prompt_tokens if usage else None,
                    "completion_tokens": usage.completion_tokens if usage else None,
                    "total_tokens": usage.total_tokens if usage else None,
                    "latency": r.latency if r else None,
                    "cached": r.cached if r else None,
                    "request_id": r.request_id if r else None,
                    "cost": r.cost if r else None,
                    "cost_source": r.cost_source if r else None,
                }
            )
        frame = pd.DataFrame.from_records(records, columns=list(records[0]) if records else None)
        frame.index = self._index() if self.pandas else pd.RangeIndex(len(records))
        if self.schema is not None and self.schema.kind == "choices":
            frame["text"] = self._labels(self.schema)
        return frame

    def _index(self, positions: list[int] | None = None) -> Any:
        import pandas as pd

        if self.index is not None and len(self.index) == len(self.rows):
            return self.index if positions is None else self.index[positions]
        labels = self.labels if positions is None else [self.labels[i] for i in positions]
        return pd.Index(labels)

    def __repr__(self) -> str:
        total = len(self.rows)
        parts = [f"{self.done}/{total} done"]
        if self.cached:
            parts.append(f"{self.cached} from the log")
        if self.failed:
            parts.append(f"{self.failed} failed")
        if self.not_run:
            parts.append(f"{self.not_run} not run")
        tokens = self.usage["total_tokens"]
        parts.append(f"{tokens:,} tokens")
        parts.append(f"{self.seconds:.1f} s")
        head = "Batch(" + ", ".join(parts) + (", interrupted" if self.interrupted else "") + ")"
        if self.failed:
            first = next(r for r in self.rows if r is not None and r.error)
            head += f"\n  first error (row {first.label!r}): {first.error}"
        return head
