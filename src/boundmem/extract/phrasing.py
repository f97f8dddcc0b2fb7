"""Reading a user's sentence: does it state a lasting preference, and which words name it.

Used by the zero-shot path (which has no trained "no preference" class and so needs an
explicit cue) and to take a value from the user's own words when no vocabulary item is named:
the words right after a preference cue, or the short runs of content words to choose from.
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
    r"want|get|listen to|have)|avoid|can't stand|hate|dislike|rather have|rather|don't like|do not like|not a fan of|"
    r"stay away from|steer clear of|never (?:book|put|take|play|give|suggest)(?: me)?(?: on| with| to| any)?|"
    r"only (?:fly|book|stay (?:at|in|with)|use|eat|drink|listen to|take)|stick (?:to|with)|go for|swear by|"
    r"(?:always|usually) (?:book|fly|take|stay (?:at|in)|eat|order|drink)|i'm (?:a |an )?(?:big |huge )?fan of|"
    r"i'm into|i am into|crazy about|can't get enough of|nothing beats)\s+", re.I)
_STOP = re.compile(r"[,.;:!?]|\s(?:and|but|so|because|since|when|while|if|please|can you|could you|for me)\s", re.I)


def states_preference(sentence: str) -> bool:
    """True if the sentence carries a lasting-preference cue (not a bare command or a one-off wish)."""
    return bool(_CUE.search(_WISH.sub(" ", sentence)))


_QUESTIONY = re.compile(r"^(?:what|who|where|when|why|how|which|is|are|do|does|can|could|will|would)\b", re.I)
_EMPTY = frozenset("it that this them those these one ones some any something anything stuff things it's".split())


def grounded_phrase(sentence: str, max_words: int = 4) -> str | None:
    """The user's own words for the value, or None: only the few words right after a preference
    cue ("I always go for sushi" -> "sushi"), never the opening words of a request or question."""
    s = sentence.strip()
    m = _LEAD.search(s)
    if not m:
        return None
    rest = _STOP.split(" " + s[m.end():] + " ", maxsplit=1)[0].strip()
    rest = re.sub(r"^(?:to|the|a|an|my|when|if|going to|having|eating|listening to|some)\s+", "", rest, flags=re.I)
    rest = re.split(r"\s(?:near|at|around|in|on|for|with|when|while|whenever|if|during|because|since)\s", " " + rest + " ",
                    maxsplit=1, flags=re.I)[0].strip() or rest
    rest = re.sub(r"\s+(?:again|anymore|any more|ever|at all|please|though|too|either|whenever possible)$", "", rest, flags=re.I)
    words = rest.split()
    if not words or len(words) > max_words or _QUESTIONY.match(rest):
        return None
    phrase = " ".join(words).strip(" '\"")
    if not phrase or all(w.lower() in _EMPTY for w in words):
        return None
    return phrase


_SPAN_STOP = frozenset((
    "i me my mine we our us you your he she it its they them their this that these those there here a an the and or "
    "but so if then than as of in on at to for with from by about into over after before up down out off again "
    "is are was were be been being am do does did have has had will would can could should shall may might must "
    "not no never always usually really just very quite too also only even ever all any some every each much more most "
    "please like love prefer hate enjoy want need get go going make put give take let keep find bring "
    "what who where when why how which whenever wherever while because since though although thing things stuff "
    "one ones lot bit kind sort way time times day days honestly actually basically literally definitely "
    "eat eating drink drinking do doing have having use using take taking try stay book fly ride sit sleep watch "
    "listen play see visit travel pay spend buy wear mind care matter matters person people guy fan "
    "i'm i've i'd i'll it's that's don't can't won't isn't aren't doesn't didn't").split())
_TOKEN = re.compile(r"[A-Za-z][A-Za-z'-]*")


def content_spans(clause: str, max_len: int = 3, limit: int = 40) -> list[str]:
    """Short runs of content words from the clause ("middle seat", "dog", "hot weather"): the only
    free values the extractor may store when no vocabulary item is named."""
    words = _TOKEN.findall(clause)
    out: list[str] = []
    for i in range(len(words)):
        if words[i].lower() in _SPAN_STOP:
            continue
        for n in range(1, max_len + 1):
            span = words[i:i + n]
            if len(span) < n or span[-1].lower() in _SPAN_STOP:
                continue
            if any(w.lower() in _SPAN_STOP for w in span[1:-1]):
                break
            out.append(" ".join(span))
    return list(dict.fromkeys(out))[:limit]
