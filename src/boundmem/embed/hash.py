"""A model-free embedder for tests and tiny installs."""
from __future__ import annotations

from typing import Sequence

import numpy as np


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
