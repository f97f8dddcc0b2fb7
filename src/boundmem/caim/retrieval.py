"""Memory retrieval: tag + date matching in plain Python, then a relevance filter that may keep nothing.

`match` is CAIM's deterministic step: a thought is a candidate when it shares a tag with the query at
subcategory level or deeper (sharing only a top-level category such as "Preferences" is too broad to mean
anything); if none does, category-level sharing is accepted. Score = best overlap (3 attribute, 2 subcategory,
1 category) + 0.1 per further shared tag. When the query names a time, the candidates are the thoughts whose
timestamp or source turns fall in the range, ranked by tag score (tags then rank rather than exclude: one day holds
a handful of thoughts, and "what did we talk about on May 2nd?" names no topic at all); if the range holds no
thought, the tag matches stand (the user's date may be off).

Relevance filters:
- `EmbeddingRelevance` (local): score = MiniLM cosine(query, thought) + 0.04 x tag score + 0.1 if the thought is
  in the named date range; kept when score >= threshold, best first, at most k. The bonuses let what CAIM's
  structure points at (right day, right tag) through when the wording differs; an unrelated thought on an
  unrelated query still scores below the threshold, so the filter can return nothing.
- `LLMRelevance`: prompt RELEVANCE in `caim.prompts`; unknown ids are dropped; malformed JSON raises
  `CAIMLLMError`.
"""
from __future__ import annotations

from datetime import date
from typing import Optional, Protocol, Sequence, runtime_checkable

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
    name = "embedding"

    def __init__(self, embedder, threshold: float = 0.25, tag_bonus: float = 0.04, date_bonus: float = 0.1):
        self.embedder, self.threshold = embedder, threshold
        self.tag_bonus, self.date_bonus = tag_bonus, date_bonus

    def filter(self, query: str, candidates: Sequence[Candidate], k: int, today: Optional[date] = None) -> list[Candidate]:
        if not candidates:
            return []
        q = self.embedder.embed([query])[0]
        m = self.embedder.embed([c.thought.text for c in candidates])
        out = []
        for c, cos in zip(candidates, m @ q):
            s = float(cos) + self.tag_bonus * c.tag_score + (self.date_bonus if c.in_range else 0.0)
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
