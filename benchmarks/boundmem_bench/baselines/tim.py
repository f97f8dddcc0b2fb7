"""Think-in-Memory (TiM, Liu et al. 2023) re-implemented as a GVD baseline with the same embedder and k as CAIM.

- After every turn, post-thinking turns it into inductive thoughts (LLM when configured, else `thoughts.local_thought`).
- Thoughts live in an LSH hash table (random projection, `buckets` buckets, fixed seed). Retrieval hashes the query,
  then ranks the thoughts of that bucket by cosine (stage 2); when the bucket holds fewer than `min_candidates`
  thoughts it probes the next most likely buckets in order of the query's projection scores.
- Organisation on insert: *merge* a new thought into an existing one about the same head entity, or into a
  near-duplicate (cosine >= `dup_threshold`); *forget* an existing thought the new one contradicts (cosine >=
  `contra_threshold` and opposite negation on the user's side) - the newer statement wins. With an LLM these decisions and the
  merged text come from one JSON call; locally they come from the rules above (documented approximations).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Optional

import numpy as np

from boundmem.caim.base import DialogueTurn, MemoryItem, RetrievalResult, StorageStats
from boundmem.embed import Embedder

from ._common import ChatLLM, ask, clip
from .lsh import RandomProjectionLSH
from .thoughts import head_entity, local_thought, negated

THINK_PROMPT = (
    "You keep a long-term memory for an AI companion. From the exchange below, write 1 to 3 short inductive thoughts: "
    "facts about the user (preferences, events, plans, feelings) or things the AI recommended, each one sentence "
    "naming its subject. Answer with JSON only: {{\"thoughts\": [{{\"head\": \"<subject>\", \"text\": \"<sentence>\"}}]}}."
    "\n\nDate: {day}\nUser ({user}): {query}\nAI: {response}"
)
ORGANISE_PROMPT = (
    "A memory holds these thoughts:\n{existing}\nNew thought: {new}\n"
    "Decide: \"insert\" (new information), \"merge\" (same subject; give one merged sentence keeping all facts) or "
    "\"replace\" (the new thought contradicts or updates thought <id>; the old one is forgotten). "
    "Answer with JSON only: {{\"action\": \"insert|merge|replace\", \"id\": \"<id or empty>\", \"text\": \"<merged "
    "sentence or empty>\"}}."
)


@dataclass
class Thought:
    id: str
    text: str
    head: Optional[str]
    day: date
    source_turn_ids: tuple[str, ...]
    vec: np.ndarray = field(repr=False)
    bucket: int = 0

    def item(self, score: float) -> MemoryItem:
        return MemoryItem(id=self.id, text=self.text, source_turn_ids=self.source_turn_ids,
                          tags=(f"bucket:{self.bucket}",), timestamp=self.day, score=score)


@dataclass
class _Table:
    thoughts: dict[str, Thought] = field(default_factory=dict)
    counter: int = 0
    merged: int = 0
    forgotten: int = 0


def _json_object(text: str) -> dict:
    m = re.search(r"\{.*\}", text, re.S)
    if not m:
        raise ValueError("no JSON object in LLM reply")
    obj = json.loads(m.group(0))
    if not isinstance(obj, dict):
        raise ValueError("LLM reply is not a JSON object")
    return obj


class TiM:
    def __init__(self, embedder: Embedder, llm: Optional[ChatLLM] = None, *, buckets: int = 16, seed: int = 0,
                 min_candidates: int = 1, dup_threshold: float = 0.92, contra_threshold: float = 0.75,
                 thought_chars: int = 320, name: str = "tim"):
        self.embedder = embedder
        self.llm = llm
        self.lsh = RandomProjectionLSH(embedder.dim, buckets, seed)
        self.min_candidates = min_candidates
        self.dup_threshold = dup_threshold
        self.contra_threshold = contra_threshold
        self.thought_chars = thought_chars
        self.name = name
        self.llm_failures = 0
        self._tables: dict[str, _Table] = {}

    # --- post-thinking ----------------------------------------------------------------------------------------
    def _think(self, user: str, day: date, turn: DialogueTurn) -> list[tuple[Optional[str], str]]:
        if self.llm is not None:
            try:
                obj = _json_object(ask(self.llm, THINK_PROMPT.format(day=day.isoformat(), user=user, query=turn.query,
                                                                     response=turn.response), json_mode=True))
                out = [(str(t.get("head") or "").strip().lower() or None, clip(str(t["text"]), self.thought_chars))
                       for t in obj.get("thoughts", []) if isinstance(t, dict) and str(t.get("text", "")).strip()]
                if out:
                    return out[:3]
            except Exception:  # malformed or failed reply: keep the turn with a local thought rather than lose it
                pass
            self.llm_failures += 1
        return [(head_entity(turn.query, user), local_thought(turn, user, self.thought_chars))]

    def add_session(self, user: str, day: date, turns: list[DialogueTurn]) -> None:
        table = self._tables.setdefault(user, _Table())
        drafts = [(turn, head, text) for turn in turns for head, text in self._think(user, day, turn)]
        self.embedder.embed([text for _, _, text in drafts])  # one batch; caching embedders then answer from cache
        for turn, head, text in drafts:  # organised in turn order, as if thought after each reply
            self._insert(table, user, day, head, text, (turn.id,))

    # --- organisation -----------------------------------------------------------------------------------------
    def _new(self, table: _Table, head: Optional[str], text: str, day: date, sources: tuple[str, ...]) -> Thought:
        vec = self.embedder.embed([text])[0].astype(np.float32)
        table.counter += 1
        return Thought(id=f"t{table.counter}", text=text, head=head, day=day, source_turn_ids=sources, vec=vec,
                       bucket=int(self.lsh.bucket(vec)[0]))

    def _related(self, table: _Table, new: Thought) -> list[tuple[Thought, float]]:
        rel = []
        for t in table.thoughts.values():
            sim = float(t.vec @ new.vec)
            if (new.head and t.head == new.head) or sim >= self.contra_threshold:
                rel.append((t, sim))
        return sorted(rel, key=lambda p: -p[1])[:3]

    def _decide(self, related: list[tuple[Thought, float]], new: Thought) -> tuple[str, Optional[Thought], str]:
        if self.llm is not None:
            try:
                existing = "\n".join(f"[{t.id}] {t.text}" for t, _ in related)
                obj = _json_object(ask(self.llm, ORGANISE_PROMPT.format(existing=existing, new=new.text), json_mode=True))
                action = str(obj.get("action", "")).strip().lower()
                target = next((t for t, _ in related if t.id == str(obj.get("id", "")).strip()), related[0][0])
                if action == "insert":
                    return "insert", None, ""
                if action in ("merge", "replace"):
                    return action, target, clip(str(obj.get("text") or ""), 2 * self.thought_chars)
                raise ValueError(f"unknown action {action!r}")
            except Exception:
                self.llm_failures += 1
        for t, sim in related:
            if sim >= self.contra_threshold and negated(t.text) != negated(new.text):
                return "replace", t, ""
        best, sim = related[0]
        if sim >= self.dup_threshold:
            return "merge", best, new.text  # near-duplicate: the newer wording stands for both
        same_head = next((t for t, _ in related if new.head and t.head == new.head), None)
        if same_head is not None:
            return "merge", same_head, clip(f"{same_head.text} | {new.text}", 2 * self.thought_chars)
        return "insert", None, ""

    def _insert(self, table: _Table, user: str, day: date, head: Optional[str], text: str,
                sources: tuple[str, ...]) -> None:
        new = self._new(table, head, text, day, sources)
        related = self._related(table, new)
        action, target, merged = self._decide(related, new) if related else ("insert", None, "")
        if action == "replace" and target is not None:
            del table.thoughts[target.id]
            table.forgotten += 1
        elif action == "merge" and target is not None:
            del table.thoughts[target.id]
            table.merged += 1
            new = self._new(table, target.head or head, merged or new.text, day,
                            tuple(dict.fromkeys(target.source_turn_ids + sources)))
        table.thoughts[new.id] = new

    # --- retrieval --------------------------------------------------------------------------------------------
    def retrieve(self, user: str, query: str, today: date, k: int = 5) -> RetrievalResult:
        table = self._tables.get(user)
        if table is None or not table.thoughts:
            return RetrievalResult(retrieved=True, items=[])
        q = self.embedder.embed([query])[0].astype(np.float32)
        by_bucket: dict[int, list[Thought]] = {}
        for t in table.thoughts.values():
            by_bucket.setdefault(t.bucket, []).append(t)
        cands: list[Thought] = []
        for b in self.lsh.probe_order(q):  # stage 1: the query's bucket, then its neighbours if too few
            cands.extend(by_bucket.get(b, []))
            if len(cands) >= self.min_candidates:
                break
        scored = sorted(((float(t.vec @ q), i, t) for i, t in enumerate(cands)), key=lambda p: (-p[0], p[1]))[:k]
        return RetrievalResult(retrieved=True, items=[t.item(s) for s, _, t in scored])

    def storage(self, user: str) -> StorageStats:
        table = self._tables.get(user)
        if table is None:
            return StorageStats(items=0, chars=0)
        return StorageStats(items=len(table.thoughts), chars=sum(len(t.text) for t in table.thoughts.values()))

    def stats(self, user: str) -> dict[str, int]:
        """How often organisation merged or forgot a thought for this user (report columns)."""
        table = self._tables.get(user)
        return {"merged": table.merged if table else 0, "forgotten": table.forgotten if table else 0}

    def thoughts(self, user: str) -> list[Thought]:
        table = self._tables.get(user)
        return list(table.thoughts.values()) if table else []
