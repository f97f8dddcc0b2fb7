"""Is this clause a lasting preference *of the speaker*? Evidence of durability and ownership.

Which category a sentence is about and whether it states something to remember are separate
questions. "Set the lights to blue" and "I always want blue lights" are about the same category;
only the second is lasting. "My wife loves sushi" names a cuisine, but not the speaker's. The
category scorers (trained head, zero-shot prototypes) answer the first question; this module
answers the second, from cues that do not depend on the schema or the domain:

* durability: habitual or general wording ("always", "as a rule", "whenever", "from now on"),
  first-person liking or disliking verbs, identity statements ("I'm vegan"), favourites;
* against it: a one-off wish or command (imperative start, "I'd like", "for now", "tonight",
  "this time"), a question, a request to the assistant, accepting a suggestion once;
* ownership: the subject is the speaker, not a partner, friend or "she".

`cue_features` turns a clause into these indicators; `LastingModel` (a logistic regression over
them plus the clause's MiniLM embedding, see `boundmem_bench/train/lasting.py`) gives the probability that
the clause is a lasting preference of the speaker, and `cue_of` names the cue that made it so,
which the audit log records as the reason a preference was stored.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .speech import clauses

_HABIT = re.compile(
    r"\b(always|usually|normally|generally|typically|as a rule|in general|every time|everytime|each time|whenever|"
    r"all the time|most of the time|by default|from now on|going forward|in (?:the )?future|any day|every day|"
    r"every morning|every week|tend to|on principle|never|no matter|every single time|for good|anymore|any more|"
    r"these days|nowadays|for years|since (?:i was|forever)|my whole life|regularly|often|rarely|whenever possible|"
    r"mostly|mainly|pretty much always|most days|most of my)\b",
    re.I)
_LIKE = re.compile(
    r"\b(?:i|we)\s+(?:(?:really|absolutely|just|do|also|definitely|truly|totally|kind of|kinda|genuinely|still|"
    r"simply|quite|very much|much|mostly|only)\s+)*(?:like|love|enjoy|prefer|adore|dig|fancy|favou?r|go for|stick "
    r"(?:to|with)|swear by|live for|lean towards?|gravitate)\b"
    r"|\b(?:i'm|i am|im|we're|we are)\s+(?:(?:a|an|such a|really|totally|very|so|big|huge|massive|real|definitely)\s+)*"
    r"(?:fan of|into|partial to|hooked on|crazy about|mad about|keen on|devoted to|obsessed with|a sucker for|all about)\b"
    r"|\b(?:my|our)\s+(?:(?:absolute|all-time|all time|personal|usual|number one|top|very)\s+)*(?:favou?rites?|go-to|"
    r"preferred|usual|pick|choice|thing)\b"
    r"|\bnothing beats\b|\bcan't get enough\b|\bcannot get enough\b|\bi'd rather\b|\bi would rather\b|\bid rather\b"
    r"|\b(?:works|is|are) (?:best|better) for me\b|\bthat's (?:how|what) i\b|\bthe only (?:\w+ )?(?:i|for me)\b"
    r"|^(?:i\s+)?(?:prefer|always|usually|only)\b|\bfor (?:my|all) future\b|\bfrom here on\b|\b(\w+) always \1\b"
    r"|\bmy (?:ideal|kind of|type of|idea of a (?:good|perfect))\b|\bnon-?negotiable\b|\b(?:is|are) a must\b"
    r"|\bmatters? (?:more |most |a lot )?to me\b|\b(?:that's|is|are) (?:totally |really )?my (?:thing|jam|scene|style)\b"
    r"|\bi can't (?:live|do) without\b|\bi'm (?:a|an) (?:\w+ ){1,2}(?:person|guy|girl|type|fan|lover|through and through)\b"
    r"|\bi (?:always )?(?:chase|seek out|look for|hunt for|head (?:straight )?for)\b"
    r"|\ball (?:i|we) (?:ever )?(?:listen to|eat|drink|use|want|need|play|watch)\b|\ball day every day\b"
    r"|\b(?:is|are) (?:where|what|who|how) (?:i|we) (?:always |usually |normally )?(?:get|go|shop|eat|listen|park|"
    r"charge|fill|drive|like)\b|\b(?:are|is) my \w+ (?:colou?rs?|station|spot|place|brand|network|chain|service)\b"
    r"|\bi only\b|\bonly ever\b|\bgive me \w+(?: \w+)? (?:any day|every time|over)\b|\bi'm (?:a|an) \w+ (?:person|guy|girl|"
    r"kind of (?:guy|girl|person)|type)\b|\bi am (?:a|an) \w+ (?:person|guy|girl|type)\b|\bi'm the (?:kind|type) of\b",
    re.I)
_DISLIKE = re.compile(
    r"\b(?:i|we)\s+(?:(?:really|absolutely|just|truly|totally|honestly|simply|still|kind of|kinda|genuinely)\s+)*"
    r"(?:hate|dislike|detest|loathe|avoid|despise|can't stand|cannot stand|can't bear|cannot bear|can't do|"
    r"don't like|do not like|don't enjoy|do not enjoy|don't want|do not want|don't do|never want|never go|never use|"
    r"never take|never eat|never listen|refuse|steer clear|stay away|skip|am opposed|won't|will not|wouldn't|"
    r"don't care for|do not care for|don't eat|do not eat|don't drink|can't eat|cannot eat|can't have)\b"
    r"|\b(?:i'm|i am|im)\s+(?:not (?:a (?:big )?fan|into|keen|fond|a fan)|opposed|allergic|intolerant|sick of|tired of|"
    r"done with|over|against)\b"
    r"|\bnot (?:a fan|my thing|my cup of tea|for me|my scene|my style)\b|\b(?:bores?|annoys?|irritates?|drives?) me\b"
    r"|\b(?:isn't|aren't|is not|are not) (?:really )?(?:for me|my (?:thing|scene|style))\b|\bspare me\b"
    r"|\b(?:i|we) (?:can't|cannot|can not) (?:handle|deal with|take|tolerate)\b|\bruins? (?:\w+ ){0,3}for me\b"
    r"|\b(?:i'm|i am|im) not (?:really |much of )?(?:a|an) (?:\w+ ){1,2}(?:person|fan|guy|girl|type|lover)\b"
    r"|\bno (?:\w+ ){1,2}for me\b|\b(?:goes|go|sent) straight back\b|\bdon't ever\b|\bnever ever\b"
    r"|\bkeep me (?:away|off|out)\b|\bno more\b|\bnever ever\b|\bnever (?:play|put on|suggest|show|book|pick|choose|"
    r"route)\b",
    re.I)
_IDENTITY = re.compile(
    r"\b(?:i'm|i am|im|i've been|we're|we are)\s+(?:(?:a|an|strictly|fully|totally|mostly|pretty much)\s+)*"
    r"(?:vegan|vegetarian|veggie|pescatarian|pescetarian|allergic|lactose|gluten|coeliac|celiac|diabetic|halal|kosher|"
    r"teetotal|sober|(?:an? )?(?:early|morning|night) (?:bird|person|owl)|(?:a )?(?:cheapskate|bargain hunter|night owl))\b"
    r"|\bi (?:have|got|suffer from) (?:a |an )?(?:\w+ )?(?:allergy|intolerance|disability|condition|bad back)\b"
    r"|\b(?:my|a) (?:disability|wheelchair|handicap|blue badge|disabled badge)\b"
    r"|\bi (?:don't|do not|never|can't) (?:eat|drink) (?:meat|fish|pork|dairy|gluten|alcohol|nuts|seafood|beef|shellfish)\b"
    r"|\b(?:i|we) (?:eat|drink|drive|listen to|use|pay|charge|shop|fill up|park|stay|fly|book|travel|sleep|stream) "
    r"(?:only|exclusively|mostly|mainly|strictly)\b",
    re.I)
_NOW = re.compile(
    r"\b(?:i'd like|i would like|id like|i want|i wanna|i need|i'm looking for|i am looking for|can you|could you|"
    r"would you|will you|can we|could we|shall we|let's|let us|lets|right now|now|today|tonight|this time|for now|"
    r"for the moment|at the moment|just this once|this once|currently|this trip|this evening|this morning|"
    r"this afternoon|this weekend|tomorrow|at the next|on the way|next stop|for this|in the mood for|craving|"
    r"i feel like|i fancy (?:some|a)|once|instead)\b",
    re.I)
_IMPERATIVE = frozenset(
    "play set turn change make switch put find navigate take show call text open close increase decrease dim brighten "
    "start stop pause skip search look order get give tell read add remove book drive route go lower raise crank tune "
    "locate reserve send cancel check help move lock unlock activate deactivate enable disable mute unmute resume "
    "repeat shuffle queue select pick choose use bring let list display update schedule remind wake dial phone "
    "recommend suggest adjust reduce boost bump heat cool warm avoid skip include exclude prefer".split())
_INTERJECTION = frozenset("yes yeah yep ok okay great perfect alright sure please and also now then so well actually "
                          "hmm oh thanks thank you fine good cool right no nope wait".split())
_QUESTION_START = frozenset(
    "what what's whats who who's where where's when why how how's which is are do does did can could will would "
    "should shall may might isn't aren't don't doesn't didn't won't whose whom".split())
# questions that ask for information; "can you / could you ..." are requests and are judged as such
_INFO_QUESTION = frozenset("what what's whats who who's where where's when why how how's which is are do does did isn't "
                           "aren't whose was were".split())
_ACCEPT = re.compile(
    r"^(?:yes|yeah|yep|yup|sure|ok|okay|fine|alright|all right|sounds good|sounds great|perfect|great|good|that one|"
    r"the first one|the second one|the last one|that's fine|go with|let's do|let's go with|do it|why not|cool)\b", re.I)
_THIRD_PARTY = re.compile(
    r"\b(?:my|our|his|her|their|the)\s+(?:\w+\s+)?(?:wife|husband|partner|son|daughter|kids?|children|child|friends?|boss|"
    r"colleagues?|co-?workers?|mom|mum|mother|dad|father|parents?|brother|sister|girlfriend|boyfriend|fianc[eé]e?|"
    r"family|grandma|grandpa|grandmother|grandfather|aunt|uncle|cousin|neighbou?r|roommate|flatmate|team|guests?|"
    r"passengers?|client|clients|baby|toddler|teenager|niece|nephew|in-laws?|mate|buddy|dog|cat|twins|sons|daughters|"
    r"step(?:son|daughter|mother|father|mom|mum|dad|kids|children)s?|grand(?:kids|children|son|daughter|parents)s?|"
    r"kiddos|wife's|husband's|partner's|better half|other half|missus|hubby)\b"
    r"|\b(?:he|she|they|he's|she's|they're|everyone|everybody|somebody|someone|people|dad|mom|mum|grandma|grandpa)"
    r"\s+(?:\w+\s+)?(?:likes?|loves?|prefers?|hates?|enjoys?|adores?|dislikes?|wants?|always|never|can't|doesn't|don't|"
    r"is into|are into|into|crazy about|mad about|fond of|keen on|obsessed with|fills?|needs?|insists?|gets?|feels?|"
    r"only listens?|listens?)\b"
    r"|\b(?!(?:i|really|just|absolutely|truly|totally|honestly|simply|also|still|so|and|but|do|genuinely|"
    r"seriously|literally|definitely|kinda|actually|personally|you|we)\b)[a-z]+\s+(?:really\s+|absolutely\s+)?"
    r"(?:likes|loves|prefers|hates|enjoys|adores|dislikes|can't stand|"
    r"doesn't like|does not like)\b",
    re.I)
_SECOND = re.compile(r"\b(?:do you (?:like|love|prefer|enjoy)|your favou?rite|what do you|you like|you prefer)\b", re.I)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?", re.I)

FEATURES = ("habit", "like", "dislike", "identity", "now", "imperative", "question", "accept", "third_party", "second",
            "cue_any", "one_off_only", "bias")


def cue_features(clause: str) -> np.ndarray:
    """Schema-free indicators of a lasting, first-person preference (see FEATURES)."""
    return np.array(_flags(clause), np.float32)


@lru_cache(maxsize=8192)   # a clause is read by the model, the vetoes and the cue checks: scan it once
def _flags(clause: str) -> tuple[float, ...]:
    t = clause.strip()
    words = [w.lower() for w in _WORD.findall(t)]
    lead = 0   # "Yes, start navigation and ...", "Great, play ...": the command comes after the interjection
    while lead < len(words) - 1 and lead < 3 and words[lead] in _INTERJECTION:
        lead += 1
    first = words[lead] if words else ""
    habit = bool(_HABIT.search(t))
    like = bool(_LIKE.search(t))
    dislike = bool(_DISLIKE.search(t))
    identity = bool(_IDENTITY.search(t))
    now = bool(_NOW.search(t))
    imperative = first in _IMPERATIVE
    question = t.endswith("?") or first in _QUESTION_START
    accept = bool(_ACCEPT.search(t)) and len(words) <= 7
    third = bool(_THIRD_PARTY.search(t))
    second = bool(_SECOND.search(t))
    cue = habit or like or dislike or identity
    return tuple(float(x) for x in (habit, like, dislike, identity, now, imperative, question, accept, third, second,
                                    cue, (now or imperative or question) and not cue, 1.0))


_FIRST_PERSON = re.compile(r"\b(?:i|i'm|im|i've|i'd|i'll|me|my|mine|myself|we|we're|our|us)\b", re.I)
_SPEAKER = re.compile(r"\b(?:i|i'm|im|i've|i'd|me|my)\b", re.I)   # the speaker alone, not "we" with the other person
_ONE_OFF = re.compile(
    r"\b(?:for now|just this once|this once|this time|for this (?:trip|ride|drive|evening|morning|afternoon|weekend|"
    r"time|once|journey)|tonight|today|right now|for the moment|at the moment|(?:this|tomorrow) (?:evening|morning|"
    r"afternoon|night)|only (?:today|tonight|this)|for (?:today|tonight)|(?:evening|night|trip|ride) only|"
    r"instead|this weekend|next stop|on this (?:route|trip|drive|ride|way|journey)|this route|on the way|"
    r"while we're at it)\b", re.I)


@lru_cache(maxsize=8192)
def vetoed(text: str) -> bool:
    """Ownership and one-off markers that no embedding similarity outweighs: another person's taste with
    no first-person subject beside it ("my wife likes the seat warm"), an explicitly temporary wish
    without a habit ("for this evening only, set the lights to warm"), a bare command ("Set the lights
    to blue"). A turn of several clauses is vetoed only if no clause of it states a preference outright
    ("Let's go to PetroLux instead. I prefer their service." is not)."""
    parts = clauses(text)
    if len(parts) > 1 and any(explicit_cue(p) and not _vetoed_clause(p) for p in parts):
        return False
    return _vetoed_clause(text)


def _vetoed_clause(clause: str) -> bool:
    words = clause.strip()
    if _THIRD_PARTY.search(words):
        # someone else's taste, unless the speaker states one of their own beside it ("... but I can't stand it")
        rest = _THIRD_PARTY.sub(" ", words)
        if not (explicit_cue(rest) and _SPEAKER.search(rest)):
            return True
    if bool(_ONE_OFF.search(words)) and not _HABIT.search(_ONE_OFF.sub(" ", words)):
        return True
    on = dict(zip(FEATURES, _flags(words)))
    if on["imperative"] and not on["cue_any"]:   # a bare command ("Set the lights to blue") is for now
        return True
    # a question asks, it does not tell ("Is street parking usually available?"), unless the speaker says
    # something of themselves in it ("Why do you keep suggesting highways when I always avoid them?")
    first = (_WORD.findall(words.lower()) or [""])[0]
    return first in _INFO_QUESTION and not (explicit_cue(words.rstrip("?")) and _FIRST_PERSON.search(words))


_TEMPORARY = re.compile(r"\b(?:just (?:for )?(?:today|tonight|now|this once|this time|the moment)|for now|just this once|"
                        r"this once|only (?:today|tonight|for now|this time|for this)|for the moment|for today|for tonight|"
                        r"just this time|one time only|for a change)\b", re.I)


@lru_cache(maxsize=8192)
def one_off_choice(text: str, turn: str = "") -> bool:
    """A choice the speaker makes now ("play some jazz", "set it to 22", "avoid tolls on this trip"): evidence of a
    preference once repeated. Not evidence: another person's request, a question that asks for information,
    accepting a suggestion once, a wish said to be temporary ("just for today")."""
    t = text.strip()
    if not t or _THIRD_PARTY.search(t) or _TEMPORARY.search(t) or (turn and _TEMPORARY.search(turn)):
        return False
    on = dict(zip(FEATURES, _flags(t)))
    if on["accept"] or on["second"]:
        return False
    first = (_WORD.findall(t.lower()) or [""])[0]
    if first in _INFO_QUESTION:
        return False
    return bool(on["imperative"] or on["now"])


_CUED = 0.9
_STRONG = re.compile(_IDENTITY.pattern + "|" + _DISLIKE.pattern + r"|\b(?:i|we)\s+(?:always|usually|normally|never)\b"
                     r"|\bas a rule\b|\bin general\b|\bfrom now on\b|\bmy favou?rite\b", re.I)


def explicit_cue(clause: str) -> bool:
    """A stated liking, dislike, habit or identity, not asked as a question nor about the assistant."""
    on = dict(zip(FEATURES, _flags(clause)))
    return bool(on["cue_any"] and not on["question"] and not on["second"] and not on["accept"])


def cue_of(clause: str) -> str:
    """The words that mark the clause as lasting, for the audit log ("always", "I'm vegan", "can't stand")."""
    for pat in (_DISLIKE, _IDENTITY, _HABIT, _LIKE):
        m = pat.search(clause)
        if m:
            return m.group(0).strip()
    return ""


@dataclass
class LastingModel:
    """Logistic regression over [cue features, MiniLM embedding] -> P(lasting preference of the speaker)."""

    embedder: str
    w_cue: np.ndarray        # (len(FEATURES),)
    w_emb: np.ndarray        # (dim,)
    threshold: float

    @property
    def dim(self) -> int:
        return int(self.w_emb.shape[0])

    def fits(self, embedder_name: str, dim: int) -> bool:
        return embedder_name == self.embedder and dim == self.dim

    def probabilities(self, clauses: Sequence[str], X: np.ndarray, zero_shot: bool = False) -> np.ndarray:
        """P(lasting) per clause; 0 for a vetoed one. A clause that states a preference outright ("I'm vegan",
        "I can't stand ...") gets at least `_CUED` whatever the embedding says. With `zero_shot` (a schema the
        model was not trained for, so its embedding part is out of its domain: "I love hiking" looks nothing
        like an in-car preference) any explicit first-person cue outside a question counts on its own."""
        if not len(clauses):
            return np.zeros(0, np.float32)
        F = np.vstack([cue_features(c) for c in clauses])
        z = F @ self.w_cue + X.astype(np.float32) @ self.w_emb
        p = (1.0 / (1.0 + np.exp(-z))).astype(np.float32)
        for i, c in enumerate(clauses):
            if vetoed(c):
                p[i] = 0.0
            elif p[i] < _CUED and explicit_cue(c) and (zero_shot or _STRONG.search(c)):
                p[i] = _CUED
        return p

    def save(self, path: str | Path) -> None:
        np.savez_compressed(path, w_cue=self.w_cue.astype(np.float32), w_emb=self.w_emb.astype(np.float32),
                            meta=np.array([self.embedder, ",".join(FEATURES)]),
                            threshold=np.array([self.threshold], np.float32))

    @classmethod
    def load(cls, path: str | Path) -> "LastingModel":
        with np.load(path, allow_pickle=False) as z:
            names = str(z["meta"][1]).split(",")
            if tuple(names) != FEATURES:
                raise ValueError(f"{path}: trained for cue features {names}, this version has {list(FEATURES)}; retrain it")
            return cls(embedder=str(z["meta"][0]), w_cue=z["w_cue"], w_emb=z["w_emb"], threshold=float(z["threshold"][0]))


BUNDLED = "lasting.npz"


def bundled_lasting() -> Optional[LastingModel]:
    path = Path(__file__).with_name("data") / BUNDLED
    return LastingModel.load(path) if path.is_file() else None
