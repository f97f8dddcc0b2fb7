"""A trained linear head over sentence embeddings for one known schema (the bundled in-car one).

The head scores every detail category of the schema it was trained for plus a "no lasting
preference" class. It is used for that schema and for any pruned version of it: it still
knows the categories the user opted out of, so a sentence about an opted-out category is
recognised as such and dropped instead of being squeezed into a neighbouring category
(the paper's main out-of-schema failure). Other schemas fall back to zero-shot scoring.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from ..schema.model import Schema

SEP = "\x1f"


@dataclass(frozen=True)
class Thresholds:
    """Decision rule (tuned on users 51-100 only): the conversation's best sentence needs `first`,
    any further one `further`; a vocabulary hit adds `vocab_boost` to a category's logit. A bare
    command with no preference cue ("Set the lighting to blue") needs `bare` instead of `first`:
    it is usually a one-off wish, though the dataset sometimes labels such turns as preferences."""

    first: float = 0.3
    further: float = 0.9
    vocab_boost: float = 2.5
    bare: float = 0.3


@dataclass
class TrainedHead:
    schema_name: str
    embedder: str
    labels: list[str]                     # detail paths "main/sub/detail"; the extra last class is "none"
    vocab: list[tuple[str, ...]]          # attribute vocabulary per label (for vocabulary hits)
    W: np.ndarray                         # (dim, len(labels) + 1)
    b: np.ndarray                         # (len(labels) + 1,)
    thresholds: Thresholds = field(default_factory=Thresholds)

    @property
    def dim(self) -> int:
        return int(self.W.shape[0])

    def covers(self, schema: Schema, embedder_name: str, dim: int) -> bool:
        """True if `schema` is this head's schema or a pruned version of it, and the embedder matches."""
        if schema.name != self.schema_name or embedder_name != self.embedder or dim != self.dim:
            return False
        known = set(self.labels)
        return all(str(r.path) in known for r in schema.details())

    def logits(self, X: np.ndarray) -> np.ndarray:
        return X.astype(np.float32) @ self.W + self.b

    def probabilities(self, X: np.ndarray) -> np.ndarray:
        """Softmax over the labels plus "no preference" (last column), without vocabulary boosts."""
        Z = self.logits(X)
        Z = Z - Z.max(1, keepdims=True)
        P = np.exp(Z)
        return P / P.sum(1, keepdims=True)

    def save(self, path: str | Path) -> None:
        t = self.thresholds
        np.savez_compressed(
            path, W=self.W.astype(np.float16), b=self.b.astype(np.float32),
            labels=np.array(self.labels), vocab=np.array([SEP.join(v) for v in self.vocab]),
            meta=np.array([self.schema_name, self.embedder]),
            thresholds=np.array([t.first, t.further, t.vocab_boost, t.bare], dtype=np.float32))

    @classmethod
    def load(cls, path) -> "TrainedHead":
        with np.load(path, allow_pickle=False) as z:
            th = [float(x) for x in z["thresholds"]]
            return cls(schema_name=str(z["meta"][0]), embedder=str(z["meta"][1]),
                       labels=[str(x) for x in z["labels"]],
                       vocab=[tuple(v for v in str(x).split(SEP) if v) for x in z["vocab"]],
                       W=z["W"].astype(np.float32), b=z["b"].astype(np.float32),
                       thresholds=Thresholds(*th))


BUNDLED = "incar_head.npz"


def bundled_head() -> Optional[TrainedHead]:
    """The head shipped for the in-car schema, or None if the artefact is absent."""
    path = Path(__file__).with_name("data") / BUNDLED
    return TrainedHead.load(path) if path.is_file() else None
