"""Implied needs: a request that does not name a category but that the category's items always bear on.

"Take me to the airport" names no road type, yet a stored avoidance of toll roads should shape the route; "what
should I eat?" names no diet, yet a vegetarian should not be sent to a steakhouse. The link is not in the words, so
the schema states it: a category's `applies_to` lists the kinds of request its items bear on. A kind named here
("routing", "food", "lodging", "shopping", "travel") is recognised by the request rules below; any other entry is a
phrase the gate compares the request with (`gate.py`, the "asks_for" feature). A held item of a category whose
`applies_to` names the request's kind is recalled.
"""
from __future__ import annotations

import re

from ..models import Preference
from ..schema.model import Schema
from .cues import normalise

KINDS: dict[str, re.Pattern] = {
    "routing": re.compile(r"\b(navigate|take me (to|home|back)|drive (me )?(to|home)|get me (to|home)|directions|"
                          r"route|way (to|home)|head(ing)? (to|home)|how (do|can) i get to|road trip|go to the)\b", re.I),
    "food": re.compile(r"\b(eat|hungry|food|meal|dinner|lunch|breakfast|brunch|snack|restaurant|dish(es)?|cook|recipe|"
                       r"takeaway|takeout|order in|menu)\b", re.I),
    "lodging": re.compile(r"\b(hotel|hostel|room|stay|accommodation|airbnb|resort|inn|b&b)\b", re.I),
    "shopping": re.compile(r"\b(buy|shop|shopping|order|deal|deals|purchase|gift)\b", re.I),
    "travel": re.compile(r"\b(trip|travel|holiday|vacation|flight|fly|itinerary|visit)\b", re.I),
}


# a request about something else that only mentions a meal or a trip: a calendar entry for brunch, a video about
# cooking, a message, a reminder, a ride someone else drives
_ELSEWHERE = re.compile(r"\b(calendar|schedule|meeting|appointment|remind\w*|alarm|e-?mail|text|message|post|tweet|"
                        r"videos?|news|weather|taxi|uber|cab|lyft)\b", re.I)


def request_kinds(text: str) -> set[str]:
    """The kinds of request `text` is, by the rules above (none for a request about something else)."""
    q = normalise(text)
    if _ELSEWHERE.search(q):
        return set()
    return {k for k, rx in KINDS.items() if rx.search(q)}


class ImpliedNeeds:
    """Per schema: which categories' items a kind of request bears on (their `applies_to`)."""

    def __init__(self, schema: Schema):
        self._kinds = {str(r.path): {a.strip().lower() for a in (*r.sub.applies_to, *r.detail.applies_to)} & set(KINDS)
                       for r in schema.details()}

    def applies(self, text: str, p: Preference) -> bool:
        """Whether the request is of a kind the preference's category says its items bear on."""
        kinds = self._kinds.get(str(p.path))
        return bool(kinds) and bool(kinds & request_kinds(text))
