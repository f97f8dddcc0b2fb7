"""A command that names its own value: the stored preference of that category is not what the user wants now.

"Play Metallica", "switch the interior lights to blue", "set 22 degrees": the request says what it wants, so the
user's favourite genre or warm lighting would only make the assistant second-guess an explicit choice. The one
exception is a stored item that constrains the value named (a dislike of Metallica, an avoidance of toll roads):
then that item comes first, so the assistant can ask ("you said you can't stand Metallica - play it anyway?").

Which category a command is about: the subcategory of a listed value it names ("blue" is an interior lighting
colour), or for a number or a proper name the subcategory the request is closest to (`CategoryIndex`). Nothing here
knows a schema: values, names and descriptions come from the operator's schema.
"""
from __future__ import annotations

import re
from typing import Iterable, Optional

from ..models import Preference
from ..schema.model import Schema
from .cues import names_number, names_unlisted_value, proper_names, says_what_it_wants
from .vocabulary import find_term, literal_attributes

# a category that is itself a constraint: a like of "Toll roads" in it is an avoidance of toll roads
_CONSTRAINT = re.compile(r"\b(avoid\w*|allerg\w*|restrict\w*|never|refus\w*|dislik\w*|intoleran\w*|can'?t stand)\b",
                         re.I)
_WORDS = re.compile(r"[a-z][a-z'-]+")
_GENERIC = frozenset("yes no low medium high normal other none any".split())


def _sub(main: str, sub: str) -> str:
    return f"{main}/{sub}"


class OwnValueRule:
    """Per schema: which subcategory a command's own value belongs to, and which stored items constrain it."""

    def __init__(self, schema: Schema):
        self._details = [(_sub(r.path.main, r.path.sub), r.detail.attributes) for r in schema.details()]
        # by the name only: a description often says "likes or avoids" of an ordinary category
        self._constraint = {str(r.path): bool(_CONSTRAINT.search(f"{r.sub.name} {r.detail.name}"))
                            for r in schema.details()}

    def named_subcategories(self, text: str, closest: Optional[str] = None) -> set[str]:
        """The subcategories whose value the command names; empty when the request is not a command or names none.
        `closest`: the subcategory the request is closest to, which a number, a proper name or a value the schema
        does not list ("lights to blue", "play hip hop") is taken to be about."""
        if not says_what_it_wants(text):
            return set()
        out = {sub for sub, attrs in self._details
               if attrs and [a for a in literal_attributes(text, attrs) if a.lower() not in _GENERIC]}
        if closest and (names_number(text) or proper_names(text) or names_unlisted_value(text)):
            out.add(closest)
        return out

    def constrains(self, text: str, p: Preference) -> bool:
        """A stored dislike (or a like in an avoidance, allergy or restriction category) of a value a command
        names."""
        if p.polarity != "dislike" and not self.is_constraint(p):
            return False
        return said(text, p.attribute) and says_what_it_wants(text)

    def is_constraint(self, p: Preference) -> bool:
        """A like in an avoidance, allergy or restriction category: it limits whatever the request names."""
        return self._constraint.get(str(p.path), False)

    def drop(self, text: str, hits: Iterable[Preference], closest: Optional[str] = None) -> set[int]:
        """Indexes of hits a command's own value makes moot: every hit that does not constrain the value named (a
        command that says what it wants needs no taste, its own category's or another's; a dislike or an avoidance
        of the value named is asked about)."""
        if not self.named_subcategories(text, closest):
            return set()
        return {i for i, p in enumerate(hits) if not self.constrains(text, p)}


def said(text: str, value: str) -> bool:
    """The request names the value: as listed ("toll road" for "Toll roads"), or the distinctive words of a longer
    one ("phone" for "Phone call", not "hotel" alone for "Boutique hotel"); a value with a number only as that
    number."""
    if literal_attributes(text, [value]):
        return True
    if any(c.isdigit() for c in value):
        return False
    words = [w for w in _WORDS.findall(value.lower()) if len(w) >= 5 and w not in _GENERIC]
    low = text.lower()
    return len(value.split()) > 1 and bool(words) and all(find_term(low, w) for w in words)
