"""Exact cosine nearest neighbours over vectors, in bounded memory (numpy only).

The similarity of every query to every candidate is a matrix product, but the whole n x m
matrix is never held: queries go a chunk of rows at a time, so the peak is set by
``chunk_bytes`` (what one block of similarities and its sorting temporaries may take), not
by n x m. A 20,000 x 20,000 join holds about 64 MiB of blocks by default instead of 1.6 GB.

Results are exact (no approximate index) and stable: equal scores come in the candidates'
order, whatever the chunking. Rows are L2-normalised first (copies only of what is not
normalised already); a zero vector has similarity 0 with everything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gatecell.wire.transport.errors import InvalidRequest, echo
from gatecell.wire.transport.settings import env_number

if TYPE_CHECKING:
    import numpy as np

__all__ = ["check", "normalized", "top_k", "pairs_over", "groups", "chunk_bytes"]

_BYTES_PER_SCORE = 16  # a block's float32 scores, argpartition's int64 positions, a comparison


def chunk_bytes(value: int | None = None) -> int:
    """The memory a block of similarities may take: ``value``, else ``GATECELL_SEARCH_CHUNK_MB``
    (MiB), else 64 MiB."""
    if value is not None:
        return int(value)
    return int(env_number(None, "GATECELL_SEARCH_CHUNK_MB", 64.0) * 2**20)


def normalized(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` (float32, 2-d) with rows of length 1; itself when they are already."""
    import numpy as np

    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim != 2:
        raise InvalidRequest("vectors", f"must be a 2-d matrix, one row per text; got shape {matrix.shape}")
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    if np.allclose(norms, 1.0, atol=1e-4):
        return matrix
    norms[norms == 0] = 1.0
    return matrix / norms[:, None]


def _rows_per_block(m: int, budget: int) -> int:
    return max(1, budget // max(1, m * _BYTES_PER_SCORE))


def check(k: int | None, threshold: float | None) -> None:
    """Refuse, in one line, a ``k`` below 1 or a ``threshold`` that is no cosine."""
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
        raise InvalidRequest("k", f"must be a whole number >= 1; got {echo(k)}")
    if threshold is not None and (
        not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or not -1 <= threshold <= 1
    ):
        raise InvalidRequest(
            "threshold", f"must be a cosine similarity between -1 and 1; got {echo(threshold)}"
        )


def top_k(
    queries: np.ndarray,
    candidates: np.ndarray,
    k: int,
    threshold: float | None = None,
    chunk: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` candidates nearest each query by cosine: ``(positions, scores)``, each of
    shape (n, k), best first, ties in the candidates' order. A place with no candidate (fewer
    than ``k``, or below ``threshold``) holds position -1 and score NaN."""
    import numpy as np

    check(k, threshold)
    q, c = normalized(queries), normalized(candidates)
    if q.shape[0] and c.shape[0] and q.shape[1] != c.shape[1]:
        raise InvalidRequest("vectors", f"queries of {q.shape[1]} numbers against candidates of {c.shape[1]}")
    n, m = q.shape[0], c.shape[0]
    width = min(k, m)
    positions = np.full((n, k), -1, dtype=np.int64)
    scores = np.full((n, k), np.nan, dtype=np.float32)
    if not n or not m:
        return positions, scores
    step = _rows_per_block(m, chunk_bytes(chunk))
    for start in range(0, n, step):
        block = q[start : start + step] @ c.T
        best = _best(block, width)
        positions[start : start + step, :width] = best
        scores[start : start + step, :width] = np.take_along_axis(block, best, axis=1)
        del block
    if threshold is not None:
        below = ~(scores >= threshold)
        positions[below] = -1
        scores[below] = np.nan
    return positions, scores


def _best(block: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` highest of each row, best first, ties by position."""
    import numpy as np

    m = block.shape[1]
    if k == 1:
        return block.argmax(axis=1)[:, None]  # the first of equal maxima
    if k >= m:
        return np.argsort(-block, axis=1, kind="stable")
    part = np.argpartition(block, m - k, axis=1)[:, m - k :]
    values = np.take_along_axis(block, part, axis=1)
    order = np.lexsort((part, -values), axis=1)
    part = np.take_along_axis(part, order, axis=1)
    # A tie at the k-th place: argpartition may have taken a later candidate of that score.
    kth = np.take_along_axis(block, part[:, -1:], axis=1)
    crowded = (np.count_nonzero(block >= kth, axis=1) > k).nonzero()[0]
    for row in crowded:
        part[row] = np.argsort(-block[row], kind="stable")[:k]
    return part


def pairs_over(
    vectors: np.ndarray, threshold: float, chunk: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i, j), i < j, of rows whose cosine is at least ``threshold``: two arrays."""
    import numpy as np

    check(None, threshold)
    v = normalized(vectors)
    n = v.shape[0]
    left: list[np.ndarray] = []
    right: list[np.ndarray] = []
    step = _rows_per_block(n, chunk_bytes(chunk))
    for start in range(0, n, step):
        block = v[start : start + step] @ v.T
        rows, columns = np.nonzero(block >= threshold)
        rows += start
        later = columns > rows
        left.append(rows[later])
        right.append(columns[later])
        del block
    if not left:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(left).astype(np.int64), np.concatenate(right).astype(np.int64)


def groups(n: int, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The connected groups of ``n`` rows linked by the pairs (``left[i]``, ``right[i]``): a
    group number per row, 0, 1, 2... in the order of each group's first row."""
    import numpy as np

    label = np.arange(n, dtype=np.int64)
    if len(left):
        while True:  # each linked pair takes the smaller label, then labels follow their labels
            low = np.minimum(label[left], label[right])
            before = label.copy()
            np.minimum.at(label, left, low)
            np.minimum.at(label, right, low)
            label = label[label]
            if np.array_equal(label, before):
                break
    return np.unique(label, return_inverse=True)[1].astype(np.int64)
