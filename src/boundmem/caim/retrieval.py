"""Memory retrieval: dense candidates over all of a user's thoughts, tags and dates as bounded bonuses, a relevance
cutoff that never empties a confident dense result.

Steps (`rank`, shared by `CAIM.retrieve` and the cross-validation of `boundmem bench gvd --cv`, so the figures the
bench reports come from this exact code):
1. pool: the `pool` thoughts with the highest cosine to the query (MiniLM), over *all* of the user's thoughts - no
   tag or date pre-filter, so what plain dense retrieval finds is always a candidate;
2. score = cosine + `tag_bonus` x tag similarity (0 = no tag shared below category level, 0.5 = same subcategory,
   1 = same attribute) + `date_bonus` if the thought's day is in the date range the query names. Both bonuses are
   bounded, so they re-order near ties; they cannot pull an unrelated thought above a close one by more than their
   size;
3. relevance filter: a candidate whose score is below `cutoff` is dropped (the filter may return nothing when even
   the best dense match is far);
4. a strong dense hit is never lost: the thought with the highest cosine is kept (in the last of the k places if the
   bonuses pushed it out) whenever its cosine alone clears the cutoff.
The knobs (`RetrievalParams`) ship with the values leave-users-out cross-validation on GVD chose (see
`caim.system.DEFAULT_PARAMS`).

`match` is the earlier hard tag/date matching, kept for the ablation "hard filter" and for comparison in tests;
`CAIM` no longer uses it.

Relevance filters:
- `EmbeddingRelevance` (local): the cutoff of step 3 on the bonus-adjusted score.
- `LLMRelevance`: prompt RELEVANCE in `caim.prompts`, over the soft-ranked pool; unknown ids are dropped; malformed
  JSON raises `CAIMLLMError`. Step 4 applies to it too.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Optional, Protocol, Sequence, runtime_checkable

import numpy as np
from pydantic import BaseModel

from .dates import DateRange
from .llmio import ask_json, field
from .models import Thought
from .ontology import tag_overlap
from .prompts import RELEVANCE_SYSTEM, RELEVANCE_USER


class Candidate(BaseModel):
    thought: Thought
    tag_score: float = 0.0
    in_range: bool = False
    score: float = 0.0
    cos: Optional[float] = None  # dense cosine to the query, when known


@dataclass(frozen=True)
class RetrievalParams:
    """The tuned knobs of local retrieval and of the controller's near-memory rule (see module docstring)."""

    pool: int = 30  # dense top-N candidates; 0 = all of the user's thoughts
    tag_bonus: float = 0.05  # x tag similarity in [0, 1]
    date_bonus: float = 0.1  # when the thought's day is in the named date range
    cutoff: float = 0.25  # relevance filter on cosine + bonuses; -1 = off
    near: float = 0.35  # controller: retrieve when the best cosine to a stored thought reaches this
    source_weight: float = 0.0  # a thought's cosine is max(own, source_weight x best source turn's); 0 = thought only
    summary_weight: float = 0.0  # x cosine of a day-summary unit (caim.sources); 0 = no summaries


def with_sources(cos: np.ndarray, src_cos: np.ndarray, weight: float) -> np.ndarray:
    """A thought scored by the best of its own text and its source turns' text (weighted); `src_cos` is -1 where a
    thought has no kept source."""
    if weight <= 0 or len(cos) == 0:
        return cos
    return np.maximum(cos, weight * src_cos).astype(np.float32)


def tag_similarity(query_tags: Sequence[str], thought_tags: Sequence[str]) -> float:
    """0 (nothing shared below the top-level category), 0.5 (same subcategory) or 1 (same attribute)."""
    best = max((tag_overlap(q, t) for q in query_tags for t in thought_tags), default=0)
    return max(best - 1, 0) / 2.0


def rank(cos: np.ndarray, tag_sim: np.ndarray, in_range: np.ndarray, p: RetrievalParams, k: int,
         use_filter: bool = True) -> list[tuple[int, float]]:
    """(thought index, score) best first, at most k: dense pool -> bounded bonuses -> cutoff -> strong hit kept."""
    n = len(cos)
    if n == 0 or k <= 0:
        return []
    order = np.lexsort((np.arange(n), -cos))
    pool = order[: p.pool] if p.pool and p.pool > 0 else order
    score = cos[pool] + p.tag_bonus * tag_sim[pool] + p.date_bonus * in_range[pool]
    keep = [(int(i), float(s)) for i, s in zip(pool, score) if not use_filter or s >= p.cutoff]
    keep.sort(key=lambda x: -x[1])  # stable: equal scores stay in dense order
    top = keep[:k]
    best = int(order[0])
    if (not use_filter or cos[best] >= p.cutoff) and all(i != best for i, _ in top):
        s = float(cos[best] + p.tag_bonus * tag_sim[best] + p.date_bonus * in_range[best])
        top = top[: k - 1] + [(best, s)]
    return top


def _tag_score(query_tags: Sequence[str], thought_tags: Sequence[str]) -> tuple[int, int]:
    overlaps = [max((tag_overlap(q, t) for q in query_tags), default=0) for t in thought_tags]
    best = max(overlaps, default=0)
    return best, sum(1 for o in overlaps if o >= 2)


def match(thoughts: Sequence[Thought], query_tags: Sequence[str], when: Optional[DateRange],
          min_overlap: int = 2) -> list[Candidate]:
    scored = []
    for t in thoughts:
        best, n = _tag_score(query_tags, t.tags)
        scored.append(Candidate(thought=t, tag_score=best + 0.1 * max(n - 1, 0),
                                in_range=bool(when) and any(d in when for d in t.days())))
    cands = [c for c in scored if c.tag_score >= min_overlap] or [c for c in scored if c.tag_score >= 1]
    if when is not None:
        in_range = [c for c in scored if c.in_range]
        cands = in_range or cands
    return sorted(cands, key=lambda c: (-c.tag_score, -int(c.in_range), c.thought.timestamp))


@runtime_checkable
class RelevanceFilter(Protocol):
    def filter(self, query: str, candidates: Sequence[Candidate], k: int, today: Optional[date] = None) -> list[Candidate]:
        """The relevant candidates, best first, at most k; may be empty."""


class EmbeddingRelevance:
    """Keeps candidates whose cosine + bounded tag/date bonuses reach `threshold`, best first, at most k."""

    name = "embedding"

    def __init__(self, embedder, threshold: float = 0.25, tag_bonus: float = 0.05, date_bonus: float = 0.1):
        self.embedder, self.threshold = embedder, threshold
        self.tag_bonus, self.date_bonus = tag_bonus, date_bonus

    def filter(self, query: str, candidates: Sequence[Candidate], k: int, today: Optional[date] = None) -> list[Candidate]:
        if not candidates:
            return []
        missing = [c for c in candidates if c.cos is None]
        if missing:
            q = self.embedder.embed([query])[0]
            m = self.embedder.embed([c.thought.text for c in missing]) @ q
            got = {id(c): float(v) for c, v in zip(missing, m)}
        out = []
        for c in candidates:
            cos = c.cos if c.cos is not None else got[id(c)]
            tsim = min(max(int(c.tag_score) - 1, 0) / 2.0, 1.0)
            s = float(cos) + self.tag_bonus * tsim + (self.date_bonus if c.in_range else 0.0)
            if s < self.threshold:
                continue
            out.append(c.model_copy(update={"score": s}))
        out.sort(key=lambda c: -c.score)
        return out[:k]


class LLMRelevance:
    name = "llm"

    def __init__(self, client, max_candidates: int = 30):
        self.client, self.max_candidates = client, max_candidates

    def filter(self, query: str, candidates: Sequence[Candidate], k: int, today: Optional[date] = None) -> list[Candidate]:
        if not candidates:
            return []
        cands = list(candidates)[: self.max_candidates]
        by_id = {c.thought.id: c for c in cands}
        listing = "\n".join(f"[{c.thought.id}] ({c.thought.timestamp.isoformat()}) {c.thought.text}" for c in cands)
        data = ask_json(self.client, "relevance filter", RELEVANCE_SYSTEM,
                        RELEVANCE_USER.format(today=today.isoformat() if today else "unknown", query=query,
                                              candidates=listing))
        ids = field(data, "relevant", list, "relevance filter")
        out, seen = [], set()
        for rank, i in enumerate(str(x) for x in ids):
            if i in by_id and i not in seen:
                seen.add(i)
                out.append(by_id[i].model_copy(update={"score": 1.0 / (rank + 1)}))
        return out[:k]
