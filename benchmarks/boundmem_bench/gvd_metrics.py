"""Automatic GVD scoring: retrieval against gold evidence turns, answers against gold keyword groups.

The papers scored GVD by hand; these rules make the numbers reproducible and say exactly what counts:
- an item is relevant when its source_turn_ids meet the gold evidence turns, or when it is a daily summary
  (tag "summary") of a gold date;
- a memory controller that decides not to retrieve on a question with gold evidence scores a miss;
- an answer scores 1 when every keyword group matches (one string of the group, case-insensitive substring),
  0.5 when some do, 0 when none do; on POLARITY questions the answer must also say the right yes/no word first,
  else 0; on unanswerable questions the answer must abstain ("I don't remember" and similar).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Optional, Sequence

from boundmem.caim.base import MemoryItem, RetrievalResult
from .gvd_data import GoldAnnotation

ABSTAIN = re.compile(r"\b(don't|do not|can't|cannot) (remember|recall)|\bno (record|information|memory)\b|"
                     r"\b(not mentioned|didn't mention)\b", re.I)
_POLARITY_WORD = re.compile(r"\b(yes|yeah|yep|no|nope)\b", re.I)


@dataclass(frozen=True)
class RetrievalScore:
    hit: list[float]  # hit@1..k
    recall: list[float]  # recall@1..k
    mrr: float
    first_rank: Optional[int]  # 1-based rank of the first relevant item


def _norm(text: str) -> str:
    text = text.lower().replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    text = text.replace("–", "-").replace("—", "-")
    return " ".join(text.split())


def covered_evidence(item: MemoryItem, gold: GoldAnnotation) -> set[str]:
    """Gold evidence turns this item stands for."""
    ev = set(gold.evidence)
    hit = ev & set(item.source_turn_ids)
    if "summary" in item.tags and item.timestamp is not None:
        hit |= {e for e in ev if date.fromisoformat(e.split("#")[0]) == item.timestamp}
    return hit


def score_retrieval(result: RetrievalResult, gold: GoldAnnotation, k: int) -> RetrievalScore:
    """hit@j and recall@j for j = 1..k over the ranked items, and MRR within k."""
    if not gold.evidence:
        raise ValueError("retrieval can only be scored against gold evidence")
    items = result.items[:k] if result.retrieved else []
    covered: set[str] = set()
    hit, recall, first = [], [], None
    for j in range(k):
        if j < len(items):
            c = covered_evidence(items[j], gold)
            if c and first is None:
                first = j + 1
            covered |= c
        hit.append(1.0 if first is not None else 0.0)
        recall.append(len(covered) / len(gold.evidence))
    return RetrievalScore(hit=hit, recall=recall, mrr=1.0 / first if first else 0.0, first_rank=first)


def keyword_score(answer: str, groups: Sequence[Sequence[str]]) -> float:
    if not groups:
        raise ValueError("no keyword groups")
    a = _norm(answer)
    matched = sum(1 for g in groups if any(_norm(s) in a for s in g))
    return 1.0 if matched == len(groups) else 0.5 if matched else 0.0


def answer_polarity(answer: str) -> Optional[str]:
    m = _POLARITY_WORD.search(answer)
    if not m:
        return None
    return "yes" if m.group(1).lower() in ("yes", "yeah", "yep") else "no"


def score_answer(answer: str, gold: GoldAnnotation) -> tuple[float, Optional[bool]]:
    """(correctness 0/0.5/1, polarity_ok or None when the question has no polarity)."""
    if not gold.answerable:
        return (1.0 if ABSTAIN.search(answer) else 0.0), None
    score = keyword_score(answer, gold.keywords)
    if gold.polarity is None:
        return score, None
    ok = answer_polarity(answer) == gold.polarity
    return (score if ok else 0.0), ok
