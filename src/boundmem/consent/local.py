"""Consent by voice: "stop remembering where I like to eat", "forget my music preferences".

A user turn is read clause by clause (wake words and fillers stripped, as for extraction). A clause is a consent
request only when it *starts* (after "please", "can you", "I want you to", ...) with a consent verb phrase aimed at
the assistant's memory, and its object names a category of the schema:

- opt-out (stop remembering: purge and never store again): "stop remembering|tracking|storing ...",
  "don't|do not|never remember|keep track of|store|save ...", "no longer remember ...", "I don't want you to remember ...";
- deletion (remove what is stored there; storing later is allowed): "forget|delete|erase|remove|clear|wipe ..." whose
  object is memory ("what you know about my parking", "my music preferences", "everything about X",
  "where I like to eat", "that I like jazz"); "forget the parking, let's go" or "delete the route" are not.

Anything else is no consent: statements ("I always forget my keys", "I like to eat Italian"), questions ("do you
remember where I like to eat?"), commands ("stop the music"), and "don't forget my music preferences".

The object ("where I like to eat", "music") is resolved against the schema in three steps: words of a main, sub or
detail *name* (the best covered name wins, the broader level on a tie); else words of the main/sub descriptions and
the details' vocabulary; else MiniLM similarity to every node's name and description (above a floor, with a margin
over the runner-up). No match means no consent action: a consent verb about something the schema does not hold
("stop tracking my location") changes nothing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np

from ..models import Conversation
from ..schema.model import Schema

# Why a pattern: the wake word is a product's own name set by the operator, not language a model learns from data
_WAKE = re.compile(
    r"^\s*(?:(?:hey|hi|hello|ok|okay|yo|ey)[\s,]+)?(?:car|olly|ollie|alexa|siri|google|computer|assistant|jarvis|"
    r"cortana|mercedes|bmw|audi|navi|buddy)\b[\s,.:;!]*", re.I)


Kind = Literal["opt_out", "delete"]

# what may come before the verb: fillers, politeness, "can you", "I want you to"
_FILL = r"^(?:(?:ok(?:ay)?|so|and|also|now|hey|well|oh|actually|from now on|going forward|in (?:the )?future)[\s,]+)*"
_POLITE = (r"(?:(?:please|kindly)\s+)?(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?|"
           r"i\s*(?:want|need|would like|'d like|d like)\s+you\s+to\s+)?(?:please\s+)?")
_MEM_VERB = (r"(?:remember(?:ing)?|keep(?:ing)?\s+track\s+of|track(?:ing)?|stor(?:e|ing)|sav(?:e|ing)|record(?:ing)?|"
             r"log(?:ging)?|learn(?:ing)?|collect(?:ing)?|keep(?:ing)?\s+(?:a\s+)?(?:note|notes|record|records)\s+(?:of|on|about)|"
             r"note\s+down|not(?:e|ing)\s+down)")
_OPT_OUT = re.compile(
    _FILL + r"(?:" + _POLITE + r"(?:stop|quit|cease)\s+" + _MEM_VERB
    + r"|" + _POLITE + r"(?:don't|do not|dont|never|no longer)\s+" + _MEM_VERB
    + r"|i\s+(?:don't|do not|dont)\s+want\s+you\s+to\s+(?:" + _MEM_VERB + r"|know)"
    + r"|i'?d\s+rather\s+you\s+(?:didn't|did not)\s+" + _MEM_VERB
    + r")\s+(?:anything\s+(?:about|of)\s+|(?:about|of)\s+)?(?P<obj>.+)$", re.I)
_DELETE = re.compile(_FILL + _POLITE + r"(?:forget|delete|erase|remove|clear|wipe|purge|drop)\s+(?:about\s+)?(?P<obj>.+)$",
                     re.I)

# the object of a deletion must be memory, not a thing ("forget the parking, let's go", "delete the route")
_MEMORY_NOUN = r"(?:preferences?|prefs|tastes?|habits?|likes|dislikes|data|info|information|details|history|profile|" \
               r"memor(?:y|ies))"
_DELETE_OBJ = re.compile(
    r"^(?:(?:all|any)\s+(?:of\s+)?)?(?:(?:what|everything|anything|all)\s+(?:that\s+)?you(?:'ve|\s+have)?\s+"
    r"(?:know|knew|remember|stored|saved|learned|learnt|recorded|got|kept|noted|have)\b.*|"
    r"(?:everything|anything|all)\s+(?:you\s+\w+\s+)?(?:about|on|regarding)\s+.+|"
    r"(?:my|the|our|all\s+my|all\s+the|all)\s+(?:.+\s+)?" + _MEMORY_NOUN + r"\b.*|"
    r"(?:where|what|which|how|when)\s+i\s+.+|that\s+i\s+.+)$", re.I)
_MINE = re.compile(r"^(?:anything\s+(?:about|of)\s+)?my\s+\w", re.I)
_QUESTION_START = re.compile(r"^(?:do|does|did|are|is|was|were|have|has|what|which|who|when|where|why|how|"
                             r"shall|should|may|might)\b", re.I)
_POLITE_Q = re.compile(r"^(?:(?:please\s+)?(?:can|could|would|will)\s+you\b)", re.I)
# "stop remembering it" / "don't save that" / "stop recording": nothing names a category
_EMPTY_OBJ = re.compile(r"^(?:it|that|this|them|those|these|anything|everything|me|now|for now|today|any more|anymore|"
                        r"please|for me|right now|the conversation|this conversation|what i say|what i said)$", re.I)

_WORD = re.compile(r"[a-z]+", re.I)
_FILLERS = re.compile(r"(?<![\w'])(?:u+h+|u+m+|e+rm*|h+m+)(?![\w'])[,.]?\s*", re.I)
_SPLIT = re.compile(r"(?<=[.!?;])\s+|\s*;\s*|,\s*(?:and|but|so|then)\s+|\s+(?:and|but)\s+(?=(?:please\s+)?(?:also\s+)?"
                    r"(?:stop|quit|don't|do not|never|no longer|forget|delete|erase|remove|clear|wipe)\b)", re.I)


def consent_clauses(text: str) -> list[str]:
    """The turn cut where a consent request may start (sentence ends, ", and ...", "and stop ..."); wake word and
    hesitations removed. "you know" stays: it is the object of "forget what you know about ..."."""
    t = " ".join(_FILLERS.sub(" ", _WAKE.sub("", text, count=1)).split())
    return [p.strip() for p in _SPLIT.split(t) if p and p.strip()]
# words that say nothing about which category is meant
_STOP = frozenset("""
a an the my our your you i me we it its of to for in on at by with from about and or but so as that this these those
what where which who how when why there here do does did don't doesnt dont is are was were be been am have has had
like likes liked love prefer preferred usually always often normally generally tend typically really just all any
every everything anything stuff thing things know knew remember stored saved learn learned learnt recorded kept noted
got get go going went want wanted need use used user user's lasting preference preferences pref prefs taste tastes
habit habits choice choices setting settings data info information detail details history profile memory memories
please now more anymore any longer also one ones some lot kind kinds sort type types favorite favourite
""".split())
_NAME_STOP = frozenset("preferred preference preferences favorite favourite for of and the in a to when being f e "
                       "at with".split())


def _stem(w: str) -> str:
    w = w.lower().replace("colour", "color").replace("favourite", "favorite")
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
        return w[:-1] if len(w) > 3 and w[-1] == w[-2] else w
    if len(w) > 4 and w.endswith("ed"):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


def _words(text: str, stop: frozenset = _STOP) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text) if w.lower() not in stop and len(w) > 1}


@dataclass(frozen=True)
class ConsentRequest:
    """A consent request found in a user turn: what to do, to which category prefix, and the words that said so."""

    kind: Kind
    prefix: str
    utterance: str          # the whole user turn, verbatim (kept as the consent record)
    turn: int               # index of the turn in the conversation
    target: str = ""        # the words that named the category ("where I like to eat")
    how: str = ""           # how the category was found ("name", "description", "similarity 0.61")


@dataclass(frozen=True)
class _Node:
    prefix: str
    level: int              # 0 main, 1 sub, 2 detail
    name_words: frozenset
    desc_words: frozenset
    text: str               # name: description, for the embedder


def consent_clause(clause: str) -> Optional[tuple[Kind, str]]:
    """(kind, object words) if the clause is a consent request aimed at the memory, else None."""
    c = clause.strip().strip(" ,.;:!").strip()
    c = re.sub(r"[\u2019`]", "'", c)
    if not c:
        return None
    question = clause.rstrip().endswith("?")
    if (question or _QUESTION_START.match(c)) and not _POLITE_Q.match(c):
        return None   # "do you remember where I like to eat?", "what do you store about my music?"
    m = _OPT_OUT.match(c)
    if m:
        obj = _trim(m.group("obj"))
        if not obj or _EMPTY_OBJ.match(obj):
            return None
        # "remember" is only ever about memory; "save", "record", "track" are also things a car does ("don't save the
        # route", "stop recording the trip"), so with them the object must be the user's ("my ...") or memory
        if re.search(r"\b(?:remember|know)", c[:m.start("obj")], re.I) or _DELETE_OBJ.match(obj) or _MINE.match(obj):
            return "opt_out", obj
        return None
    m = _DELETE.match(c)
    if m:
        obj = _trim(m.group("obj"))
        if obj and _DELETE_OBJ.match(obj) and not _EMPTY_OBJ.match(obj):
            return "delete", obj
    return None


def _trim(obj: str) -> str:
    """The object without a trailing 'please', 'from now on', 'any more' or 'for me'."""
    o = obj.strip(" ,.;:!?")
    o = re.sub(r"(?:\s*,?\s*(?:please|from now on|any ?more|any longer|for me|thanks|thank you|again|ever again))+$", "",
               o, flags=re.I)
    return o.strip(" ,.;:!?")


class LocalConsentDetector:
    """Consent requests by patterns + category resolution (names, descriptions, MiniLM similarity)."""

    name = "local"

    def __init__(self, embedder=None, min_similarity: float = 0.45, margin: float = 0.03):
        self.embedder = embedder
        self.min_similarity = min_similarity
        self.margin = margin
        self._cache: dict[int, tuple[Schema, list[_Node], Optional[np.ndarray]]] = {}

    # --- the schema's nodes -------------------------------------------------------------------
    def _nodes(self, schema: Schema) -> tuple[list[_Node], Optional[np.ndarray]]:
        hit = self._cache.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1], hit[2]
        nodes: list[_Node] = []
        for m in schema.mains:
            nodes.append(_Node(m.key, 0, frozenset(_words(m.name, _NAME_STOP)), frozenset(_words(m.description)),
                               f"{m.name}: {m.description}"))
            for s in m.subs:
                sp = f"{m.key}/{s.key}"
                nodes.append(_Node(sp, 1, frozenset(_words(s.name, _NAME_STOP)), frozenset(_words(s.description)),
                                   f"{s.name}: {s.description}"))
                for d in s.details:
                    vocab = " ".join(d.attributes)
                    nodes.append(_Node(f"{sp}/{d.key}", 2, frozenset(_words(d.name, _NAME_STOP)),
                                       frozenset(_words(vocab)), f"{d.name} ({s.name})"))
        vecs = None
        if self.embedder is not None:
            vecs = np.asarray(self.embedder.embed([n.text for n in nodes]), dtype=np.float32)
        if len(self._cache) > 8:
            self._cache.clear()
        self._cache[id(schema)] = (schema, nodes, vecs)
        return nodes, vecs

    def resolve(self, target: str, schema: Schema) -> Optional[tuple[str, str]]:
        """(category prefix, how) for the words naming a category, or None."""
        words = _words(target)
        nodes, vecs = self._nodes(schema)
        sims = None
        if vecs is not None and len(nodes):
            q = np.asarray(self.embedder.embed([target]), dtype=np.float32).reshape(-1)
            sims = vecs @ q
        # 1. a name all of whose words were said ("music", "radio stations"); on a tie the broader level
        best = None
        for i, n in enumerate(nodes):
            if n.name_words and n.name_words <= words:
                key = (len(n.name_words), -n.level, float(sims[i]) if sims is not None else 0.0)
                if best is None or key > best[0]:
                    best = (key, n)
        if best is not None:
            return best[1].prefix, "name"
        # 2. shared words with names, main/sub descriptions and detail vocabularies: the node whose branch (itself and
        #    what lies below it) shares the most words ("Italian food": Restaurant, by its description and its
        #    cuisine vocabulary), then the most of them in its own name, then in its own words, then the broader
        #    level (the user said a general word), then the closer meaning
        best = None
        for i, n in enumerate(nodes):
            own = n.name_words | n.desc_words
            branch = set(own)
            for m in nodes:
                if m.prefix.startswith(n.prefix + "/"):
                    branch |= m.name_words | m.desc_words
            if not words & branch:
                continue
            key = (len(words & branch), len(words & n.name_words), len(words & own), -n.level,
                   float(sims[i]) if sims is not None else 0.0)
            if best is None or key > best[0]:
                best = (key, n)
        if best is not None:
            return best[1].prefix, "description"
        # 3. meaning alone (MiniLM): a clear winner above the floor
        if sims is not None and len(sims) > 1 and words and getattr(self.embedder, "name", "") != "hash":
            order = np.argsort(-sims)
            top, second = float(sims[order[0]]), float(sims[order[1]])
            if top >= self.min_similarity and (top - second >= self.margin
                                               or _same_branch(nodes[order[0]].prefix, nodes[order[1]].prefix)):
                return nodes[order[0]].prefix, f"similarity {top:.2f}"
        return None

    # --- a conversation -------------------------------------------------------------------------
    def detect(self, conversation: Conversation, schema: Schema) -> list[ConsentRequest]:
        out: list[ConsentRequest] = []
        for i, text in conversation.user_sentences():
            for clause in consent_clauses(text):
                found = consent_clause(clause)
                if found is None:
                    continue
                kind, target = found
                r = self.resolve(target, schema)
                if r is None:
                    continue
                out.append(ConsentRequest(kind=kind, prefix=r[0], utterance=text, turn=i, target=target, how=r[1]))
        return out

    def mentions_consent(self, conversation: Conversation) -> bool:
        """Whether any user clause has the shape of a consent request (used to skip an LLM call when none does)."""
        return any(consent_clause(c) is not None for _, t in conversation.user_sentences() for c in consent_clauses(t))


def _same_branch(a: str, b: str) -> bool:
    return a.startswith(b + "/") or b.startswith(a + "/")
