"""Per-schema embeddings the local extractor needs, computed once per schema and reused.

Prototype rows describe each detail category (name + description, and each example
phrasing); attribute rows let the extractor map a sentence to the nearest vocabulary item.
All of it is embedded in one batch when a schema is first seen.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

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


@dataclass
class CategoryIndex:
    refs: list[DetailRef]
    paths: list[str]
    proto: np.ndarray          # (rows, dim)
    proto_owner: np.ndarray    # row -> category index
    attr: np.ndarray           # (rows, dim)
    attr_owner: np.ndarray
    attr_value: list[str]
    vocab: VocabularyIndex

    @classmethod
    def build(cls, schema: Schema, embedder) -> "CategoryIndex":
        refs = list(schema.details())
        p_text, p_own, a_text, a_own, a_val = [], [], [], [], []
        for i, r in enumerate(refs):
            p_text.append(describe(r))
            p_own.append(i)
            for ex in r.detail.examples:
                p_text.append(ex)
                p_own.append(i)
            for a in r.detail.attributes:
                a_text.append(f"{r.detail.name}: {a}")
                a_own.append(i)
                a_val.append(a)
        E = embedder.embed(p_text + a_text) if (p_text or a_text) else np.zeros((0, embedder.dim), np.float32)
        return cls(refs=refs, paths=[str(r.path) for r in refs], proto=E[: len(p_text)], proto_owner=np.array(p_own, int),
                   attr=E[len(p_text):], attr_owner=np.array(a_own, int), attr_value=a_val,
                   vocab=VocabularyIndex([r.detail.attributes for r in refs]))

    def category_scores(self, X: np.ndarray) -> np.ndarray:
        """(sentences, categories): best cosine of each sentence to any prototype row of the category."""
        sims = X @ self.proto.T
        out = np.full((X.shape[0], len(self.refs)), -1.0, np.float32)
        for i in range(len(self.refs)):
            cols = self.proto_owner == i
            if cols.any():
                out[:, i] = sims[:, cols].max(1)
        return out

    def nearest_attribute(self, x: np.ndarray, category: int) -> tuple[str | None, float]:
        rows = np.flatnonzero(self.attr_owner == category)
        if rows.size == 0:
            return None, 0.0
        sims = self.attr[rows] @ x
        j = int(sims.argmax())
        return self.attr_value[rows[j]], float(sims[j])
