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
  phrasings. These rules were first written while reading GVD's probing questions; the request rule was added
  for preference-dependent requests in other domains.
- `GatedController`: the decision CAIM makes. Retrieve when the base controller (rules or LLM) says so, or the
  message is a request for advice/recommendations, or the message is close to any stored memory of the user
  (best cosine >= `near`, computed from the query vector retrieval needs anyway); decline only for pure small
  talk (greetings, thanks, acknowledgements) or when nothing fires. `near` is chosen by cross-validation
  (`boundmem bench gvd --cv`).
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
# the user and the assistant, or the user and someone, did something together ("Which movie did we argue about?",
# "What was the name of the place we ate at?", "Which friend was with me at the film?")
_OUR_PAST = re.compile(r"\b((did|were|had) we|we (\w+ed|ate|went|saw|had|met|did|took|got|made|spent|bought|"
                       r"heard|read|ran|sang|drove|flew|sat|found|tried|chose|picked|left)|(was|were) (with|for) (me|us))\b",
                       re.I)
# what the user is doing now or who does something for them ("What instrument am I learning?", "Who teaches me?")
_OWN_NOW = re.compile(r"\b(what|which|who|where)\b[^.?!]*\b(am i|are we) \w+ing\b|"
                      r"^\W*(who|what|which \w+) (\w+s) (me|us)\b", re.I)
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
# requests whose answer depends on the user's tastes, constraints or history
_ADVICE = re.compile(
    r"\b(recommend\w*|suggest\w*|advi[cs]e|tips?|ideas?|plan|planning|what should i|should i|where should|"
    r"which (one |\w+ )?(should|would|could)|(would|should) you (pick|choose|go (for|with)|take)|what (would|do) you (think|suggest|recommend)|help me (choose|pick|decide|"
    r"find|plan|with)|what (can|could) i|where (can|could) i|how (can|could|should) i|i need (a|an|some|to find)|"
    r"i'?m looking for|looking for (a|an|some)|any good|good (place|spot|restaurant|option|gift|book|movie|song)s?|"
    r"options? for|what'?s (a )?good|worth (trying|visiting|watching|reading|buying)|pick (a|an|one|something)|"
    r"find me|book (me )?(a|an)|gift for|what to (eat|cook|wear|buy|watch|read|do|play)|where to (eat|go|stay))\b",
    re.I)
# a sentence that is only a greeting, thanks, acknowledgement or goodbye
_SMALLTALK = re.compile(
    r"((hi|hello|hey|hiya|yo)( there| again| friend)?|good (morning|afternoon|evening|night)|"
    r"(thanks|thank you|thx|ty|cheers|many thanks)( (so|very) much| a lot| again)?( for [\w' ]{1,40})?|"
    r"(i )?appreciate (it|that|your help)|ok(ay)?|sure|great|cool|nice|awesome|perfect|wonderful|alright|got it|"
    r"sounds good|will do|no problem|you'?re welcome|lol|haha|bye|goodbye|see you( later| soon| tomorrow)?|"
    r"(have a )?(good|nice|great) (day|night|one|weekend)|you too|how are you( doing)?( today)?|"
    r"how'?s it going|what'?s up|i'?m (fine|good|great|ok|okay)( thanks| thank you)?|nice to (meet|see) you)",
    re.I)


# a task for the assistant ("play something for my drive", "book me a flight") or a question about what the user
# should do or get ("how do I get to Vienna?", "which class would suit me?"): the answer may depend on the user
_TASK = re.compile(r"^\W*(please |ok(ay)? |hey |so |now )?((can|could|would|will) you (please )?)?"
                   r"(play|book|find|plan|make|organi[sz]e|order|reserve|buy|get me|put together|choose|pick|"
                   r"recommend|suggest|cook|prepare|arrange|schedule|create|build|design|put on|queue|reserve|"
                   r"give me (some |a |an )?(ideas?|tips?|options?|suggestions?|advice))\b", re.I)
_PERSONAL_Q = re.compile(r"\b(i|me|my|we|us|our)\b", re.I)
_GOOD_FOR = re.compile(r"\b(good|best|better|ideal|suitable|right) (for|to|way|option|choice)\b|\bsuits?\b|"
                       r"\bmust-?(try|see|do|visit|have|eat)\b|\b(what'?s|what is|which is) (a|an|the) (good|great|fun|"
                       r"nice|best|cheap|romantic|quiet|relaxing|interesting|local)\b", re.I)


def personal_request(text: str) -> Optional[str]:
    """A task for the assistant, or a question whose answer depends on the asker ("what song could I learn next?",
    "what exercises are good for building strength"), or None. Chit-chat ("tell me a joke") is not one."""
    q = " ".join(text.split())
    for clause in re.split(r"[.!?;,]\s+|\s+(?:and|so|but) (?=\w+ me\b)", q):  # "I have an exam, make me a playlist"
        if m := _TASK.search(clause):
            return m.group(0).strip()
    qs = _questions(q) or (q if re.match(r"^\W*(what|which|where|how|who|when|should|can|could)\b", q, re.I) else "")
    if qs and (m := _PERSONAL_Q.search(qs)) and re.search(r"\b(should|could|can|would|do|will|need)\b", qs, re.I):
        return f"question about the user's own choice {m.group(0)!r}"
    if qs and (m := _GOOD_FOR.search(qs)):
        return m.group(0)
    return None


def is_small_talk(text: str) -> bool:
    """True when every sentence of the message is a greeting, thanks, acknowledgement or goodbye."""
    parts = [p.strip(" \t,;:.!?~-") for p in re.split(r"[.!?\n]+|,\s*", text)]
    parts = [p for p in parts if p]
    return bool(parts) and all(_SMALLTALK.fullmatch(p) for p in parts)


def advice_request(text: str) -> Optional[str]:
    """The cue of a request for a recommendation, advice, suggestion or plan, or None."""
    m = _ADVICE.search(text)
    return m.group(0) if m else None


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
        if qs and (m := (_SELF_PREF.search(qs) or _SELF_FACT.search(qs) or _OUR_PAST.search(qs)
                         or _OWN_NOW.search(qs))):
            return f"asks about the user's own preferences or facts {m.group(0)!r}"
        if m := (_OWN_PAST_Q.search(q) or _OWN_THING_Q.search(q)):
            return f"asks about the user's own past {m.group(0)[:40]!r}"
        if qs and today and (r := parse_date_range(q, today)) and r.end < today:
            return f"refers to a past date {r.phrase!r}"
        if qs and _DATE_WORDS.search(q):
            return "refers to a past date"
        if (cue := advice_request(q) or personal_request(q)) and not is_small_talk(q):
            return f"asks for a recommendation or advice {cue!r}"
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
