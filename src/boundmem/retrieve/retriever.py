"""Retrieval: cosine top-k over one user's stored preferences, k fixed or dynamic."""
from __future__ import annotations

from typing import Optional

from ..models import RecallHit
from ..store.base import Store
from .embed import Embedder


class Retriever:
    """k=None means dynamic k: as many as the user holds in the subcategory of the best match.

    The paper sets n from the ground-truth subcategory; at run time we do not know it, so the
    top hit stands in for it (the benchmark reports both).
    """

    def __init__(self, store: Store, embedder: Embedder):
        self.store, self.embedder = store, embedder

    def recall(self, utterance: str, user: str, k: Optional[int] = 5, exclude_prefixes: tuple[str, ...] = ()) -> list[RecallHit]:
        q = self.embedder.embed([utterance])[0]
        hits = self.store.search(user, q, 10_000 if k is None else k, exclude_prefixes)
        if k is None and hits:
            top = hits[0][0].path
            n = sum(1 for p, _ in hits if p.path.main == top.main and p.path.sub == top.sub)
            hits = hits[:max(1, n)]
        return [RecallHit(preference=p, score=s) for p, s in hits]
