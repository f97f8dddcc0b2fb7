"""Memory controller: does this user turn need long-term memory at all?

CAIM asks this first so that small talk and general questions neither pay for retrieval nor get distracted
by unrelated memories. Two implementations:

- `RuleController` (local): fires on recall cues ("remember", "did I", "you recommended", "last time",
  "what did", "before"), on date references (see `caim.dates`), on second-person past tense ("you told",
  "you gave"), and on questions about the user's own preferences or past ("What music do I like?",
  "What dish did I make?", "I don't like X, right?"). With an embedder it also accepts messages close to a few
  prototype recall phrasings. It cannot tell that "recommend me a book" would profit from known tastes: it
  errs towards not retrieving for fresh requests.
- `LLMController`: prompt CONTROLLER in `caim.prompts`, strict JSON `{"retrieve": bool}`; anything else
  raises `CAIMLLMError` (`caim.fallback.Fallback` turns that into a logged fall back to the rules).
"""
from __future__ import annotations

import re
from datetime import date
from typing import Optional, Protocol, Sequence, runtime_checkable

from .base import DialogueTurn
from .dates import parse_date_range
from .llmio import ask_json, field
from .prompts import CONTROLLER_SYSTEM, CONTROLLER_USER

@runtime_checkable
class Controller(Protocol):
    def needs_memory(self, query: str, stm: Sequence[DialogueTurn] = (), today: Optional[date] = None) -> bool: ...


_REMEMBER = re.compile(r"\b((do|can|did) you (still )?remember|you remember|remember (what|when|which|who|where|how|me)|"
                       r"recall|remind me)\b", re.I)
# statements pointing back that make the question after them a recall question
# ("You once recommended a few cooking shows to me. What were their names?")
_BACK_REF = re.compile(r"\b(you once|i once|you (recommended|suggested|taught|told|gave|showed) me|"
                       r"i (told|shared with|mentioned to|recommended to) you)\b", re.I)
# cues that count inside a question sentence ("...you recommended?" but not "the ones you recommended are great!")
_CUES = re.compile(
    r"\b(did i|have i|was i|had i|i (once|previously|earlier) |"
    r"you (once |previously |earlier )?(recommended|suggested|advised|told|taught|gave|shared|mentioned|said|helped)|"
    r"did you|(have you|you have) (ever |once )?(recommended|suggested|told|given|shared|taught)|last time|"
    r"previous(ly)?|before|we (talked|discussed|chatted|spoke)|our (first |last |previous )?(conversation|chat|talk)|"
    r"i (told|mentioned|shared|said|asked|consulted|recommended)( with)? you|"
    r"(what|which|who|where|when|why|how)\b[^.?!]*\b(did|was|were|had) i\b|right\?$)",
    re.I)
# "What music do I like?", "Where do I like to shoot?", "What kind of cuisine do I like?"
_SELF_PREF = re.compile(r"\b(what|which|who|where|how)\b[^.?!]*\b(do|am|have) i\b[^.?!]*\b(like|love|enjoy|prefer|"
                        r"hate|dislike|want|play|listen|watch|read|have|own|know)\b", re.I)
_SELF_FACT = re.compile(r"\b(what|who|when|where|which|how many|how much)\b[^.?!]*\bmy\b", re.I)
# a question about something the user did or has ("I went to the museum, and the exhibit ... was?",
# "I have a badminton group. How many people are there in it?")
_OWN_PAST_Q = re.compile(r"\b(i|i've|i have) (went|watched|have watched|read|bought|made|cooked|saw|visited|"
                         r"encountered|met|had|ran|played|wrote|painted)\b[^.!?]*\?", re.I)
_OWN_THING_Q = re.compile(r"\bi have an? [^.?!]+[.!]\s+(how many|what|which|who|where)\b[^.?!]*"
                          r"\b(it|its|them|they|there|that)\b[^.?!]*\?", re.I)
_DATE_WORDS = re.compile(r"\b(january|february|march|april|may|june|july|august|september|october|november|"
                         r"december)\s+[0-3]?\d|\b(yesterday|days? ago|last (week|month|night|monday|tuesday|"
                         r"wednesday|thursday|friday|saturday|sunday))\b", re.I)
_SENT = re.compile(r"(?<=[.!?])\s+")


def _questions(text: str) -> str:
    return " ".join(x for x in _SENT.split(text) if "?" in x)


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
        q = " ".join(query.strip().strip('"').split())
        qs = _questions(q)
        if m := _REMEMBER.search(q):
            return f"recall cue {m.group(0)!r}"
        if qs and (m := (_CUES.search(qs) or _BACK_REF.search(q))):
            return f"recall cue {m.group(0)!r}"
        if qs and (m := (_SELF_PREF.search(qs) or _SELF_FACT.search(qs))):
            return f"asks about the user's own preferences or facts {m.group(0)!r}"
        if m := (_OWN_PAST_Q.search(q) or _OWN_THING_Q.search(q)):
            return f"asks about the user's own past {m.group(0)[:40]!r}"
        if qs and today and (r := parse_date_range(q, today)) and r.end < today:
            return f"refers to a past date {r.phrase!r}"
        if qs and _DATE_WORDS.search(q):
            return "refers to a past date"
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
