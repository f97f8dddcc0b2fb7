"""Per-schema data the local extractor needs, computed once per schema and reused.

Prototype rows describe each detail category (name + description, and each example
phrasing) for zero-shot scoring; attribute rows map a sentence to the nearest vocabulary
item. Both are embedded lazily (prototypes in one batch on first zero-shot use, attributes
in one batch on first need), so a schema served by the trained head costs almost nothing.
"""
from __future__ import annotations

import hashlib
import threading
from typing import Optional

import numpy as np

from ..schema.model import DetailRef, Schema
from .vocabulary import VocabularyIndex


def fingerprint(schema: Schema) -> str:
    """Identity of a schema's content (two equal schemas share prototypes; any edit changes it)."""
    return hashlib.sha1(schema.model_dump_json().encode()).hexdigest()


def describe(ref: DetailRef) -> str:
    d = ref.detail
    text = f"{d.name} ({ref.sub.name}, {ref.main.name})."
    if d.description:
        text += " " + d.description
    return text


class CategoryIndex:
    def __init__(self, schema: Schema, embedder):
        self.refs: list[DetailRef] = list(schema.details())
        self.paths = [str(r.path) for r in self.refs]
        self.multiple = {i for i, r in enumerate(self.refs) if r.detail.multiple}
        self.vocab = VocabularyIndex([r.detail.attributes for r in self.refs])
        self._embedder = embedder
        self._lock = threading.Lock()
        self._proto: Optional[tuple[np.ndarray, np.ndarray]] = None
        self._attr: dict[int, np.ndarray] = {}
        self._head_vocab: Optional[tuple[object, VocabularyIndex]] = None
        self.head_coverage: Optional[tuple[object, bool]] = None   # (head, covers this schema), set by the extractor

    def head_vocabulary(self, head) -> VocabularyIndex:
        """Vocabulary aligned with a trained head's labels: this schema's own attributes where it has
        the category (an operator may have edited them), the head's for categories pruned away
        (so a sentence naming an opted-out brand is still recognised, and dropped)."""
        with self._lock:
            if self._head_vocab is None or self._head_vocab[0] is not head:
                mine = dict(zip(self.paths, (r.detail.attributes for r in self.refs)))
                self._head_vocab = (head, VocabularyIndex([mine.get(p, v) for p, v in zip(head.labels, head.vocab)]))
            return self._head_vocab[1]

    def _prototypes(self) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            if self._proto is None:
                texts, owner = [], []
                for i, r in enumerate(self.refs):
                    for t in (describe(r), *r.detail.examples):
                        texts.append(t)
                        owner.append(i)
                self._proto = (self._embedder.embed(texts), np.array(owner, int))
            return self._proto

    def category_scores(self, X: np.ndarray, value_weight: float = 0.0) -> np.ndarray:
        """(sentences, categories): best cosine of each sentence to any prototype row of the category, or to
        one of its values ("Detail: value" rows) times `value_weight`."""
        proto, owner = self._prototypes()
        sims = X @ proto.T
        out = np.full((X.shape[0], len(self.refs)), -1.0, np.float32)
        for i in range(len(self.refs)):
            cols = owner == i
            if cols.any():
                out[:, i] = sims[:, cols].max(1)
        if value_weight:
            # a sentence close to one of the category's values ("Hostel", "Window seat") is about it too
            for i, A in self._attributes().items():
                if len(A) and A.shape[1] == X.shape[1]:
                    out[:, i] = np.maximum(out[:, i], value_weight * (X @ A.T).max(1))
        return out

    def warm(self, prototypes: bool) -> None:
        """Embed the schema's attribute vocabulary (and prototypes) now, not inside the first user's call."""
        self._attributes()
        if prototypes:
            self._prototypes()

    def _attributes(self) -> dict[int, np.ndarray]:
        with self._lock:
            if not self._attr:  # all categories in one batch: one model call instead of one per category
                texts = [f"{r.detail.name}: {a}" for r in self.refs for a in r.detail.attributes]
                E = self._embedder.embed(texts) if texts else None
                at = 0
                for i, r in enumerate(self.refs):
                    n = len(r.detail.attributes)
                    self._attr[i] = E[at:at + n] if n else np.zeros((0, 1), np.float32)
                    at += n
            return self._attr

    def closest_span(self, spans: list[str], category: int) -> tuple[Optional[str], float]:
        """Which of a few phrases from the user's words is most about the category (cosine to its prototypes)."""
        if not spans:
            return None, 0.0
        proto, owner = self._prototypes()
        rows = proto[owner == category]
        if not len(rows):
            return None, 0.0
        sims = (self._embedder.embed(spans) @ rows.T).max(1)
        best = float(sims.max())
        # of the phrases about as close as the best, the longest ("middle seat", not "seat")
        j = max((i for i in range(len(spans)) if sims[i] >= best - 0.03), key=lambda i: (len(spans[i].split()), sims[i]))
        return spans[j], float(sims[j])

    def attribute_similarities(self, x: np.ndarray, category: int) -> list[float]:
        """Cosine of the text to each listed item of the category, in list order (empty without a list)."""
        if not self.refs[category].detail.attributes:
            return []
        return [float(v) for v in self._attributes()[category] @ x]

