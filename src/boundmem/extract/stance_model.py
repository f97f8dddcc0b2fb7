"""Like or dislike, learned: the clause's MiniLM embedding plus the stance cues as features.

The cue patterns of `stance.py` catch the phrasings someone thought of; "Heavy metal gives me a
headache" or "Self-checkouts are the bane of my life" need no negation word to turn against their
object. So where a clause carries one value, this model decides its polarity: a logistic regression
over [cue flags, embedding] (`boundmem_bench/train/stance.py`: the multi-domain corpus's and the challenge set's
train splits, SLURP devel's train part). The cues stay, as features and for what they decide alone:
the scope of a negation when a clause holds several values, "don't mind", an avoidance category.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .stance import cue_flags

CUE_WEIGHT = 3.0   # cue flags are scaled so the optimiser treats them like the unit-norm embedding


@dataclass
class StanceModel:
    embedder: str
    W: np.ndarray   # (n_cues + dim, 2): like, dislike
    b: np.ndarray

    @property
    def dim(self) -> int:
        return int(self.W.shape[0]) - len(cue_flags(""))

    def fits(self, embedder_name: str, dim: int) -> bool:
        return embedder_name == self.embedder and dim == self.dim

    def dislike_probability(self, texts: Sequence[str], X: np.ndarray) -> np.ndarray:
        F = features(texts, X)
        Z = F @ self.W + self.b
        Z = Z - Z.max(1, keepdims=True)
        P = np.exp(Z)
        return (P[:, 1] / P.sum(1)).astype(np.float32)

    def save(self, path: str | Path) -> None:
        np.savez_compressed(path, W=self.W.astype(np.float32), b=self.b.astype(np.float32), meta=np.array([self.embedder]))

    @classmethod
    def load(cls, path: str | Path) -> "StanceModel":
        with np.load(path, allow_pickle=False) as z:
            return cls(embedder=str(z["meta"][0]), W=z["W"], b=z["b"])


def features(texts: Sequence[str], X: np.ndarray) -> np.ndarray:
    F = np.array([cue_flags(t) for t in texts], np.float32).reshape(len(texts), -1) * CUE_WEIGHT
    return np.hstack([F, X.astype(np.float32)])


BUNDLED = "stance.npz"


def bundled_stance() -> Optional[StanceModel]:
    path = Path(__file__).with_name("data") / BUNDLED
    return StanceModel.load(path) if path.is_file() else None
