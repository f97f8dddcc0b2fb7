"""The user's stance on one value of a clause: like, dislike, indifferent, or nothing to store.

Polarity is data (`Candidate.polarity`), so this decides it per value, within the stretch of
words that holds the value: in "I don't really like Italian food, I'd rather have Thai" the
negation reaches Italian and stops at the comma, so Thai stays a like. A verdict after the value
counts too ("Hostels are not for me", "Country isn't my thing"). "Used to love X ... anymore" and
"I'm over X" turn against X. "I don't mind X" is not a dislike: it is the category's
"Indifferent" item where the category has one, else nothing is stored (a category that records
what to avoid must not store "don't mind toll roads" as an avoidance). In a category whose name
records avoidance or a restriction, avoiding is the preference itself (a like of the value).
"""
from __future__ import annotations

import re
from typing import Optional, Sequence

from ..models import Polarity
from ..schema.model import DetailRef
from .vocabulary import find_term, term_of

_ADV = r"(?:(?:really|particularly|actually|exactly|even|especially|that|too|so|much|very|super|all that|ever|honestly|" \
       r"genuinely|totally|at all|just|truly|personally|necessarily)\s+)*"
NEG_BEFORE = re.compile(
    r"\b(?:hate|hates|dislike|detest|loathe|despise|can't stand|cannot stand|can't bear|cannot bear|"
    r"(?:don't|do not|doesn't|does not|didn't|never)\s+" + _ADV + r"(?:like|enjoy|love|care for|want|dig|fancy|eat|drink|"
    r"listen to|go (?:to|for)|use|do)|"
    r"(?:i'm|i am|im)\s+" + _ADV + r"not\s+" + _ADV + r"(?:into|fond of|keen on|a (?:big |huge )?fan of|crazy about)|"
    r"not (?:a (?:big |huge )?fan of|into|keen on|fond of)|not my (?:thing|scene|style)|no\s(?=\w+ for me)|"
    r"(?:i'm|i am|im)\s+(?:so |totally |completely |well |kind of |kinda )?(?:over|done with|sick of|tired of|fed up with)|"
    r"no longer\s+" + _ADV + r"(?:like|enjoy|love|listen to|eat|want|use|go for)|"
    r"can't (?:listen to|handle|take|deal with|do)|cannot (?:listen to|handle|take|deal with)|"
    r"never\s+(?:ever\s+)?(?:play|put on|suggest|show|book|pick|choose|route|give|take|want)|no more|"
    r"opposed to|allergic to|intolerant|stay away from|steer clear of|keep me away from|won't|will not|refuse|avoid|"
    r"spare me|skip|bores? me)\b", re.I)
# "used to love X (but ...) anymore / no longer / not now": the value after "used to" is turned against
# a negation right before the value: "not Italian", "I'm not vegetarian anymore", "no jazz"
_NEAR = re.compile(r"\b(?:not|no|no longer|never|without)\s+(?:(?:a|an|the|really|very|much|that|any|more)\s+){0,2}$", re.I)
# the verdict said of the value after it, by pronoun: "Never ever play country, I can't stand it"
_ANAPHOR = re.compile(r"\b(?:can't stand|cannot stand|can't bear|hate|hates|dislike|detest|loathe|despise|don't like|"
                      r"do not like|can't listen to|sick of|tired of|over)\s+(?:it|them|that|those|this)\b", re.I)
_WILLING = re.compile(r"\b(?:don't|do not) mind (?:\w+ing|a|the|some)\b|\bhappy to\b|\bglad to\b|\bwilling to\b", re.I)
# a negated verb a few words before the value: "I never fill up at X", "Don't ever send me to X"
_NEG_VERB = re.compile(r"\b(?:don't|do not|never|won't|will not|wouldn't|no longer|can't|cannot)\s+(?:\S+\s+){0,5}$", re.I)
# ... unless it bounds an amount: "I don't want to walk more than ten minutes" is "less than 10 min"
_AMOUNT = re.compile(r"\b(?:more than|longer than|further than|over|above|below|less than|under|beyond)\b", re.I)
DISLIKE_SURE = 0.6
_PLAIN_NEG = re.compile(r"\b(?:never|not|no|don't|do not|won't|wouldn't|refuse to|no longer)\b", re.I)
_USED_TO = re.compile(r"\bused to\s+(?:really\s+)?(?:love|like|enjoy|listen to|eat|go (?:to|for)|be into|adore)\b", re.I)
_NOT_NOW = re.compile(r"\b(?:anymore|any more|no longer|not now|not these days|can't|cannot|not (?:really )?into|"
                      r"over it|gone off|grown out of|got tired|moved on)\b", re.I)
INDIFFERENT = re.compile(r"\b(?:don't mind|do not mind|doesn't matter|does not matter|don't care (?:about|whether|if|"
                         r"which)|do not care (?:about|whether|if|which)|either (?:is|way is) fine|not bothered|"
                         r"indifferent|no preference|fine either way)\b", re.I)
_NOT_NEGATIVE = re.compile(r"\b(?:never mind|wouldn't mind|never (?:\w+ )?(?:anywhere|anything|anyone) (?:but|except|other "
                           r"than)|can't get enough|can't go wrong|never miss|never skip|never without|never fails?|"
                           r"no matter|nothing beats|can't beat|not only|not just|nothing but|can't live without|can't do without|"
                           r"wouldn't (?:go|have it) any other way)\b", re.I)
NEG_AFTER = re.compile(
    r"\b(?:(?:is|are)(?:n't| not)|is|are|just|really|simply|totally)?\s*(?:not (?:for me|my (?:thing|scene|style|cup of tea))|"
    r"(?:a )?no(?:-go)? for me|bores? me|annoys? me|drives? me (?:crazy|mad|nuts)|(?:is|are) the worst|"
    r"(?:isn't|aren't|is not|are not) (?:really |exactly )?(?:for me|my (?:thing|scene|style|cup of tea))|"
    r"make me (?:sick|miserable|nervous)|doesn't agree with me|don't agree with me|"
    r"(?:is|are) (?:off the table|out|a no|a dealbreaker|a deal breaker|overrated)|no thanks|no thank you)\b", re.I)
_NEGATIVE_VALUE = re.compile(r"^(?:no|not|never|none|indifferent|avoid)\b|allerg|intoleran|-free\b|\bfree of\b", re.I)
_AVOIDANCE = re.compile(r"\b(?:avoid|allerg|intoleran|restriction|need for)", re.I)
_BREAK = re.compile(r"[,;:.!?]|\s(?:so|but|and|because|since|though|although|while|whereas|i'd rather|rather|instead)\s",
                    re.I)


def _stretch(text: str, value: str) -> tuple[str, str, bool]:
    """The words before and after the value within its stretch (cut at punctuation and joining words); whether the
    value was found in the text at all."""
    m = find_term(text.lower(), term_of(value))
    if not m:
        return text, "", False
    before, after = text[: m.start()], text[m.end():]
    cuts = list(_BREAK.finditer(before))
    if cuts:
        before = before[cuts[-1].end():]
    cut = _BREAK.search(after)
    if cut:
        after = after[: cut.start()]
    return before, after, True


def stance(text: str, ref: DetailRef, value: str, attributes: Sequence[str] = (),
           dislike_p: Optional[float] = None) -> tuple[Optional[str], Polarity]:
    """(value to store, polarity); value None = store nothing (indifference where the category has no such item).
    `dislike_p`: the learned model's probability that the clause turns against its (only) value; when no cue
    pattern turns against the value, a sure model does (the cues keep deciding scope, indifference and avoidance)."""
    if _NEGATIVE_VALUE.search(value):   # "Never considers price", "Seafood Allergies": the item is already negative
        return value, "like"
    before, after, found = _stretch(text, value)
    scope = f"{before} {value} {after}" if found else text
    if value.strip().lower() == "yes" and _WILLING.search(text):   # "I don't mind paying extra for green fuel"
        return value, "like"
    if INDIFFERENT.search(scope) and not NEG_BEFORE.search(INDIFFERENT.sub(" ", before)):
        item = next((a for a in attributes if a.lower().startswith("indifferent")), None)
        return (item, "like") if item else (None, "indifferent")
    negative = False
    if not _NOT_NEGATIVE.search(scope):
        if found:
            negative = bool(NEG_BEFORE.search(before) or NEG_AFTER.search(after) or _NEAR.search(before)
                            or (_NEG_VERB.search(before) and not _AMOUNT.search(before))
                            or _ANAPHOR.search(text[text.lower().find(value.lower()) + len(value):]))
            if not negative and _USED_TO.search(before) and _NOT_NOW.search(text[text.lower().find(before.lower()):]):
                negative = True
        else:   # an item the words imply without naming it ("Yes" for "I never pay extra for green fuel")
            negative = bool(NEG_BEFORE.search(text) or NEG_AFTER.search(text) or _PLAIN_NEG.search(text)) \
                and not _AMOUNT.search(text)
    if dislike_p is not None and not negative and not _NOT_NEGATIVE.search(scope):
        # no cue turns against the value, yet the clause reads as a complaint ("heavy metal gives me a headache")
        negative = dislike_p >= DISLIKE_SURE
    if not negative:
        return value, "like"
    if _AVOIDANCE.search(ref.detail.name):   # the category itself records what to avoid
        return value, "like"
    if value.strip().lower() == "yes":   # a Yes/No category: turning against the thing is its "No" item
        no = next((a for a in attributes if a.lower().startswith(("no ", "no(")) or a.lower() == "no"), None)
        if no:
            return no, "like"
    return value, "dislike"


def cue_flags(text: str) -> tuple[float, ...]:
    """The stance cues of a clause as features for the learned model (`stance_model.py`)."""
    return tuple(float(bool(p.search(text))) for p in (NEG_BEFORE, NEG_AFTER, INDIFFERENT, _NOT_NEGATIVE, _USED_TO,
                                                       _NOT_NOW, _ANAPHOR, _PLAIN_NEG, _NEG_VERB, _NEAR))
