"""Reading a user's sentence: does it state a lasting preference, and which words name it.

Used by the zero-shot path (which has no trained "no preference" class and so needs an
explicit cue) and to cut a short attribute phrase when no vocabulary item matches.
"""
from __future__ import annotations

import re

# "I'd like"/"would like" is a wish for now, not a lasting preference
_WISH = re.compile(r"\b(?:i'd|i would|would you|you'd|we'd|d like)\s+(?:like|love|prefer)\b", re.I)
_CUE = re.compile(
    r"\b(prefer(?:s|red|ably)?|preference|like|likes|love|loves|enjoy|enjoys|favou?rite|always|usually|typically|"
    r"generally|normally|never|hate|hates|dislike|can't stand|cannot stand|don't like|do not like|fan of|go-to|"
    r"rather|my usual|allergic|intolerant|whenever|every time|tend to|avoid|i only|i'm a|i am a|vegan|vegetarian)\b",
    re.I)
_LEAD = re.compile(
    r"^.*?\b(?:prefer(?:ably)?|like|love|enjoy|favou?rite(?: \w+)? (?:is|are)|fan of|go-to(?: \w+)? is|"
    r"always (?:go (?:to|for|with)|use|choose|pick|want|get|listen to|have)|usually (?:go (?:to|for|with)|use|choose|pick|"
    r"want|get|listen to|have)|avoid|can't stand|hate|dislike|rather have|rather)\s+", re.I)
_STOP = re.compile(r"[,.;:!?]|\s(?:and|but|so|because|since|when|while|if|please|can you|could you|for me)\s", re.I)


def states_preference(sentence: str) -> bool:
    """True if the sentence carries a lasting-preference cue (not a bare command or a one-off wish)."""
    return bool(_CUE.search(_WISH.sub(" ", sentence)))


def short_phrase(sentence: str, max_words: int = 6) -> str:
    """The few words after the preference cue ("I always prefer covered parking, ..." -> "covered parking")."""
    s = sentence.strip()
    m = _LEAD.search(s)
    rest = s[m.end():] if m else s
    rest = _STOP.split(" " + rest + " ", maxsplit=1)[0].strip()
    rest = re.sub(r"^(?:to|the|a|an|my|it|that|this|when|if)\s+", "", rest, flags=re.I)
    words = rest.split()[:max_words]
    phrase = " ".join(words).strip(" '\"")
    return phrase or " ".join(s.split()[:max_words])
