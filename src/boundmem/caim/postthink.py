"""Post-thinking: at session end, short-term memory becomes inductive thoughts merged into long-term memory.

Two steps, each with a local and an LLM implementation:
1. Extension (`Thinker`): the session's turns -> `ThoughtDraft`s (<= 3 ontology tags, session date, source
   turn ids). `LocalThinker` compresses each turn with the rules in `caim.compress` (one thought for what the user
   said, one for what the AI recommended/advised) and tags it with a `Tagger` (an AI thought is tagged together
   with the user's request and the turn before, which say what kind of thing was recommended, or failing that
   with the reply itself: "the album Kind of Blue"). `LLMThinker` uses prompt THINK.
2. Review (`Merger`): each draft against stored thoughts that share a tag at subcategory level.
   `LocalMerger`: cosine >= `dup` with the same polarity -> duplicate (the stored text is kept, sources unioned, the
   earliest timestamp kept); cosine >= `contra` with opposite polarity (one says not/never/dislike/no longer, the other
   does not) -> contradiction: the newer thought replaces the stored one. `LLMMerger` uses prompt MERGE.
Thoughts drafted in the same session are merged against each other too (a user repeating themselves).
"""
from __future__ import annotations

import logging
import re
from datetime import date
from typing import Optional, Protocol, Sequence, runtime_checkable

import numpy as np

from .base import DialogueTurn
from .compress import ai_thought, guard_verbatim, user_thought
from .llmio import CAIMLLMError, ask_json, field
from .models import MergeDecision, Thought, ThoughtDraft, fit_thought
from .ontology import Ontology, tag_overlap
from .prompts import MERGE_SYSTEM, MERGE_USER, THINK_SYSTEM, THINK_USER
from .store import CAIMTx

log = logging.getLogger(__name__)


@runtime_checkable
class Thinker(Protocol):
    def think(self, turns: Sequence[DialogueTurn], day: date) -> list[ThoughtDraft]: ...


@runtime_checkable
class Merger(Protocol):
    def decide(self, draft: ThoughtDraft, similar: Sequence[Thought]) -> MergeDecision: ...


class LocalThinker:
    name = "local"

    def __init__(self, tagger, max_words: int = 32):
        self.tagger, self.max_words = tagger, max_words

    def think(self, turns: Sequence[DialogueTurn], day: date) -> list[ThoughtDraft]:
        out = []
        prev = ""
        for t in turns:
            # one endless word or zalgo text: cut to a thought's length, never a crash
            u, a = (fit_thought(x) if x else "" for x in (user_thought(t, day, self.max_words),
                                                           ai_thought(t, day, self.max_words)))
            if u:
                out.append(ThoughtDraft(text=u, tags=tuple(self.tagger.tags(u, 3)), timestamp=day, source_turn_ids=(t.id,)))
            if a:
                # what was recommended is often only named ("The Little Prince"); the request says what kind of thing
                tags = self.tagger.tags(f"{a}. {prev} {t.query}", 3) or self.tagger.tags(f"{a}. {t.response}", 3)
                out.append(ThoughtDraft(text=a, tags=tuple(tags), timestamp=day, source_turn_ids=(t.id,)))
            prev = t.query
        return out


class RawThinker:
    """Ablation "post-thinking off": each turn is stored as it was said ("User: ... AI: ..."), cut at word
    boundaries into pieces of at most `max_chars` (a thought holds at most 400), each tagged."""

    name = "raw"

    def __init__(self, tagger, max_chars: int = 400):
        self.tagger, self.max_chars = tagger, max_chars

    def think(self, turns: Sequence[DialogueTurn], day: date) -> list[ThoughtDraft]:
        out = []
        for t in turns:
            text = " ".join(f"User: {t.query} AI: {t.response}".split())
            while text:
                piece = text if len(text) <= self.max_chars else text[: self.max_chars].rsplit(" ", 1)[0]
                piece = piece or text[: self.max_chars]
                text = text[len(piece):].strip()
                out.append(ThoughtDraft(text=piece, tags=tuple(self.tagger.tags(piece, 3)), timestamp=day,
                                        source_turn_ids=(t.id,)))
        return out


class NoMerger:
    """Every draft is new (the raw-turn ablation keeps every turn)."""

    name = "none"

    def decide(self, draft: ThoughtDraft, similar: Sequence[Thought]) -> MergeDecision:
        return MergeDecision(action="new")


class LLMThinker:
    name = "llm"

    def __init__(self, client, ontology: Ontology, max_thoughts: int = 12):
        self.client, self.ontology, self.max_thoughts = client, ontology, max_thoughts

    def think(self, turns: Sequence[DialogueTurn], day: date) -> list[ThoughtDraft]:
        if not turns:
            return []
        listing = "\n".join(f"[{t.id}] User: {t.query}\n[{t.id}] AI: {t.response}" for t in turns)
        data = ask_json(self.client, "post-thinking",
                        THINK_SYSTEM.format(ontology=self.ontology.listing(), max_thoughts=self.max_thoughts),
                        THINK_USER.format(day=day.isoformat(), turns=listing))
        items = field(data, "thoughts", list, "post-thinking")
        ids = {t.id for t in turns}
        out = []
        for i, it in enumerate(items[: self.max_thoughts]):
            if not isinstance(it, dict) or not isinstance(it.get("text"), str) or not it["text"].strip():
                raise CAIMLLMError("post-thinking", f"thought {i} has no text")
            tags = self.ontology.valid([str(x) for x in it.get("tags") or []], limit=3)
            srcs = tuple(s for s in dict.fromkeys(str(x) for x in it.get("sources") or []) if s in ids)
            out.append(ThoughtDraft(text=fit_thought(it["text"]), tags=tuple(tags), timestamp=day, source_turn_ids=srcs))
        return out


_NEG = re.compile(r"\b(not|no longer|never|n't|dislikes?|hates?|stopped|quit|doesn't|don't|isn't|wasn't|"
                  r"won't|can't|cannot)\b|n't\b", re.I)


def polarity(text: str) -> bool:
    """False when the sentence is negated (a crude but predictable test for "likes X" vs "doesn't like X")."""
    return not _NEG.search(text)


class LocalMerger:
    name = "local"

    def __init__(self, embedder, dup: float = 0.9, contra: float = 0.72):
        self.embedder, self.dup, self.contra = embedder, dup, contra

    def decide(self, draft: ThoughtDraft, similar: Sequence[Thought]) -> MergeDecision:
        if not similar:
            return MergeDecision(action="new")
        v = self.embedder.embed([draft.text])[0]
        sims = self.embedder.embed([t.text for t in similar]) @ v
        order = np.argsort(-sims)
        pol = polarity(draft.text)
        for j in order:
            s, t = float(sims[j]), similar[j]
            if s >= self.dup and polarity(t.text) == pol:
                return MergeDecision(action="duplicate", target=t.id)
            if s >= self.contra and polarity(t.text) != pol:
                return MergeDecision(action="contradiction", target=t.id)
        return MergeDecision(action="new")


class LLMMerger:
    name = "llm"

    def __init__(self, client, max_similar: int = 8):
        self.client, self.max_similar = client, max_similar

    def decide(self, draft: ThoughtDraft, similar: Sequence[Thought]) -> MergeDecision:
        if not similar:
            return MergeDecision(action="new")
        sim = list(similar)[: self.max_similar]
        stored = "\n".join(f"[{t.id}] ({t.timestamp.isoformat()}) {t.text}" for t in sim)
        data = ask_json(self.client, "post-thinking merge", MERGE_SYSTEM,
                        MERGE_USER.format(day=draft.timestamp.isoformat(), text=draft.text, stored=stored))
        action = field(data, "action", str, "post-thinking merge")
        if action not in ("new", "duplicate", "contradiction"):
            raise CAIMLLMError("post-thinking merge", f"unknown action {action!r}")
        target = data.get("target")
        if action != "new" and str(target) not in {t.id for t in sim}:
            raise CAIMLLMError("post-thinking merge", f"action {action!r} names unknown target {target!r}")
        text = data.get("text") if isinstance(data.get("text"), str) and data["text"].strip() else None
        return MergeDecision(action=action, target=str(target) if action != "new" else None, text=text)


def similar_thoughts(draft: ThoughtDraft, stored: Sequence[Thought]) -> list[Thought]:
    """Stored thoughts that share a tag with the draft at subcategory level (the merge candidates)."""
    if not draft.tags:
        return [t for t in stored if not t.tags]
    return [t for t in stored if any(tag_overlap(a, b) >= 2 for a in draft.tags for b in t.tags)]


def consolidate(tx: CAIMTx, drafts: Sequence[ThoughtDraft], merger: Merger,
                turns: Sequence[DialogueTurn] = (), guard: bool = True) -> dict[str, int]:
    """Merge drafts into one user's long-term memory inside the caller's transaction; returns counts per action.
    `guard=False` (the raw-turn ablation only) lets verbatim dialogue through."""
    counts = {"new": 0, "duplicate": 0, "contradiction": 0}
    stored = tx.thoughts()
    for d in drafts:
        if guard:
            d = d.model_copy(update={"text": guard_verbatim(d.text, list(turns))})
        dec = merger.decide(d, similar_thoughts(d, stored))
        counts[dec.action] += 1
        if dec.action == "duplicate":
            old = tx.get(dec.target)
            srcs = tuple(dict.fromkeys(old.source_turn_ids + d.source_turn_ids))
            tags = tuple(dict.fromkeys(old.tags + d.tags))[:3]
            text = guard_verbatim(dec.text, list(turns)) if dec.text else old.text
            new = tx.update(old.id, text=text, tags=tags, timestamp=min(old.timestamp, d.timestamp), sources=srcs)
            stored = [new if t.id == old.id else t for t in stored]
        elif dec.action == "contradiction":
            old = tx.delete(dec.target)
            log.info("thought %s superseded: %r -> %r", old.id, old.text, d.text)
            new = tx.insert(d)
            stored = [t for t in stored if t.id != old.id] + [new]
        else:
            stored.append(tx.insert(d))
    return counts
