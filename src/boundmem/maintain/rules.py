"""A rule maintainer: same attribute -> pass, negation of a stored one -> update, otherwise append/update."""
from __future__ import annotations

import re

from ..models import Candidate, Decision, Preference
from ..schema.model import DetailCategory
from .base import enforce_multiplicity

NEGATION = re.compile(r"\b(not|no longer|don't|do not|never|stop|over|avoid|skip|anymore|instead|rather than|dislike|hate)\b", re.I)


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", s.lower()).strip()


class RuleMaintainer:
    def decide(self, candidate: Candidate, existing: list[Preference], detail: DetailCategory) -> Decision:
        if not existing:
            return Decision(action="insert", candidate=candidate, reason="nothing stored yet")
        same = [p for p in existing if _norm(p.attribute) == _norm(candidate.attribute)]
        if same:
            if NEGATION.search(candidate.sentence):
                return Decision(action="update", candidate=candidate, target=same[0].id, reason="negates a stored preference")
            return Decision(action="pass", candidate=candidate, target=same[0].id, reason="same attribute already stored")
        d = Decision(action="append" if detail.multiple else "update", candidate=candidate,
                     target=None if detail.multiple else existing[-1].id, reason="different attribute")
        return enforce_multiplicity(d, existing, detail)
