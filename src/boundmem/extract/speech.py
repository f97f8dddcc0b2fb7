"""Turning what a user said into the clauses the extractor judges one by one.

Spoken input arrives lowercase, unpunctuated and wrapped in wake words and fillers ("olly um i
always go for jazz"), and one turn often carries a one-off choice and a general rule side by
side ("that one then, as a rule I avoid highways") or two preferences ("I'm vegan and I always
pay by card"). Judging the whole turn at once lets the one-off half hide the rule, or the first
preference hide the second, so a turn is cut into clauses at sentence ends and at the joints
where a new first-person statement or a general rule starts.

English only: MiniLM and the cue lexicon are English, so a turn that is mostly not English is
not read at all (storing a guess from a sentence we cannot read is worse than storing nothing).
"""
from __future__ import annotations

import re
from functools import lru_cache

_WAKE = re.compile(
    r"^\s*(?:(?:hey|hi|hello|ok|okay|yo|ey)[\s,]+)?(?:car|olly|ollie|alexa|siri|google|computer|assistant|jarvis|"
    r"cortana|mercedes|bmw|audi|navi|buddy)\b[\s,.:;!]*", re.I)
_FILLER = re.compile(r"(?<![\w'])(?:u+h+|u+m+|e+rm*|h+m+|m+h*m+|a+h+|e+h+|uh-huh|you know|i mean)(?![\w'])[,.]?\s*", re.I)
# a new clause starts at a sentence end, or before a general rule or a new first-person statement
_SENT = re.compile(r"(?<=[.!?;])\s+|\s*[;]\s*|\s+[-\u2013\u2014]+\s+")
_RULE_START = re.compile(
    r"[,\s]+(?=(?:(?:but|and|though|although|so|oh|also)\s+)?(?:as a rule|in general|generally|usually|normally|"
    r"from now on|going forward|most of the time|by default|on the whole)\b)", re.I)
_NEW_SUBJECT = re.compile(
    r"(?:,\s*|\s+)(?:and|but|also|plus|while|whereas)\s+(?=(?:i|i'm|im|i've|i'd|my|me)\b)", re.I)
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?", re.I)
# py3langid among the languages a car's or a phone's users most often speak: over its 97 languages, lowercase spoken
# English of a few words ("does peking garden deliver") reads as Nigerian Pidgin or Latin; among these it reads as
# English (the notes of issue 19 have the comparison with the word list this replaced)
LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl", "zh", "ja", "ru", "tr", "pl", "sv", "ko", "ar", "hi")


@lru_cache(maxsize=1)
def _identifier():
    """The language-id model, loaded once (read-only after set_languages: safe to share between threads)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    ident = LanguageIdentifier.from_model_file(MODEL_FILE)
    ident.set_languages(list(LANGUAGES))
    return ident


def strip_speech(text: str) -> str:
    """The turn without a leading wake word and without fillers; whitespace collapsed."""
    t = _WAKE.sub("", text, count=1)
    t = _FILLER.sub(" ", t)
    return " ".join(t.split())


def is_english(text: str) -> bool:
    """Whether to read the turn at all: py3langid (among `LANGUAGES`) says English.

    Two rules stay ours, one line each: a turn whose letters are mostly outside ASCII is not English whatever the
    model says (a script none of `LANGUAGES` covers would otherwise land on the nearest one); a short turn of
    ASCII words passes (under four words, names and brand words decide the model's guess)."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return False
    if sum(1 for c in letters if not c.isascii()) > 0.3 * len(letters):
        return False
    if len(_WORD.findall(text)) < 4:
        return True
    return _identifier().classify(text)[0] == "en"


def clauses(text: str, max_clauses: int = 6) -> list[str]:
    """The clauses of one turn, in order; a one-clause turn comes back as itself (speech stripped)."""
    t = strip_speech(text)
    if not t:
        return []
    parts = [p for p in _SENT.split(t) if p and p.strip()]
    out: list[str] = []
    for p in parts:
        for q in _merge_short(_RULE_START.split(p)):
            out.extend(_merge_short([x for x in _NEW_SUBJECT.split(q) if x]))
    out = [c.strip(" ,.;:!-") for c in out]
    out = [c for c in out if _WORD.search(c)]
    if len(out) > max_clauses:   # a rambling turn: keep the clauses, but never more than the cap
        out = out[: max_clauses - 1] + [" ".join(out[max_clauses - 1:])]
    return out


def _merge_short(pieces: list[str]) -> list[str]:
    """A one-word piece ("I" before "usually like ...") is no clause of its own: it joins the next piece."""
    out: list[str] = []
    carry = ""
    for p in pieces:
        p = (carry + " " + p).strip() if carry else p
        if len(_WORD.findall(p)) <= 1:
            carry = p
            continue
        carry = ""
        out.append(p)
    if carry:
        if out:
            out[-1] = out[-1] + " " + carry
        else:
            out.append(carry)
    return out


_PHRASE_CUT = re.compile(r",\s*|\s+(?:and|with|plus|but|also)\s+", re.I)


def phrases(clause: str) -> list[str]:
    """A clause cut at commas and joining words ("at 21 degrees with the fan on low" -> two pieces), so a
    second category named in the same breath gets scored on its own. Pieces are kept in order."""
    return [p.strip() for p in _PHRASE_CUT.split(clause) if p and _WORD.search(p)]
