"""Retrieval keys kept beside the thoughts: each thought's source turns in their own words, and one summary per day.

Why: the local post-thinking compresses a turn into one short third-person sentence and drops most of its words.
A question is often worded after what the turn said, not after the thought ("Which country should I visit?" against
"I'm planning a trip to New Zealand ... glaciers"; "what was my mood?" against a turn about feeling down that the
thought shortened to a clause), and a question about a whole day ("what did we talk about during our first
conversation?") matches no single thought. So retrieval scores a thought by the best of its own text and its source
turns' text (`source_weight` x that cosine), and adds a per-day summary unit that stands for all of a day's kept
turns. The thought stays what a hit returns (short, tagged, merged); the turns are keys, not answers.

- `turn_text`: what is embedded for a source turn ("User: ... AI: ...").
- `day_summaries`: one unit per day with at least two kept turns: the first sentence of each user utterance that
  day, the whole unit cut at `SUMMARY_CHARS` (a thought's limit; extractive, deterministic); a day of one turn has no summary (the turn is its own).
- `best_source`: per thought, the highest cosine among its source turns (-1 when none is kept).
- `fold`: the ranked units as items, k at most, where a thought whose source turns an earlier thought already stands
  for rides along in that item (the user's and the AI's thought of one turn score alike once the turn is a key;
  they must not take two of the k places), and a summary whose turns are all represented already is skipped.
"""
from __future__ import annotations

import re
from datetime import date
from typing import Sequence

import numpy as np

from .base import DialogueTurn, MemoryItem
from .models import Thought

SUMMARY_CHARS = 400
SUMMARY_TAG = "summary"
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'“(])")


def turn_text(turn: DialogueTurn) -> str:
    return " ".join(f"User: {turn.query} AI: {turn.response}".split())


def _first_sentence(text: str) -> str:
    parts = [s.strip() for s in _SENT.split(" ".join(text.split())) if s.strip()]
    return parts[0] if parts else ""


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " ..."


def summary_text(day: date, turns: Sequence[DialogueTurn]) -> str:
    head = f"The summary of the conversation on {day.isoformat()} is: "
    body = " ".join(s for s in (_first_sentence(t.query) for t in turns) if s)
    return head + _clip(body, SUMMARY_CHARS - len(head) - 4)


def day_summaries(user: str, turns: Sequence[tuple[date, DialogueTurn]], stamp) -> list[Thought]:
    """One summary unit per day with two or more kept turns (not stored: derived from the kept turns)."""
    by_day: dict[date, list[DialogueTurn]] = {}
    for d, t in turns:
        by_day.setdefault(d, []).append(t)
    return [Thought(id=f"{SUMMARY_TAG}:{d.isoformat()}", user=user, text=summary_text(d, ts), tags=(),
                    timestamp=d, source_turn_ids=tuple(t.id for t in ts), created_at=stamp, updated_at=stamp)
            for d, ts in sorted(by_day.items()) if len(ts) >= 2]


def is_summary(t: Thought) -> bool:
    return t.id.startswith(SUMMARY_TAG + ":")


def best_source(thoughts: Sequence[Thought], turn_index: dict[str, int], turn_cos: np.ndarray) -> np.ndarray:
    out = np.full(len(thoughts), -1.0, np.float32)
    for i, t in enumerate(thoughts):
        js = [turn_index[s] for s in t.source_turn_ids if s in turn_index]
        if js:
            out[i] = float(turn_cos[js].max())
    return out


def fold(units: Sequence[Thought], ranked: Sequence[tuple[int, float]], k: int, keep: int = -1) -> list[MemoryItem]:
    """Ranked (unit index, score) -> at most k items (see module docstring). `keep`: a unit index that must be
    among the k (the strong dense hit of `retrieval.rank`): the item it is in takes the last place if it fell out."""
    picked: list[tuple[int, float, list[int], set[str]]] = []  # (unit index, score, member units, sources)
    for i, s in ranked:
        u = units[i]
        srcs = set(u.source_turn_ids)
        if is_summary(u):
            if srcs and srcs <= {x for p in picked for x in p[3]}:
                continue
        else:
            host = next((p for p in picked if not is_summary(units[p[0]]) and srcs and srcs <= p[3]), None)
            if host is not None:
                host[2].append(i)
                continue
        picked.append((i, s, [i], srcs))
    top = picked[:k]
    if keep >= 0 and top and all(keep not in p[2] for p in top):
        hit = next((p for p in picked if keep in p[2]), None)
        if hit is not None:
            top = top[: k - 1] + [hit]
    return [_item(units[i], score, [units[m].text for m in members]) for i, score, members, _ in top]


def _item(t: Thought, score: float, texts: list[str]) -> MemoryItem:
    return MemoryItem(id=t.id, text="; ".join(dict.fromkeys(texts)), source_turn_ids=t.source_turn_ids,
                      tags=(SUMMARY_TAG,) if is_summary(t) else t.tags, timestamp=t.timestamp, score=score)
