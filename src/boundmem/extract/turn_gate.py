"""A cheap turn gate: which user turns are worth a MiniLM forward pass at all.

Embedding dominates local extraction, yet most user turns ("Thanks!", "Navigate to the
airport.") can never be picked by the trained head. The gate is a logistic regression over
features that cost about 0.2 ms a turn: hashed word uni/bigrams and character n-grams, the
preference-cue flag (`states_preference`) and the head's vocabulary hits (as the head sees
them, and with every common word counted, since bare commands naming a topic word are what
the head most often picks without a cue). It is distilled from the head itself (label: the
full extractor lets this turn count, see `boundmem_bench/train/gate.py`) and its threshold keeps 99.5% of
the turns the full extractor picks, so what it rejects is almost only turns the head would
have ignored anyway. It cannot be much tighter: the head also picks many bare commands
("Play news radio"), which n-grams tell apart from one-off requests only roughly.

The gate belongs to one trained head: its vocabulary-hit features are aligned with the
head's labels, so it is used only where that head is (`fits`).
"""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
BUCKETS = 1 << 13
CHAR_N = (3, 4, 5)


def _bucket(feature: str, buckets: int) -> int:
    # crc32, not hash(): Python salts str hashes per process, and the weights outlive the process
    return zlib.crc32(feature.encode("utf-8")) % buckets


def text_features(text: str, buckets: int = BUCKETS) -> tuple[list[int], list[float]]:
    """Hashed buckets with weights: word uni/bigrams (with sentence start/end) and character
    n-grams within words; each group is scaled to unit norm so long turns do not dominate."""
    words = _WORD.findall(text.lower())
    toks = ["<s>", *words, "</s>"]
    wf = [f"w:{w}" for w in words] + [f"b:{a} {b}" for a, b in zip(toks, toks[1:])]
    cf = []
    for w in words:
        p = f" {w} "
        for n in CHAR_N:
            cf.extend(f"c:{p[i:i + n]}" for i in range(len(p) - n + 1))
    idx: list[int] = []
    val: list[float] = []
    for group in (wf, cf):
        if group:
            s = 1.0 / np.sqrt(len(group))
            idx.extend(_bucket(f, buckets) for f in group)
            val.extend([s] * len(group))
    return idx, val


def dense_features(cued: Sequence[bool], hits: np.ndarray, all_hits: np.ndarray) -> np.ndarray:
    """(turns, 4 + 2 * labels): cue flag, strongest hit, hits per head label (as the head gets them:
    common words only in cued turns), then the same with every common word counted."""
    n = len(cued)
    parts = [np.asarray(cued, np.float32).reshape(n, 1)]
    for h in (hits, all_hits):
        h = np.asarray(h, np.float32).reshape(n, -1)
        parts += [h.max(1, keepdims=True) if h.shape[1] else np.zeros((n, 1), np.float32), h]
    return np.hstack(parts)


def feature_matrix(texts: Sequence[str], cued: Sequence[bool], hits: np.ndarray, all_hits: np.ndarray,
                   buckets: int = BUCKETS) -> np.ndarray:
    """Dense (turns, buckets + dense features) matrix, for training."""
    D = dense_features(cued, hits, all_hits)
    X = np.zeros((len(texts), buckets + D.shape[1]), np.float32)
    for j, t in enumerate(texts):
        idx, val = text_features(t, buckets)
        np.add.at(X[j], idx, val)
    X[:, buckets:] = D
    return X


@dataclass
class TurnGate:
    schema_name: str
    labels: list[str]        # the head labels the vocabulary-hit features follow
    w_text: np.ndarray       # (buckets,)
    w_dense: np.ndarray      # (4 + 2 * len(labels),)
    b: float
    threshold: float         # pass if score >= threshold (a logit)

    @property
    def buckets(self) -> int:
        return int(self.w_text.shape[0])

    def fits(self, head) -> bool:
        """True if the vocabulary-hit features line up with this head's labels."""
        return head is not None and head.schema_name == self.schema_name and list(head.labels) == self.labels

    def scores(self, texts: Sequence[str], cued: Sequence[bool], hits: np.ndarray, all_hits: np.ndarray) -> np.ndarray:
        out = dense_features(cued, hits, all_hits) @ self.w_dense + self.b
        for j, t in enumerate(texts):
            idx, val = text_features(t, self.buckets)
            if idx:
                out[j] += float(np.dot(self.w_text[idx], val))
        return out

    def passes(self, texts: Sequence[str], cued: Sequence[bool], hits: np.ndarray, all_hits: np.ndarray) -> np.ndarray:
        """Boolean mask: the turns worth embedding."""
        if not len(texts):
            return np.zeros(0, bool)
        return self.scores(texts, cued, hits, all_hits) >= self.threshold

    def save(self, path: str | Path) -> None:
        np.savez_compressed(path, w_text=self.w_text.astype(np.float32), w_dense=self.w_dense.astype(np.float32),
                            b=np.float32(self.b), threshold=np.float32(self.threshold),
                            labels=np.array(self.labels), meta=np.array([self.schema_name]))

    @classmethod
    def load(cls, path) -> "TurnGate":
        with np.load(path, allow_pickle=False) as z:
            return cls(schema_name=str(z["meta"][0]), labels=[str(x) for x in z["labels"]],
                       w_text=z["w_text"].astype(np.float32), w_dense=z["w_dense"].astype(np.float32),
                       b=float(z["b"]), threshold=float(z["threshold"]))


BUNDLED = "incar_gate.npz"


def bundled_gate() -> Optional[TurnGate]:
    """The gate shipped with the in-car head, or None if the artefact is absent."""
    path = Path(__file__).with_name("data") / BUNDLED
    return TurnGate.load(path) if path.is_file() else None
