"""Which value a candidate may carry: the user's own words, or a listed item their words imply.

A made-up value is worse than a missed one: the user sees it on the page and stops trusting the
memory. So the rule depends on what the category's list is (`DetailCategory.value_kind`):

* **closed** (the list is the set of options: Low/Medium/High, Yes/No, a price range): a listed
  item the user named, or one their words clearly imply (close, and clearly closer than the next
  item); anything else stores nothing.
* **open** (the list is examples: songs, artists, chains, stations, cuisines): a listed item the
  user named, else the user's own words for the value, normalised ("the bbc" -> "BBC"). The
  nearest example is never taken: "I always shop at <a chain>" must not become another chain.

A span that names nothing ("my favourite podcast", "my usual gas station", "something by my
favourite artist") is not a value: every word of it is a function word, a reference word or a
word of the category's own name and description.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Optional

from ..schema.model import DetailRef

# words that refer to a value without naming it, or that any category's phrase carries
_REFERENCE = frozenset((
    "favourite favorite favourites favorites usual regular normal go-to goto preferred usual typical standard "
    "default same old best top number one ones something anything everything nothing stuff things thing kind sort "
    "type types bit some any every all other another different new good great nice decent usual own whatever "
    "place places spot spots one it that this them those these there here music song songs track tracks tune tunes "
    "food foods meal meals dish dishes station stations show shows channel channels option options choice choices "
    "brand brands chain chains service services network networks store stores shop shops artist artists band bands "
    "singer singers podcast podcasts genre genres radio news source sources restaurant restaurants cuisine cuisines "
    "kind kinds style styles stop stops way route routes road roads app apps list playlist playlists setting "
    "settings level levels temperature temp colour color colours colors light lights").split())
_FUNCTION = frozenset((
    "i me my mine we our us you your he she it its they them their a an the and or but so if then than as of in on "
    "at to for with from by about into over after before up down out off again is are was were be been being am do "
    "does did have has had will would can could should shall may might must not no never always usually really just "
    "very quite too also only even ever much more most please like love prefer hate enjoy want need get go going "
    "make put give take let keep find bring play listen listening hear watch drive navigate set turn start "
    "i'm i've i'd i'll it's that's don't can't won't isn't aren't doesn't didn't by now today tonight right away "
    "again please thanks okay ok yes yeah sure bad good great nice fine best worst terrible awful amazing lovely "
    "perfect horrible boring fun easy hard cheap expensive big small little long short whole full").split())
_PERSONAL = frozenset("i me you i'm i've i'd i'll myself".split())
# verbs a span is cut with ("that's where I like to eat"), never a value on their own
_VERBS = frozenset(("eat eating drink drinking go going shop shopping park parking charge charging drive driving "
                    "listen fill stop stay visit travel pay paying order ordering cook cooking sit walk ride fly book "
                    "trust try use using choose pick buy").split())
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'&.+-]*")
_LEADING = re.compile(r"^(?:(?:the|a|an|my|our|some|any|to|at|with|from|by|of|for|on|in|good|great|nice|proper|"
                      r"decent|real|really|lovely|little|bit of)\s+)+", re.I)
_TRAILING = re.compile(r"(?:\s+(?:food|cuisine|music|stuff|ones?|kind|type|style|please|again|instead|too|on|"
                       r"anymore|any more|all the time|every time|whenever possible))+$", re.I)
_VOWEL = re.compile(r"[aeiouy]", re.I)


@lru_cache(maxsize=2048)
def _category_words(ref: DetailRef) -> frozenset[str]:
    text = " ".join((ref.detail.name, ref.detail.description, ref.sub.name, ref.main.name))
    words = {w.lower().strip(".'") for w in _WORD.findall(text)}
    return frozenset(words | {w[:-1] for w in words if w.endswith("s")})


def names_value(span: str, ref: Optional[DetailRef] = None) -> bool:
    """Whether the span names something: at least one word that is neither a function word, a reference word
    ("favourite", "usual", "something") nor a word of the category's own name or description."""
    own = _category_words(ref) if ref is not None else frozenset()
    stems = {o[:5] for o in own if len(o) >= 5}
    words = [w.lower().strip(".'") for w in _WORD.findall(span)]
    if any(w in _PERSONAL for w in words):
        return False   # a clause about the speaker ("place I trust"), not a name
    for w in words:
        if w and w not in _FUNCTION and w not in _REFERENCE and w not in _VERBS and w not in own \
                and not (len(w) >= 5 and w[:5] in stems):
            return True
    return False


_LEAD_VERB = re.compile(r"^(?:(?:bring|stay|get|into|be|being|going|have|having|keep|see|try|trying|doing|do|"
                        r"visit|visiting|take|taking|use|using|eat|eating|drink|drinking|listen to|listening to|"
                        r"go to|going to|head to|hang out (?:at|in))\s+)+", re.I)


def normalise(span: str) -> str:
    """The user's words as a value: leading articles and possessives and trailing generic nouns cut ("the thai
    food" -> "Thai"), a lower-cased name capitalised ("radiohead" -> "Radiohead"), a short vowel-less word taken
    as an acronym ("bbc" -> "BBC")."""
    s = span.strip(" \t'\".,;:!?")
    s = _LEAD_VERB.sub("", _LEADING.sub("", s).strip()).strip()
    s = _LEADING.sub("", s).strip()
    cut = _TRAILING.sub("", s).strip()
    s = cut or s
    if s and s == s.lower():
        words = []
        for w in s.split():
            if 2 <= len(w) <= 4 and w.isalpha() and not _VOWEL.search(w):
                words.append(w.upper())
            elif w in ("and", "of", "the", "by", "de", "la", "van", "von", "&"):
                words.append(w)
            else:
                words.append(w[:1].upper() + w[1:])
        s = " ".join(words)
        s = s[:1].upper() + s[1:]
    return s


def open_value(text: str, ref: DetailRef, spans: list[str]) -> Optional[str]:
    """The first span (in the caller's order of preference) that names something, normalised; None if none does."""
    for span in spans:
        if span and names_value(span, ref):
            v = normalise(span)
            if v and names_value(v, ref):
                return v
    return None


def clearly_implied(sims: list[float], floor: float, margin: float) -> Optional[int]:
    """The listed item of a closed category the words clearly imply: close enough and clearly closer than the next."""
    if not sims:
        return None
    order = sorted(range(len(sims)), key=lambda i: -sims[i])
    best = order[0]
    if sims[best] < floor:
        return None
    if len(order) > 1 and sims[best] - sims[order[1]] < margin:
        return None
    return best


# where a lasting statement puts its value: "X is my go-to", "my favourite band is X", "I always shop at X",
# "I get my news from X", "I go with X"
_SUBJECT = re.compile(r"^\s*(?P<v>[^,;:.!?]{1,40}?)\s+(?:is|are|has been|have been)\s+(?:always\s+|still\s+|definitely\s+)?"
                      r"(?:my|our|the only|the one|the best|where i|what i)\b", re.I)
_MY_IS = re.compile(r"\b(?:my|our)\s+(?:[\w-]+\s+){0,4}?(?:is|are|has to be|would be|will always be|remains)\s+"
                    r"(?:always\s+|still\s+|definitely\s+|probably\s+)?(?P<v>[^,;:.!?]+)", re.I)
_HABIT_OBJECT = re.compile(
    r"\b(?:always|usually|normally|only|mostly|mainly|generally|typically|tend to|prefer to|like to|love to|"
    r"stick to|stick with|go with|go for|swear by|rely on|trust)\s+(?P<v>[^,;:.!?]+)", re.I)
_GET_MY = re.compile(r"\b(?:get|buy|order|hear|stream|watch|take)\s+(?:my|our)\s+(?:[\w-]+\s+){1,3}?"
                     r"(?:from|at|on|with|through|via)\s+(?P<v>[^,;:.!?]+)", re.I)
_COPULA = re.compile(r"(?:'re|'s|\bis|\bare|\bwas|\bwere|\bget|\bgets)\s*$", re.I)
_PREP = frozenset("at to with from on by in for through via".split())
_VERBISH = frozenset("go get shop charge fill listen eat drink use take order stream watch play pay park stop stay "
                     "drive tune buy fuel head choose pick book have hear put".split())


_TRANSITIVE = frozenset("use take have buy order play watch drink eat book choose pick get stream hear want".split())


def _object(rest: str) -> str:
    """The object after a habit word: "shop at Aldi" -> "Aldi", "listen to BBC Radio 4" -> "BBC Radio 4",
    "Ionity" -> "Ionity"."""
    words = rest.split()
    if len(words) > 1 and words[0].lower() in _TRANSITIVE and words[1].lower() not in _PREP:
        # "use dark mode in my editor" -> "dark mode": the verb's own object, up to the next preposition
        obj = []
        for w in words[1:]:
            if w.lower() in _PREP:
                break
            obj.append(w)
        return " ".join(obj)
    for i, w in enumerate(words[:6]):
        if w.lower() in _PREP and i + 1 < len(words):
            return " ".join(words[i + 1:])
    if words and words[0].lower() in _VERBISH:
        return " ".join(words[1:])
    return rest


_SPAN_END = re.compile(r"\s(?:and|but|so|because|since|when|whenever|while|if|please|for me|in the car|on the road|"
                       r"on (?:long|short) (?:drives|trips)|when i|whenever i|every|most|all|these days|nowadays|"
                       r"anymore|any more|though|too|as well|if possible|where possible|wherever|whenever possible|"
                       r"for (?:my|the|long|short|work|commut)\w*|near|around|during|on the way)\b", re.I)


def statement_spans(text: str, max_words: int = 5) -> list[str]:
    """Candidate value spans of a lasting statement, most specific pattern first; each at most `max_words` words."""
    out = []
    for pat in (_SUBJECT, _MY_IS, _GET_MY, _HABIT_OBJECT):
        m = pat.search(text)
        if not m:
            continue
        if pat is _HABIT_OBJECT and _COPULA.search(text[: m.start()]):
            continue   # "they're always broken" describes, it names no value
        v = m.group("v").strip()
        if pat is _HABIT_OBJECT:
            v = _object(v)
        v = _SPAN_END.split(" " + v + " ", maxsplit=1)[0].strip()
        v = _LEADING.sub("", v).strip()
        if v and len(v.split()) <= max_words:
            out.append(v)
    return list(dict.fromkeys(out))


def masked(text: str, span: str) -> str:
    """The statement with its value replaced by a pronoun, so the category is judged by what the user said about
    the value, not by a name the embedding has never seen ("I always shop at <name>")."""
    i = text.lower().find(span.lower())
    return text if i < 0 else f"{text[:i]}them{text[i + len(span):]}"
