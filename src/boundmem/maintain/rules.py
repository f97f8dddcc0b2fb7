"""The offline maintainers: pass / update / append without an LLM (`local`, and `rules`, the same rules without an
embedder).

CarMem's semantics, decided in two questions:

1. *Is the candidate about a stored attribute?* Lexical identity after normalisation
   (case, punctuation, hyphens, filler words like "food"/"cuisine", number agreement, token
   containment, near-identical spelling). Embeddings are deliberately NOT used for identity:
   MiniLM puts "Shortest Time"/"Shortest Distance" and "Yes"/"No" at cosine ~0.99, so any
   threshold that merges paraphrases also merges opposites.
2. *Does it hold with the same polarity?* Polarity is data the extractor gives (like / dislike /
   indifferent); it is compared, never re-read from the sentence (a second judge that disagrees
   with the extractor is how a like gets stored as its opposite). Same polarity -> pass;
   another polarity -> update: a contradiction ("I'm over jazz" after "I love jazz") turns the
   stored Jazz into a dislike, keeping the id and the before/after pair in the audit log.

A candidate about no stored attribute is new: append in a multi-preference (MP) category,
update of the newest stored one in a single-preference (MNP) category.
"""
from __future__ import annotations

import difflib
import re
from typing import Optional

from ..models import Candidate, Decision, Preference
from ..embed import Embedder
from ..schema.model import DetailCategory
from .base import Reconciliation, enforce_multiplicity

_FILLER = {"a", "an", "the", "of", "for", "and", "to", "with", "my", "i", "food", "foods", "cuisine", "music",
           "restaurant", "restaurants", "station", "stations", "preference", "preferred", "option", "options",
           "please", "style", "type", "kind"}


def _tokens(text: str) -> list[str]:
    # "Wi-Fi" and "WiFi" must agree, so hyphens join rather than split
    return re.findall(r"[a-z0-9]+", re.sub(r"(?<=\w)-(?=\w)", "", text.lower()))


def same_attribute(a: str, b: str) -> bool:
    """True if two attribute strings name the same thing (see module docstring)."""
    ta, tb = _tokens(a), _tokens(b)
    if ta == tb:
        return bool(ta) or a.strip().lower() == b.strip().lower()
    if re.findall(r"\d+", a) != re.findall(r"\d+", b):
        return False  # "less than 5 min" vs "less than 10 min", 22 vs 24 degrees
    ca, cb = {t for t in ta if t not in _FILLER}, {t for t in tb if t not in _FILLER}
    if ca and cb and (ca <= cb or cb <= ca):
        return True
    sa, sb = " ".join(ta), " ".join(tb)
    return min(len(sa), len(sb)) >= 6 and difflib.SequenceMatcher(None, sa, sb).ratio() >= 0.92


class LocalMaintainer:
    """`Maintainer` for offline use; see the module docstring for the rules. It needs no model: `embedder` is
    accepted so that every maintainer is built alike (the registry passes the Memory's)."""

    name = "local"

    def __init__(self, embedder: Optional[Embedder] = None):
        self.embedder = embedder

    def decide(self, candidate: Candidate, existing: list[Preference], detail: DetailCategory) -> Reconciliation:
        return Reconciliation(decision=self._decision(candidate, existing, detail))

    def _decision(self, candidate: Candidate, existing: list[Preference], detail: DetailCategory) -> Decision:
        if not existing:
            return Decision(action="insert", candidate=candidate, reason="nothing stored yet")
        c = candidate
        for p in reversed(existing):  # newest first: that is the one a revision most likely refers to
            if not same_attribute(c.attribute, p.attribute):
                continue
            if c.polarity == p.polarity:
                return Decision(action="pass", candidate=c, target=p.id,
                                reason=f"same as stored {p.attribute!r} ({p.polarity})")
            return Decision(action="update", candidate=c.model_copy(update={"attribute": p.attribute}), target=p.id,
                            reason=f"revises stored {p.attribute!r} from {p.polarity} to {c.polarity}")
        if detail.multiple:
            d = Decision(action="append", candidate=c,
                         reason=f"new attribute {c.attribute!r}; category holds several")
        else:
            d = Decision(action="update", candidate=c, target=existing[-1].id,
                         reason=f"{c.attribute!r} replaces {existing[-1].attribute!r}; category holds one")
        return enforce_multiplicity(d, existing, detail)


class RuleMaintainer(LocalMaintainer):
    """The model-free maintainer under its own name, kept for installs and tests that name it."""

    name = "rules"
    embedder = None  # class-level, so subclasses that skip __init__ (test doubles do) still work

    def __init__(self) -> None:
        super().__init__(embedder=None)
