"""Memory controller: does this user turn need long-term memory at all?

CAIM asks this first so that small talk and general questions neither pay for retrieval nor get distracted
by unrelated memories. Declining is meant to be the exception: a stored memory that could change the answer
must be retrieved. Parts:

- `RuleController` (local): fires on recall cues ("remember", "did I", "you recommended", "last time",
  "what did", "before"), on date references (see `caim.dates`), on second-person past tense ("you told",
  "you gave"), on questions about the user's own preferences or past ("What music do I like?",
  "What dish did I make?", "I don't like X, right?"), and on requests for recommendations, advice, suggestions
  or plans ("can you suggest a dinner spot?", "what should I", "any ideas", "help me choose"), on tasks for the
  assistant ("play something for my drive", "book me a flight") and on questions about the asker's own choices
  ("what song could I learn next?"), whose answer depends on what the user likes. With an embedder it also accepts messages close to a few prototype recall
  phrasings. The patterns live in `retrieve/cues.py`, shared with the recall gate.
- `GatedController`: the decision CAIM makes. Retrieve when the base controller (rules or LLM) says so, or the
  message is a request for advice/recommendations, or the message is close to any stored memory of the user
  (best cosine >= `near`, computed from the query vector retrieval needs anyway); decline only for pure small
  talk (greetings, thanks, acknowledgements) or when nothing fires. `near` is chosen by cross-validation
  (`boundmem bench gvd --cv`).
- `LLMController`: prompt CONTROLLER in `caim.prompts`, strict JSON `{"retrieve": bool}`; anything else
  raises `CAIMLLMError` (`caim.fallback.Fallback` turns that into a logged fall back to the rules).
"""
from __future__ import annotations

from datetime import date
from typing import Optional, Protocol, Sequence, runtime_checkable

from .base import DialogueTurn
from .dates import parse_date_range
from .llmio import ask_json, field
from .prompts import CONTROLLER_SYSTEM, CONTROLLER_USER
from ..retrieve.cues import (advice_request, is_small_talk, later_reason, normalise, personal_request, questions,
                             recall_reason)

__all__ = ["Controller", "RuleController", "LLMController", "GatedController", "advice_request", "is_small_talk",
           "personal_request", "open_request", "recall_question", "cutoff_applies"]

@runtime_checkable
class Controller(Protocol):
    def needs_memory(self, query: str, stm: Sequence[DialogueTurn] = (), today: Optional[date] = None) -> bool: ...


PROTOTYPES = (
    "Do you remember what I told you before?",
    "What did you recommend to me last time?",
    "What did I say about it the other day?",
    "Which book did I mention to you?",
    "What do I like?",
    "What did we talk about on that day?",
)


class RuleController:
    name = "rules"

    def __init__(self, embedder=None, prototype_threshold: float = 0.62):
        self.embedder, self.threshold = embedder, prototype_threshold
        self._protos = None

    def reason(self, query: str, today: Optional[date] = None) -> Optional[str]:
        """Why the query needs memory (a short label), or None."""
        q = normalise(query)
        if r := recall_reason(q):
            return r
        if questions(q) and today and (r := parse_date_range(q, today)) and r.end < today:
            return f"refers to a past date {r.phrase!r}"
        if r := later_reason(q):
            return r
        if self.embedder is not None:
            if self._protos is None:
                self._protos = self.embedder.embed(list(PROTOTYPES))
            sim = float((self._protos @ self.embedder.embed([q])[0]).max())
            if sim >= self.threshold:
                return f"close to a recall phrasing ({sim:.2f})"
        return None

    def needs_memory(self, query: str, stm: Sequence[DialogueTurn] = (), today: Optional[date] = None) -> bool:
        return self.reason(query, today) is not None


class LLMController:
    name = "llm"

    def __init__(self, client, stm_turns: int = 6):
        self.client, self.stm_turns = client, stm_turns

    def needs_memory(self, query: str, stm: Sequence[DialogueTurn] = (), today: Optional[date] = None) -> bool:
        recent = list(stm)[-self.stm_turns:]
        stm_text = "\n".join(f"User: {t.query}\nAI: {t.response}" for t in recent) or "(none yet)"
        data = ask_json(self.client, "memory controller", CONTROLLER_SYSTEM,
                        CONTROLLER_USER.format(stm=stm_text, query=query))
        return field(data, "retrieve", bool, "memory controller")


_RULES = None


def open_request(query: str, today: Optional[date] = None) -> bool:
    """True when the rules see a request for advice/a recommendation/a task (not a recall question): its answer
    depends on the user's standing tastes, which are worded unlike the request, so retrieval keeps the best k without
    the relevance cutoff."""
    global _RULES
    if is_small_talk(query) or not (advice_request(query) or personal_request(query)):
        return False
    _RULES = _RULES or RuleController()
    r = _RULES.reason(query, today)
    return not (r and r.startswith(("recall cue", "asks about the user's own past")))


def recall_question(query: str, today: Optional[date] = None) -> bool:
    """True when the rules see a question about the user's past or own facts (a recall cue, a past date, "what did
    we ...", "what is my ..."): the user says the answer is in memory, so retrieval returns the best k without the
    relevance cutoff, which is for retrievals the controller made only because a stored memory was near."""
    if is_small_talk(query):
        return False
    r = RuleController().reason(query, today)  # patterns only: no embedder, cheap to make
    return r is not None and not r.startswith("asks for a recommendation")


def cutoff_applies(query: str, today: Optional[date] = None) -> bool:
    """Whether retrieval for `query` keeps only what clears the relevance cutoff. Not for a request for advice or a
    task (`open_request`: its relevant memories, the user's tastes, are worded unlike it) nor for a recall question
    (`recall_question`: the user says the answer is in memory): the cutoff guards what the controller retrieved only
    because a stored memory was near. One decision for CAIM (`caim.system`) and Memory's episodes (`episodes.py`)."""
    return not (open_request(query, today) or recall_question(query, today))


class GatedController:
    """CAIM's decision: base controller, or an advice request, or a nearby stored memory; small talk declines.

    `decide(query, stm, today, nearest)` -> (retrieve?, reason); `nearest` is the best cosine between the query and
    the user's stored thoughts (None when unknown: then only the rules decide).
    """

    def __init__(self, base: Controller, near: float = 0.35):
        self.base, self.near = base, near
        self.name = f"gated({getattr(base, 'name', type(base).__name__)})"

    def decide(self, query: str, stm: Sequence[DialogueTurn] = (), today: Optional[date] = None,
               nearest: Optional[float] = None) -> tuple[bool, str]:
        if is_small_talk(query):
            return False, "small talk"
        reason = self.base.reason(query, today) if hasattr(self.base, "reason") else None
        if reason is not None:
            return True, reason
        if not hasattr(self.base, "reason") and self.base.needs_memory(query, stm, today):
            return True, "controller"
        if cue := advice_request(query) or personal_request(query):
            return True, f"asks for a recommendation or advice {cue!r}"
        if nearest is not None and nearest >= self.near:
            return True, f"close to a stored memory ({nearest:.2f})"
        return False, "no recall cue and no stored memory nearby"

    def needs_memory(self, query: str, stm: Sequence[DialogueTurn] = (), today: Optional[date] = None,
                     nearest: Optional[float] = None) -> bool:
        return self.decide(query, stm, today, nearest)[0]
