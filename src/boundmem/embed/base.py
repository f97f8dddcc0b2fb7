"""What every embedder is (text -> unit vectors) and the per-text cache the model-backed ones share."""
from __future__ import annotations

import threading
from typing import Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, rows of unit norm."""


class CachedEmbedder:
    """Keeps each distinct text's vector: an assistant re-embeds the same utterance and the same
    stored sentences many times (extraction, maintenance, retrieval), and a forward pass costs
    milliseconds on a CPU. Subclasses only encode texts not seen before."""

    name = "embedder"
    dim = 0
    max_cached = 200_000

    def __init__(self) -> None:
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def _encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def clear_cache(self) -> None:
        """Forget every vector (benchmarks: so each sentence is really encoded)."""
        with self._lock:
            self._cache.clear()

    def encode_uncached(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of texts not to be kept here (queries: a Memory's query cache bounds those, embed/cache.py)."""
        texts = list(texts)
        hit = [self._cache.get(t) for t in texts]
        if all(v is not None for v in hit):
            return np.vstack(hit) if texts else np.zeros((0, self.dim), np.float32)
        return np.asarray(self._encode(texts), dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        # the answer is built from this call's own lookups, never re-read from the cache: another thread may clear
        # it (clear_cache, or the size bound) between our write and our read
        found = {t: self._cache.get(t) for t in dict.fromkeys(texts)}
        missing = [t for t, v in found.items() if v is None]
        if missing:
            vecs = self._encode(missing)
            with self._lock:
                if len(self._cache) > self.max_cached:
                    self._cache.clear()
                for t, v in zip(missing, vecs):
                    found[t] = self._cache[t] = np.asarray(v, dtype=np.float32)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.vstack([found[t] for t in texts])
