"""``df.gatecell.map(template, ...)``: prompts over a DataFrame (or a Series) from pandas itself.

``import gatecell.pandas`` registers a ``gatecell`` accessor on DataFrames and Series through
pandas' own extension API (``pandas.api.extensions``), as pint-pandas and other libraries
do: registering is a side effect on pandas' classes, so it happens when asked for, never on
``import gatecell`` (which must not import pandas). The accessor's ``map`` is `Gateway.map`
over the object, with a default `Gateway` (settings from the environment, as ``Gateway()``
takes them; none: the local gateway) made on first use and shared, or ``gateway=`` yours::

    import gatecell.pandas

    df[["sentiment", "product", "stars"]] = df.gatecell.map("Read this review: {review}", schema=Review).frame
    df["label"] = df["review"].gatecell.map("Sentiment of: {item}", choices=["positive", "negative"]).text
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from gatecell.batch import Batch, MapOptions
    from gatecell.gateway import Gateway

__all__ = ["GatecellAccessor", "default_gateway"]

_made: list[Gateway] = []
_making = threading.Lock()


def default_gateway() -> Gateway:
    """The `Gateway` the accessor uses when not given one: made on first use, then shared."""
    with _making:
        if not _made:
            from gatecell.gateway import Gateway

            _made.append(Gateway())
        return _made[0]


@pd.api.extensions.register_dataframe_accessor("gatecell")
@pd.api.extensions.register_series_accessor("gatecell")
class GatecellAccessor:
    """``obj.gatecell``: gatecell on a pandas DataFrame or Series.

    **Parameters:**

    * **obj** - the DataFrame or Series (pandas hands it over).
    """

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def map(
        self,
        template: str,
        *,
        gateway: Gateway | None = None,
        progress: bool = True,
        **options: Unpack[MapOptions],
    ) -> Batch:
        """`Gateway.map` of ``template`` over these rows (a DataFrame's columns as its
        ``{field}``s, a Series' values as ``{item}``): a `Batch` on this index, with
        ``schema=`` or ``choices=`` typed (``.frame``, ``.text``, ``.errors``)."""
        return (gateway or default_gateway()).map(template, self._obj, progress=progress, **options)
