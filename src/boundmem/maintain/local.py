"""The offline maintainer: pass / update / append without an LLM.

CarMem's semantics, decided in two questions:

1. *Is the candidate about a stored attribute?* Lexical identity after normalisation
   (case, punctuation, hyphens, filler words like "food"/"cuisine", number agreement, token
   containment, near-identical spelling). Embeddings are deliberately NOT used for identity:
   MiniLM puts "Shortest Time"/"Shortest Distance" and "Yes"/"No" at cosine ~0.99, so any
   threshold that merges paraphrases also merges opposites.
2. *If so, does the user affirm it or turn against it?* The polarity of the candidate is
   explicit when its attribute is negated ("no Italian", "not Italian"); otherwise the
   sentence decides (`polarity.PolarityModel`, a MiniLM logistic regression trained on CarMem
   users 51-100; the cue lexicon when another embedder is in use). Same polarity as stored ->
   pass; opposite -> update.

A candidate about no stored attribute is new: append in a multi-preference (MP) category,
update of the newest stored one in a single-preference (MNP) category.

What an update stores for a negation: the candidate's sentence and the attribute
"not <stored attribute>", so the memory keeps the user's rejection (an assistant should stop
proposing Italian, not forget the topic) and a later "I love Italian again" is recognised as
a revision of the same attribute. The audit log keeps the before/after pair.
"""
from __future__ import annotations

import difflib
import re
from typing import Optional

from ..models import Candidate, Decision, Preference
from ..embed import Embedder
from ..schema.model import DetailCategory
from .base import Reconciliation, enforce_multiplicity
from .polarity import PolarityModel, cue_negates

_FILLER = {"a", "an", "the", "of", "for", "and", "to", "with", "my", "i", "food", "foods", "cuisine", "music",
           "restaurant", "restaurants", "station", "stations", "preference", "preferred", "option", "options",
           "please", "style", "type", "kind"}
_NEG_PREFIX = re.compile(r"^\s*(?:not|no more|no longer|no|non|anything but|anything except|avoid|exclude|without|never)"
                         r"(?:\s+|-)(?=[^\s(])", re.I)


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


def split_negation(attribute: str, detail: DetailCategory) -> tuple[str, bool]:
    """("no Italian" -> ("Italian", True)). An attribute in the schema's own vocabulary is never
    a negation, even if it starts with "No" ("No (traffic tolerated for fastest route)")."""
    if any(_tokens(attribute) == _tokens(v) for v in detail.attributes):
        return attribute.strip(), False
    if _tokens(attribute) == ["no"]:
        return "Yes", True  # what `negated("Yes")` stores
    m = _NEG_PREFIX.match(attribute)
    if m and attribute[m.end():].strip():
        return attribute[m.end():].strip(), True
    return attribute.strip(), False


def negated(base: str) -> str:
    """The attribute stored when the user turns against `base` ("not Italian"; a bare Yes/No flips)."""
    flip = {"yes": "No", "no": "Yes"}.get(" ".join(_tokens(base)))
    return flip or f"not {base}"


class LocalMaintainer:
    """`Maintainer` for offline use; see the module docstring for the rules.

    `polarity` defaults to the shipped model; it is used only if it was trained for this
    embedder, otherwise (or with no embedder) the cue lexicon judges polarity. A shipped model that cannot be read
    raises PolarityModelError naming the file (a broken install must not quietly change the decisions).
    """

    name = "local"

    def __init__(self, embedder: Optional[Embedder], polarity: Optional[PolarityModel] = None):
        self.embedder = embedder
        if polarity is None and embedder is not None:
            polarity = PolarityModel.load()
        self.polarity = polarity if polarity is not None and embedder is not None and polarity.fits(embedder) else None

    def sentence_negates(self, detail: DetailCategory, attribute: str, sentence: str) -> bool:
        if not sentence.strip():
            return False
        if self.polarity is not None and self.embedder is not None:
            return self.polarity.negates(self.embedder, detail.name, attribute, sentence)
        return cue_negates(attribute, sentence)

    def decide(self, candidate: Candidate, existing: list[Preference], detail: DetailCategory) -> Reconciliation:
        return Reconciliation(decision=self._decision(candidate, existing, detail))

    def _decision(self, candidate: Candidate, existing: list[Preference], detail: DetailCategory) -> Decision:
        if not existing:
            return Decision(action="insert", candidate=candidate, reason="nothing stored yet")
        c_base, c_neg = split_negation(candidate.attribute, detail)
        for p in reversed(existing):  # newest first: that is the one a revision most likely refers to
            p_base, p_neg = split_negation(p.attribute, detail)
            if not (same_attribute(c_base, p_base) or same_attribute(candidate.attribute, p.attribute)):
                continue
            if c_neg:
                neg, why = True, f"attribute {candidate.attribute!r} is negated"
            else:
                neg = self.sentence_negates(detail, c_base, candidate.sentence)
                why = "the sentence turns against it" if neg else "the sentence affirms it"
            if neg == p_neg:
                return Decision(action="pass", candidate=candidate, target=p.id,
                                reason=f"same as stored {p.attribute!r}; {why}")
            new_attr = negated(p_base) if neg else p_base
            return Decision(action="update", candidate=candidate.model_copy(update={"attribute": new_attr}),
                            target=p.id, reason=f"revises stored {p.attribute!r} to {new_attr!r}; {why}")
        if detail.multiple:
            d = Decision(action="append", candidate=candidate,
                         reason=f"new attribute {candidate.attribute!r}; category holds several")
        else:
            d = Decision(action="update", candidate=candidate, target=existing[-1].id,
                         reason=f"{candidate.attribute!r} replaces {existing[-1].attribute!r}; category holds one")
        return enforce_multiplicity(d, existing, detail)
