"""MemoryBank (Zhong et al., AAAI 2024) re-implemented as a GVD baseline under the same conditions as CAIM.

Same embedder and the same k as the other systems, so differences come from what is stored and how it is ranked:
- every turn is one document, "Conversation content on {date}: [|User|]: q; [|AI|]: r", id = the turn id;
- every day adds a summary document, "The summary of the conversation on {date} is: ...", written by the LLM when one is
  configured; without one it is an *extractive* summary: the first sentence of each user utterance that day, joined and
  cut to `summary_chars` (honestly weaker than an LLM summary, but deterministic);
- retrieval is cosine top-k over all documents of the user;
- optional forgetting with the paper's Ebbinghaus curve R = exp(-t/S) (t = days since the last recall, S = strength,
  1 at creation, +1 on every recall, which also resets the last-recall date). The authors' code applies
  exp(-t/5*S), which Python reads as exp(-(t/5)*S), so stronger memories would fade faster; we use the paper's formula.
  Randomness is reproducible: each document gets a fixed uniform draw u from (seed, user, doc id), and it is forgotten
  as soon as u > R. Because R only falls between recalls, this equals one fresh draw at the moment of asking, which is
  what the original does when it reloads the bank, yet the run is the same every time.
Left out: the original's 200-character chunking with neighbour stitching (documents are whole turns) and the global
summary / personality portraits (they feed the answer prompt, not retrieval, and the answer prompt is shared by all
systems in the bench).
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import date
from typing import Optional

import numpy as np

from boundmem.caim.base import DialogueTurn, MemoryItem, RetrievalResult, StorageStats
from boundmem.embed import Embedder

from ._common import ChatLLM, ask, clip, sentences, top_k

SUMMARY_PROMPT = (
    "Summarize the following dialogue between a user and an AI companion as concisely as possible. Keep the main "
    "topics, the facts the user shared about themselves and anything the AI recommended. Reply with the summary only.\n\n"
    "{dialogue}"
)


def retention(days: float, strength: float) -> float:
    """Ebbinghaus retention R = exp(-t/S) as written in the MemoryBank paper."""
    if strength <= 0:
        raise ValueError("memory strength must be positive")
    return math.exp(-max(days, 0.0) / strength)


def stable_uniform(seed: int, *parts: str) -> float:
    """A uniform draw in [0, 1) that depends only on its inputs, not on call order or the process."""
    h = hashlib.blake2b("\x1f".join((str(seed),) + parts).encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2.0 ** 64


@dataclass
class _Doc:
    id: str
    text: str
    day: date
    kind: str  # "turn" | "summary"
    source_turn_ids: tuple[str, ...]
    draw: float
    strength: float = 1.0
    last_recall: Optional[date] = None

    def item(self, score: float) -> MemoryItem:
        tags = ("summary",) if self.kind == "summary" else ("turn",)
        return MemoryItem(id=self.id, text=self.text, source_turn_ids=self.source_turn_ids, tags=tags,
                          timestamp=self.day, score=score)


@dataclass
class _Bank:
    docs: list[_Doc]
    vecs: np.ndarray
    forgotten: int = 0


class MemoryBank:
    """One bank per user; nothing is shared between users except the embedder's text cache."""

    def __init__(self, embedder: Embedder, llm: Optional[ChatLLM] = None, *, forgetting: bool = False, seed: int = 0,
                 summary_chars: int = 400, initial_strength: float = 1.0, name: Optional[str] = None):
        self.embedder = embedder
        self.llm = llm
        self.forgetting = forgetting
        self.seed = seed
        self.summary_chars = summary_chars
        self.initial_strength = initial_strength
        self.name = name or ("memorybank-forget" if forgetting else "memorybank")
        self.llm_failures = 0
        self._banks: dict[str, _Bank] = {}

    # --- writing ----------------------------------------------------------------------------------------------
    def add_session(self, user: str, day: date, turns: list[DialogueTurn]) -> None:
        bank = self._banks.setdefault(user, _Bank([], np.zeros((0, self.embedder.dim), np.float32)))
        self._forget(user, bank, day)
        if not turns:
            return
        docs = [self._doc(user, t.id, f"Conversation content on {day.isoformat()}: [|User|]: {t.query}; "
                                      f"[|AI|]: {t.response}", day, "turn", (t.id,)) for t in turns]
        summary = self._summary(turns)
        if summary:
            docs.append(self._doc(user, f"{day.isoformat()}#summary",
                                  f"The summary of the conversation on {day.isoformat()} is: {summary}", day,
                                  "summary", ()))
        vecs = self.embedder.embed([d.text for d in docs]).astype(np.float32)
        bank.docs.extend(docs)
        bank.vecs = np.vstack([bank.vecs, vecs])

    def _doc(self, user: str, doc_id: str, text: str, day: date, kind: str, sources: tuple[str, ...]) -> _Doc:
        return _Doc(id=doc_id, text=text, day=day, kind=kind, source_turn_ids=sources,
                    draw=stable_uniform(self.seed, user, doc_id), strength=self.initial_strength, last_recall=day)

    def _summary(self, turns: list[DialogueTurn]) -> str:
        if self.llm is not None:
            dialogue = "\n".join(f"User: {t.query}\nAI: {t.response}" for t in turns)
            try:
                text = ask(self.llm, SUMMARY_PROMPT.format(dialogue=dialogue)).strip()
                if text:
                    return text
            except Exception:  # a failing LLM must not lose the day: fall back to the extractive summary
                pass
            self.llm_failures += 1
        firsts = [sentences(t.query)[0] for t in turns if sentences(t.query)]
        return clip(" ".join(firsts), self.summary_chars)

    # --- forgetting -------------------------------------------------------------------------------------------
    def _forget(self, user: str, bank: _Bank, today: date) -> None:
        if not self.forgetting or not bank.docs:
            return
        keep = [i for i, d in enumerate(bank.docs)
                if d.draw <= retention((today - (d.last_recall or d.day)).days, d.strength)]
        if len(keep) < len(bank.docs):
            bank.forgotten += len(bank.docs) - len(keep)
            bank.docs = [bank.docs[i] for i in keep]
            bank.vecs = bank.vecs[keep]

    # --- reading ----------------------------------------------------------------------------------------------
    def retrieve(self, user: str, query: str, today: date, k: int = 5) -> RetrievalResult:
        bank = self._banks.get(user)
        if bank is None:
            return RetrievalResult(retrieved=True, items=[])
        self._forget(user, bank, today)
        q = self.embedder.embed([query])[0]
        hits = top_k(bank.vecs, q, k)
        for i, _ in hits:  # recall strengthens the memory and restarts its clock
            bank.docs[i].strength += 1.0
            bank.docs[i].last_recall = today
        return RetrievalResult(retrieved=True, items=[bank.docs[i].item(s) for i, s in hits])

    def storage(self, user: str) -> StorageStats:
        bank = self._banks.get(user)
        if bank is None:
            return StorageStats(items=0, chars=0)
        return StorageStats(items=len(bank.docs), chars=sum(len(d.text) for d in bank.docs))

    def forgotten(self, user: str) -> int:
        bank = self._banks.get(user)
        return bank.forgotten if bank else 0

    def stats(self, user: str) -> dict[str, int]:
        return {"merged": 0, "forgotten": self.forgotten(user)}
