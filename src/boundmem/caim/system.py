"""CAIM as one object: short-term memory per user, the memory controller, retrieval, post-thinking, storage.

`CAIM` implements `caim.base.DialogueMemory`, so `boundmem bench gvd` runs it beside MemoryBank and TiM; its
constructor takes the bench's arguments (embedder, llm, db, controller, relevance_filter).
- no `llm`: local parts. With an embedder (MiniLM): `EmbeddingTagger`, `EmbeddingRelevance`, `LocalMerger` on
  cosine; with none: `LexiconTagger` and the hashing embedder. Controller: `RuleController`. Thinker: `LocalThinker`.
- `llm` (duck-typed: `complete(messages, json_mode=True) -> str`): the LLM parts, each wrapped in
  `caim.fallback.Fallback` with its local counterpart (on_llm_error="fallback", failures counted in
  `llm_failures`), or bare (on_llm_error="raise": `CAIMLLMError` reaches the caller and nothing is stored).
- `controller=False` always retrieves; `relevance_filter=False` ranks tag/date candidates by cosine without a
  threshold (the two ablations of the bench).
- `parts=CAIMParts(...)` replaces any part outright (tests, other models).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any, Optional, Union

from .base import DialogueTurn, MemoryItem, RetrievalResult, StorageStats
from .controller import Controller, LLMController, RuleController
from .dates import parse_date_range
from .fallback import Fallback, FailureCount
from .models import Thought, turn_id
from .ontology import Ontology, builtin_ontology
from .postthink import LLMMerger, LLMThinker, LocalMerger, LocalThinker, Merger, Thinker, consolidate
from .retrieval import EmbeddingRelevance, LLMRelevance, RelevanceFilter, match
from .store import CAIMStore
from .tags import EmbeddingTagger, LexiconTagger, LLMTagger, Tagger


@dataclass
class CAIMParts:
    controller: Optional[Controller] = None
    tagger: Optional[Tagger] = None  # for queries and for local thoughts
    relevance: Optional[RelevanceFilter] = None
    thinker: Optional[Thinker] = None
    merger: Optional[Merger] = None


# cosine below which a candidate is "not relevant": MiniLM puts unrelated short sentences at about 0.0-0.2; the
# hashing embedder shares only literal words, so related texts already score low
RELEVANCE_THRESHOLDS = {"minilm": 0.25, "hash": 0.05}


def local_parts(ontology: Ontology, embedder=None, relevance_filter: bool = True) -> CAIMParts:
    if embedder is None:
        from ..retrieve.embed import HashEmbedder

        embedder = HashEmbedder()
    # hashed words carry no meaning to compare with tag descriptions: keywords tag better
    tagger = LexiconTagger(ontology) if embedder.name == "hash" else EmbeddingTagger(ontology, embedder)
    threshold = RELEVANCE_THRESHOLDS.get(getattr(embedder, "name", ""), 0.25)
    relevance = EmbeddingRelevance(embedder, threshold=threshold if relevance_filter else -1.0)
    return CAIMParts(RuleController(embedder=None), tagger, relevance, LocalThinker(tagger), LocalMerger(embedder))


def llm_parts(client, ontology: Ontology, relevance_filter: bool = True) -> CAIMParts:
    return CAIMParts(LLMController(client), LLMTagger(client, ontology),
                     LLMRelevance(client) if relevance_filter else None, LLMThinker(client, ontology), LLMMerger(client))


class CAIM:
    name = "caim"

    def __init__(self, embedder: Any = None, llm: Any = None, db: Union[str, Path] = ":memory:",
                 controller: bool = True, relevance_filter: bool = True, *, ontology: Optional[Ontology] = None,
                 on_llm_error: str = "fallback", parts: Optional[CAIMParts] = None,
                 store: Optional[CAIMStore] = None):
        if on_llm_error not in ("fallback", "raise"):
            raise ValueError(f"on_llm_error must be 'fallback' or 'raise', not {on_llm_error!r}")
        self.ontology = ontology or builtin_ontology()
        self.store = store or CAIMStore(db)
        self.use_controller = controller
        self._failures = FailureCount()
        self._stats: dict[str, dict[str, int]] = {}
        local = local_parts(self.ontology, embedder, relevance_filter)
        chosen = local
        if llm is not None:
            remote = llm_parts(llm, self.ontology, relevance_filter)
            merged = {}
            for f in ("controller", "tagger", "relevance", "thinker", "merger"):
                p, b = getattr(remote, f), getattr(local, f)
                if p is None:
                    merged[f] = b
                elif on_llm_error == "fallback":
                    merged[f] = Fallback(p, b, self._failures)
                else:
                    merged[f] = p
            chosen = CAIMParts(**merged)
        if parts is not None:
            chosen = replace(chosen, **{k: v for k, v in vars(parts).items() if v is not None})
        self.controller, self.tagger, self.relevance = chosen.controller, chosen.tagger, chosen.relevance
        self.thinker, self.merger = chosen.thinker, chosen.merger

    def stats(self, user: str) -> dict[str, int]:
        """Organisation steps in this process: duplicates merged into a stored thought, and stored thoughts
        forgotten because a newer one contradicted them (the bench's "merged" / "forgotten" columns)."""
        return dict(self._stats.get(user, {"merged": 0, "forgotten": 0}))

    @property
    def llm_failures(self) -> int:
        """LLM replies that were unusable and answered by the local part instead."""
        return self._failures.n

    def close(self) -> None:
        self.store.close()

    # --- short-term memory and sessions ------------------------------------------------------------------
    def add_turn(self, user: str, day: date, query: str, response: str = "") -> DialogueTurn:
        """Append one turn to the user's open session; its id is "<day>#<index within that day>"."""
        with self.store.tx(user) as tx:
            same_day = [t for d, t in tx.stm() if d == day]
            turn = DialogueTurn(id=turn_id(day, len(same_day)), query=query, response=response)
            tx.push(day, turn)
        return turn

    def end_session(self, user: str) -> dict[str, int]:
        """Post-think the open session into long-term memory and clear it; all or nothing."""
        stm = self.store.stm(user)
        if not stm:
            return {"new": 0, "duplicate": 0, "contradiction": 0}
        days: dict[date, list[DialogueTurn]] = {}
        for d, t in stm:
            days.setdefault(d, []).append(t)
        drafts = [x for d, turns in days.items() for x in self.thinker.think(turns, d)]  # LLM calls outside the lock
        with self.store.tx(user) as tx:
            counts = consolidate(tx, drafts, self.merger, [t for _, t in stm])
            tx.clear_stm()
        acc = self._stats.setdefault(user, {"merged": 0, "forgotten": 0})
        acc["merged"] += counts["duplicate"]
        acc["forgotten"] += counts["contradiction"]
        return counts

    def add_session(self, user: str, day: date, turns: list[DialogueTurn]) -> None:
        with self.store.tx(user) as tx:
            for t in turns:
                tx.push(day, t)
        self.end_session(user)

    # --- retrieval ------------------------------------------------------------------------------------
    def retrieve(self, user: str, query: str, today: date, k: int = 5) -> RetrievalResult:
        stm = [t for _, t in self.store.stm(user)]
        if self.use_controller and not self.controller.needs_memory(query, stm, today):
            return RetrievalResult(retrieved=False)
        thoughts = self.store.thoughts(user)
        if not thoughts:
            return RetrievalResult(retrieved=True)
        tags = self.tagger.tags(query, 3)
        when = parse_date_range(query, today)
        cands = match(thoughts, tags, when)
        kept = self.relevance.filter(query, cands, k, today)
        return RetrievalResult(retrieved=True, items=[_item(c.thought, c.score) for c in kept])

    # --- inspection -----------------------------------------------------------------------------------
    def thoughts(self, user: str) -> list[Thought]:
        return self.store.thoughts(user)

    def storage(self, user: str) -> StorageStats:
        ts = self.store.thoughts(user)
        return StorageStats(items=len(ts), chars=sum(len(t.text) for t in ts))

    def forget(self, user: str) -> int:
        with self.store.tx(user) as tx:
            return tx.forget()


def _item(t: Thought, score: float) -> MemoryItem:
    return MemoryItem(id=t.id, text=t.text, source_turn_ids=t.source_turn_ids, tags=t.tags, timestamp=t.timestamp,
                      score=score)


__all__ = ["CAIM"]
