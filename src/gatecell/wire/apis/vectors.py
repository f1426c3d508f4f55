"""`Vectors`: what ``Gateway.embed`` returns, a numpy float32 matrix with ``.meta``.

A module of its own because it imports numpy: `gatecell.wire.apis.embeddings` (imported with the
client) does not.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from .embeddings import EmbedMeta

__all__ = ["Vectors"]


class Vectors(np.ndarray):
    """A float32 array of shape (n, d), one row per text in the order given, with ``.meta``
    (an `EmbedMeta`: model, dimensions, whether rows are L2-normalised, what was sent and
    what it cost). It is an ``np.ndarray``; slices and copies keep the meta, and what numpy
    computes from it (products, comparisons, sums) are plain arrays and numbers.

    **Parameters:** ``matrix`` (anything ``np.asarray`` takes, made float32), ``meta``.
    """

    meta: EmbedMeta | None

    def __new__(cls, matrix: Any, meta: EmbedMeta | None = None) -> Vectors:
        made = np.asarray(matrix, dtype=np.float32).view(cls)
        made.meta = meta
        return made

    def __array_finalize__(self, obj: Any) -> None:
        self.meta = getattr(obj, "meta", None)

    def __array_wrap__(self, array: Any, context: Any = None, return_scalar: bool = False) -> Any:
        """What numpy computes from vectors (``v @ w.T``, ``v == w``, ``.all()``) is a plain
        array or scalar: it is no longer the texts' vectors, and ``.meta`` would lie."""
        plain = array.view(np.ndarray) if isinstance(array, np.ndarray) else array
        return plain[()] if return_scalar or getattr(plain, "ndim", 1) == 0 else plain

    def __reduce__(self) -> Any:  # pickled with its meta (Dask ships it between processes)
        rebuild, args, state = cast("tuple[Any, Any, Any]", super().__reduce__())
        return rebuild, args, (state, self.meta)

    def __setstate__(self, state: Any) -> None:
        array_state, self.meta = state
        super().__setstate__(array_state)
