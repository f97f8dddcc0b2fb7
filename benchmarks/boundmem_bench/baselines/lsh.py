"""Random-projection LSH as in Think-in-Memory: bucket = argmax([xR; -xR]) with R of shape (d, b/2), so b buckets."""
from __future__ import annotations

import numpy as np


class RandomProjectionLSH:
    """Fixed by (dim, buckets, seed): the same vector always lands in the same bucket, across runs and processes."""

    def __init__(self, dim: int, buckets: int = 16, seed: int = 0):
        if buckets < 2 or buckets % 2:
            raise ValueError("buckets must be an even number >= 2")
        self.dim, self.buckets, self.seed = dim, buckets, seed
        self.projection = np.random.default_rng(seed).standard_normal((dim, buckets // 2)).astype(np.float32)

    def scores(self, x: np.ndarray) -> np.ndarray:
        """(n, buckets) projection scores; a row's largest entry is its bucket."""
        x = np.atleast_2d(np.asarray(x, np.float32))
        if x.shape[1] != self.dim:
            raise ValueError(f"expected vectors of dimension {self.dim}, got {x.shape[1]}")
        p = x @ self.projection
        return np.concatenate([p, -p], axis=1)

    def bucket(self, x: np.ndarray) -> np.ndarray:
        return np.argmax(self.scores(x), axis=1)

    def probe_order(self, x: np.ndarray) -> list[int]:
        """Buckets from the query's own to the least likely: where to look next when a bucket is empty."""
        s = self.scores(x)[0]
        return [int(i) for i in np.lexsort((np.arange(len(s)), -s))]
