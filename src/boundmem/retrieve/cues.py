"""Request cues: what the rules read in a user's request, for CAIM's controller and the recall gate alike.

One module so that both kinds of memory hear a request the same way: small talk (greetings, thanks), a request for
advice, a recommendation or a task, a question about the user's own preferences or past, a recall cue ("do you
remember", "what did you suggest"), an explicit command that says what it wants ("turn on the wipers", "set 22
degrees"), a number. CAIM's controller (`caim/controller.py`) adds what needs more than patterns (a past date
resolved against today, an embedder's recall phrasings); the recall gate (`retrieve/gate.py`) reads `RequestCues`.
The rules were first written while reading GVD's probing questions; the request rule was added for
preference-dependent requests in other domains.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional

@dataclass(frozen=True)
class RequestCues:
    """What the request rules read in a request: `request` (the cue of a request for advice, a recommendation or a
    task), `about_self` (a question about the user's own preferences or past), `small_talk` (only greetings, thanks,
    acknowledgements)."""

    small_talk: bool = False
    request: Optional[str] = None
    about_self: Optional[str] = None


CueReader = Callable[[str], RequestCues]


def no_cues(text: str) -> RequestCues:
    return RequestCues()


EXPLICIT = re.compile(r"^\W*(please |hey |ok(ay)? |now )?((can|could|would|will) you (please )?)?"
                       r"(turn (on|off|up|down)|turn (the|my) \w+( \w+)? (on|off|up|down)|switch (on|off)|switch (the|my) "
                       r"\w+( \w+)? (on|off)|open|close|lock|unlock|mute|unmute|stop|pause|resume|skip|cancel|call|ring|"
                       r"phone|dial|text|message|email|navigate|take me (to|home)|drive (me )?(to|home)|directions to|"
                       r"remind|wake me|set (an?|the|my) (alarm|timer|reminder)|increase|decrease|raise|lower|dim|brighten|darken|next|"
                       r"previous|repeat|read|tell me (a|the|what|when|how)|what('s| is) the (time|date|weather)|volume|"
                       r"(turn|set|switch|change|put|make) (the|my|all the) [\w ]{1,25}? (to|on|off)|"
                       r"(play|put on) (some )?\w+ (music|radio)\b)\b",
                       re.I)
NUMBER = re.compile(r"\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
                     r"half|quarter)\b", re.I)


_REMEMBER = re.compile(r"\b((do|can|did) you (still )?remember|you remember|remember (what|when|which|who|where|how|me)|"
                       r"recall|remind me(?! to\b))\b", re.I)
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
    r"find me|book (me )?(a|an)|gift for|what to (eat|cook|wear|buy|watch|read|do|play)|where to (eat|go|stay)|"
    r"point me (to|at|towards)|\b(a|an|some) [\w' -]{1,30}? to (get|buy|try|wear|read|watch|cook|make))\b",
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
    qs = questions(q) or (q if re.match(r"^\W*(what|which|where|how|who|when|should|can|could)\b", q, re.I) else "")
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


def questions(text: str) -> str:
    """The sentences of a message that ask something (end in a question mark)."""
    return " ".join(x for x in _SENT.split(text) if "?" in x)

def recall_reason(q: str) -> Optional[str]:
    """Why a (whitespace-normalised) message needs memory by the recall and self-question patterns, or None: the
    checks that come before a date is resolved."""
    qs = questions(q)
    if m := _REMEMBER.search(q):
        return f"recall cue {m.group(0)!r}"
    if qs and (m := (_CUES.search(qs) or _BACK_REF.search(q))):
        return f"recall cue {m.group(0)!r}"
    if qs and (m := (_SELF_PREF.search(qs) or _SELF_FACT.search(qs) or _OUR_PAST.search(qs)
                     or _OWN_NOW.search(qs))):
        return f"asks about the user's own preferences or facts {m.group(0)!r}"
    if m := (_OWN_PAST_Q.search(q) or _OWN_THING_Q.search(q)):
        return f"asks about the user's own past {m.group(0)[:40]!r}"
    return None


def later_reason(q: str) -> Optional[str]:
    """The checks after a date is resolved: date words in a question, a request for advice or a task."""
    if questions(q) and _DATE_WORDS.search(q):
        return "refers to a past date"
    if (cue := advice_request(q) or personal_request(q)) and not is_small_talk(q):
        return f"asks for a recommendation or advice {cue!r}"
    return None


def pattern_reason(text: str) -> Optional[str]:
    """Why a message needs memory by the patterns alone (no date resolved, no embedder), or None."""
    q = normalise(text)
    return recall_reason(q) or later_reason(q)


def normalise(query: str) -> str:
    return " ".join(query.strip().strip('"').split())


def request_cues(text: str) -> RequestCues:
    """The request rules as the recall gate reads them."""
    if is_small_talk(text):
        return RequestCues(small_talk=True)
    reason = pattern_reason(text)
    about = reason if reason and not reason.startswith("asks for a recommendation") else None
    return RequestCues(request=advice_request(text) or personal_request(text), about_self=about)


# a command: the request tells the assistant to do something now, in the imperative or as "I want ..."
COMMAND = re.compile(r"^\W*(please |hey |ok(ay)? |now |so )?((can|could|would|will) you (please )?)?"
                     r"(i('d| would) like( to)?( have| hear)? |i want( to)?( hear)? )?"
                     r"(play|put|set|switch|change|make|turn|tune|book|reserve|get me|send|ship|pay|add|call|phone|ring|"
                     r"navigate|take|drive|route|heat|warm|cool|dim|brighten|fill|find|order|sign|start|shuffle|queue|"
                     r"lights?|radio|seat|fan|crank|go with|use)\b", re.I)
# a reminder to set ("remind me to buy milk"), not a question about the past ("remind me what you suggested")
REMINDER = re.compile(r"\b(remind me to|set an? (reminder|alarm|timer)|add (a |an )?(reminder|appointment))\b", re.I)
_LOWER_BEFORE = frozenset("""to in near at from for via by on with of into around outside than towards toward past
between across""".split())
_NOT_NAMES = frozenset("""i i'm i'd i'll monday tuesday wednesday thursday friday saturday sunday january february march
april may june july august september october november december ok okay please hey hi thanks""".split())
_CAP = re.compile(r"[A-Z][\w'’&.-]*")


def is_command(text: str) -> bool:
    """A command or an explicit setting, not a request for advice ("play X", "set 22 degrees", "book the
    Sheraton"; not "recommend a hotel")."""
    q = normalise(text)
    return bool(COMMAND.search(q) or EXPLICIT.search(q)) and not advice_request(q)


# a request for the assistant's opinion, which a command worded as an errand ("book me a window seat") is not
_ASKS_OPINION = re.compile(r"\b(recommend\w*|suggest\w*|advi[cs]e|ideas?|should|any good|what'?s (a )?good|which|"
                           r"best|worth)\b", re.I)


def says_what_it_wants(text: str) -> bool:
    """A command or an errand that can name its own value ("play Metallica", "book me a window seat", "find me a
    Thai place"), not a request for an opinion ("recommend a hotel") and not a reminder to set."""
    q = normalise(text)
    if _ASKS_OPINION.search(q) or is_reminder(q):
        return False
    return any(COMMAND.search(c) or EXPLICIT.search(c) for c in re.split(r"[,;.!?]\s+|\s+and\s+", q) if c)


# a setting given its value, listed or not ("lights to blue", "set the fan to high"), and something to play named
# ("play hip hop"): the request names a value of the category it is closest to
_SETS_TO = re.compile(r"\b(set|switch|change|turn|make|dim|brighten|lights?|colou?r)\b[^.?!]*?\bto (?!(the|a|an|my|our|"
                      r"your|me|us|work|home|school|bed)\b)\w", re.I)
_PLAYS = re.compile(r"\b(play|put on|queue|shuffle)\s+(?!(some|something|anything|music|me|us|a|an|the|my|it|that|this|"
                    r"what|whatever|next|previous|more|again)\b)\w", re.I)


# what a command asks for, after its verb and any determiners ("order me a mushroom pizza" -> "mushroom")
_OBJECT = re.compile(r"\b(play|put on|queue|order|book|reserve|get me|get us|buy|watch|cook|make me|make us)\s+"
                     r"(?:(?:me|us|a|an|the|some|my|our|your|one|another)\s+)*([a-z][\w'-]*)", re.I)
# words that say what kind of thing a command wants, not which one ("book a room", "play something")
_GENERIC_OBJECT = frozenset("""something anything everything music song songs track tracks playlist album film movie
films movies show shows series episode podcast podcasts radio station food meal meals dinner lunch breakfast snack
table room rooms hotel flight flights ticket tickets taxi cab ride car seat trip holiday weekend day order bill invoice
delivery appointment reminder alarm timer call it that this them these those good nice great new quick little few
couple more next previous same usual favourite favorite right best place spot few lot bit drink coffee tea""".split())
_PREPOSITIONS = frozenset("to in at for on from with by of into near around i you we they he she".split())


def names_unlisted_value(text: str) -> bool:
    """A setting given its value, something to play named, or a command whose object is a particular thing ("play
    some techno", "put on a horror film", "order a mushroom pizza"; not "book a room", "play something"), whether or
    not the schema lists the value."""
    q = normalise(text)
    if _SETS_TO.search(q) or _PLAYS.search(q):
        return True
    return any(m.group(2).lower() not in _GENERIC_OBJECT and m.group(2).lower() not in _PREPOSITIONS
               for m in _OBJECT.finditer(q))


def is_reminder(text: str) -> bool:
    return bool(REMINDER.search(text))


def proper_names(text: str) -> list[str]:
    """Capitalised words that name something the request wants ("Play Metallica", "book the Sheraton"): not the
    first word of a sentence, not "I", a weekday or a month, and not a place after a preposition ("to Lisbon",
    "in Rome"), which is where the request happens, not what it asks for."""
    q = normalise(text)
    out = []
    for m in _CAP.finditer(q):
        before = q[:m.start()].rstrip()
        if not before or before[-1] in ".!?:\"“(":
            continue
        word = m.group(0).strip(".'’").lower()
        prev = before.split()[-1].lower().strip(",;") if before.split() else ""
        if word in _NOT_NAMES or prev in _LOWER_BEFORE:
            continue
        out.append(m.group(0).strip(".,"))
    return out


def names_number(text: str) -> bool:
    return bool(NUMBER.search(text))
