"""Rule-based compression of one dialogue turn into short third-person thoughts (the local post-thinking).

What it can do: drop greetings, thanks and filler; rewrite first person to "User ..." (with simple verb
agreement) and "you" to "AI"; turn "can you recommend X?" into "User asked AI for X"; resolve "today" /
"yesterday" against the session date; turn an assistant reply into "AI recommended <quoted titles / names> to user
(for <topic>)" or "AI advised user on <topic>: <its key clause>"; cap every thought at `max_words`.
What it cannot do: generalise across turns ("user is an art lover"), resolve "it"/"that" to earlier turns, or
judge importance the way an LLM does; sentences are selected, not understood. Use the LLM thinker for that.
A final guard guarantees no thought contains a whole raw query or reply of more than a few words.
"""
from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Optional

from .base import DialogueTurn

MAX_WORDS = 32
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'“])")
_LEAD = re.compile(r"^((hi|hello|hey|okay|ok|oh|yes|yeah|yep|wow|haha|hmm|um|well|sure|alright|great|right|no|"
                   r"thanks|thank you|indeed|of course|i see|good|nice|exactly|really)\b[\s,!.~]*)+", re.I)
_PLEASANTRY = re.compile(r"^(that'?s|that is|it'?s|this is|sounds|you'?re|you are|what a|how|thank|thanks|"
                         r"nice to meet|glad to|good idea|i agree|i see|i understand|i will (try|do|keep|take a look|check)|i'll (try|do|keep|take a look|check)|"
                         r"no problem|have a|goodbye|bye|see you|for (your|the|all) (kind |great |good |helpful )?(suggestions?|advice|"
                         r"recommendations?|help|tips|ideas))\b.{0,60}$", re.I)
_AI_SMALLTALK = re.compile(r"\b(as an ai|i am an ai|i'm an ai|ai companion|i don'?t have (a physical|emotions|personal)|"
                           r"you'?re welcome|feel free|happy to help|glad (i could|to hear)|i cannot (experience|participate))",
                           re.I)
_FILLER = re.compile(r"\b(really|very|just|actually|quite|basically|kind of|sort of|pretty much|definitely|"
                     r"truly|literally|haha|um|uh)\b\s*", re.I)
_ASK = re.compile(r"\b(?:can|could|would|will) you (?:please )?(?:recommend|suggest|give me|tell me about|share|"
                  r"teach me|introduce)\s+(?:me\s+)?(?P<topic>[^?]+)\?", re.I)
_ASK2 = re.compile(r"\b(?:do you have|any|are there|have you got) (?:any |some )?(?:good |other )?"
                   r"(?:recommendations?|suggestions?|advice|tips|ideas|methods|ways|recommended)"
                   r"(?: (?:for|on|about|to|of))?\s*(?P<topic>[^?]*)\?", re.I)
_HOWTO = re.compile(r"\bhow (?:can|do|should|could) i (?P<topic>[^?]+)\?", re.I)
_QUOTED = re.compile(r"[\"“]([^\"”]{2,60})[\"”]")
_NAMES = re.compile(r"\b([A-Z][a-z]+(?:\s+(?:da|de|van|von|of|the|and|&)?\s*[A-Z][a-z]+)*)")
_REC_SENT = re.compile(r"\b(recommend|suggest|try|you can|you could|you might|you should|consider|such as|include|"
                       r"here'?s|tips?|advice|methods?|ways? to|steps?)\b", re.I)
_PRONOUN_TOPIC = re.compile(r"^(for |to |about )?(me|you|it|this|that|them|us)?\s*$", re.I)

_IRREGULAR = {"is": "is", "has": "has", "does": "does", "doesn't": "doesn't", "are": "is", "isn't": "isn't",
              "hasn't": "hasn't", "aren't": "isn't", "am": "is", "was": "was", "have": "has", "do": "does", "don't": "doesn't", "go": "goes",
              "haven't": "hasn't", "can": "can", "will": "will", "would": "would", "could": "could", "should": "should",
              "must": "must", "might": "might", "did": "did", "didn't": "didn't", "had": "had", "can't": "can't",
              "won't": "won't", "wasn't": "wasn't", "may": "may", "need": "needs", "went": "went", "saw": "saw",
              "made": "made", "read": "read", "bought": "bought", "ran": "ran", "ate": "ate", "took": "took",
              "met": "met", "felt": "felt", "got": "got", "found": "found", "thought": "thought", "came": "came",
              "heard": "heard", "spent": "spent", "began": "began", "wrote": "wrote", "drew": "drew", "left": "left",
              "sang": "sang", "swam": "swam", "won": "won", "lost": "lost", "taught": "taught", "told": "told",
              "gave": "gave", "kept": "kept", "slept": "slept", "also": "also", "often": "often", "usually": "usually",
              "always": "always", "never": "never", "still": "still", "recently": "recently", "once": "once",
              "and": "and", "to": "to", "not": "not", "sometimes": "sometimes", "mostly": "mostly"}
_ADVERBS = {"also", "often", "usually", "always", "never", "still", "recently", "once", "sometimes", "mostly",
            "really", "lately", "now", "especially", "particularly", "even"}


def _third(verb: str) -> str:
    lw = verb.lower()
    if lw in _IRREGULAR:
        return _IRREGULAR[lw]
    if not lw.isalpha() or lw.endswith("ed"):
        return verb
    if re.search(r"(s|sh|ch|x|z|o)$", lw):
        return verb + "es"
    if re.search(r"[^aeiou]y$", lw):
        return verb[:-1] + "ies"
    return verb + "s"


def _agree(m: re.Match) -> str:
    """'User' + adverbs + verb -> third-person singular verb."""
    words = m.group(2).split()
    out, done = [], False
    for w in words:
        if not done and w.lower() not in _ADVERBS:
            out.append(_third(w))
            done = True
        else:
            out.append(w)
    return m.group(1) + " ".join(out)


def third_person(text: str, subject: str = "User") -> str:
    """First person -> "User", second person (the assistant) -> "AI"."""
    s = text
    s = re.sub(r"\bI'm\b", f"{subject} is", s)
    s = re.sub(r"\bI've\b", f"{subject} has", s)
    s = re.sub(r"\bI'd\b", f"{subject} would", s)
    s = re.sub(r"\bI'll\b", f"{subject} will", s)
    s = re.sub(r"\bI\b", subject, s)
    s = re.sub(r"\b(my|My)\b", "user's", s)
    s = re.sub(r"\bmine\b", "user's", s)
    s = re.sub(r"\bmyself\b", "themself", s)
    s = re.sub(r"\b(me|Me)\b", "user", s)
    s = re.sub(r"\b(we|We)\b", "user and AI", s)
    s = re.sub(r"\b(our|Our)\b", "their", s)
    s = re.sub(r"\b(us)\b", "user and AI", s)
    s = re.sub(r"\byou're\b", "AI is", s, flags=re.I)
    s = re.sub(r"\byour\b", "AI's", s, flags=re.I)
    s = re.sub(r"\byou\b", "AI", s, flags=re.I)
    s = re.sub(rf"(\b{subject} )((?:\w+ ){{0,2}}[\w']+)", _agree, s)
    return s


def ai_view(text: str) -> str:
    """An assistant reply in third person: "I" is the AI, "you" is the user."""
    s = text
    s = re.sub(r"\bI'm\b", "AI is", s)
    s = re.sub(r"\bI've\b", "AI has", s)
    s = re.sub(r"\bI'd\b", "AI would", s)
    s = re.sub(r"\bI'll\b", "AI will", s)
    s = re.sub(r"\bI (would |highly |strongly )?(recommend|suggest)s?\b", "AI recommended", s)
    s = re.sub(r"\bI\b", "AI", s)
    s = re.sub(r"\b(my|My)\b", "AI's", s)
    s = re.sub(r"\b(me|Me)\b", "AI", s)
    s = re.sub(r"\byou're\b", "user is", s, flags=re.I)
    s = re.sub(r"\byourself\b", "themself", s, flags=re.I)
    s = re.sub(r"\byours\b", "user's", s, flags=re.I)
    s = re.sub(r"\byour\b", "user's", s, flags=re.I)
    s = re.sub(r"\byou\b", "user", s, flags=re.I)
    s = re.sub(r"(\b(?:user|AI) )((?:\w+ ){0,2}[\w']+)", lambda m: m.group(0) if m.group(2).split()[0].lower() in
               ("can", "could", "may", "might", "should", "would", "will", "must", "to", "and", "or") else _agree(m), s)
    return s


def _absolute_dates(text: str, day: date) -> str:
    s = re.sub(r"\bthe day before yesterday\b", f"on {(day - timedelta(days=2)).isoformat()}", text, flags=re.I)
    s = re.sub(r"\b(yesterday|last night)\b", f"on {(day - timedelta(days=1)).isoformat()}", s, flags=re.I)
    s = re.sub(r"\b(today|this morning|this afternoon|this evening|tonight)\b", f"on {day.isoformat()}", s, flags=re.I)
    return s


def _clean(sentence: str) -> str:
    s = _LEAD.sub("", sentence.strip())
    s = _FILLER.sub("", s)
    s = re.sub(r"\s+([,.!?])", r"\1", s)
    return " ".join(s.split()).strip(" ,;")


def _cap(text: str, max_words: int) -> str:
    w = text.split()
    if len(w) <= max_words:
        return text.rstrip(" ,;")
    cut = " ".join(w[:max_words]).rstrip(" ,;")
    return cut + " ..."


def _sentences(text: str) -> list[str]:
    return [x for x in (_SENT.split(" ".join(text.split()))) if x.strip()]


def _topic(query: str) -> Optional[str]:
    for rx in (_ASK, _ASK2, _HOWTO):
        if m := rx.search(query):
            t = _clean(m.group("topic")).rstrip("?. ")
            if t and not _PRONOUN_TOPIC.match(t):
                return third_person(t)
    return None


_SHORT_SELF = re.compile(r"^(i'?m|i am)\s+(?!(fine|ok|okay|good|great|well|back|here|sorry|done|ready|sure|in|not)\b)"
                         r"[a-z-]{4,}\W*$", re.I)


def user_thought(turn: DialogueTurn, day: date, max_words: int = MAX_WORDS) -> Optional[str]:
    """What the user said, as one compressed third-person sentence; None for pure small talk."""
    parts = []
    for sent in _sentences(turn.query):
        if _PLEASANTRY.match(sent.strip()):
            continue
        s = _clean(sent)
        if not s or _PLEASANTRY.match(s):
            continue
        if "?" in s:
            topic = None
            for rx in (_ASK, _ASK2, _HOWTO):
                if m := rx.search(s):
                    topic = _clean(m.group("topic")).rstrip("?. ")
                    break
            if topic and not _PRONOUN_TOPIC.match(topic):
                parts.append(f"asked AI about {third_person(topic)}")
            elif re.search(r"\b(I|my|me)\b", s) and not re.match(r"^(do|have|did|are|can|would) you\b", s, re.I):
                parts.append(third_person(s.rstrip("?")).rstrip(". "))
            continue
        if len(s.split()) < 3 and not _SHORT_SELF.match(s):  # "I'm vegetarian." is a fact worth keeping
            continue
        parts.append(third_person(s).rstrip(". "))
    if not parts:
        return None
    body = "; ".join(parts)
    body = _absolute_dates(body, day)
    if not body.startswith("User"):
        body = "User: " + body
    return _cap(body, max_words)


def ai_thought(turn: DialogueTurn, day: date, max_words: int = MAX_WORDS) -> Optional[str]:
    """What the assistant recommended or advised, as "AI recommended ..." / "AI advised ..."; None for chit-chat."""
    sents = [s for s in _sentences(turn.response) if not _AI_SMALLTALK.search(s) and not s.rstrip().endswith("?")]
    if not sents:
        return None
    topic = _topic(turn.query)
    titles = list(dict.fromkeys(q.strip(" ,.") for q in _QUOTED.findall(turn.response)))
    if titles:
        text = f"AI recommended {', '.join(titles[:6])} to user" + (f" ({topic})" if topic else "")
        return _cap(text, max_words)
    key = [s for s in sents if _REC_SENT.search(s)]
    if not key and not topic:
        return None
    names = [n for n in dict.fromkeys(_NAMES.findall(" ".join(s.split(" ", 1)[1] if " " in s else "" for s in key)))
             if n.lower() not in {"ai", "i", "user", "you", "it", "the", "this", "these", "they", "if", "for"} and len(n) > 2]
    clause = ai_view(_clean(key[0] if key else sents[0]))
    lead = "AI advised user" + (f" on {topic}" if topic else "")
    if names and len(names) >= 2:
        lead = "AI recommended " + ", ".join(names[:6]) + " to user" + (f" ({topic})" if topic else "")
        return _cap(lead, max_words)
    return _cap(f"{lead}: {clause}", max_words)


def _norm(s: str) -> str:
    return " ".join(re.findall(r"[a-z0-9']+", s.lower()))


def contains_verbatim(thought: str, raw: str, min_words: int = 6) -> bool:
    """True when `raw` (a whole query or reply of >= min_words words) appears inside `thought`."""
    r = _norm(raw)
    return len(r.split()) >= min_words and r in _norm(thought)


def guard_verbatim(thought: str, turns: list[DialogueTurn], min_words: int = 6) -> str:
    """Cut a thought that still holds a whole raw turn so long-term memory never stores dialogue verbatim."""
    for t in turns:
        for raw in (t.query, t.response):
            while contains_verbatim(thought, raw, min_words):
                words = thought.split()
                thought = " ".join(words[: max(1, len(words) - max(2, len(words) // 4))]) + " ..."
    return thought
