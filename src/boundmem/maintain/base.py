"""Maintenance: reconcile a candidate with the stored preferences of the same detail category."""
from __future__ import annotations

from typing import Literal, Optional, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from ..models import Candidate, Decision, Preference
from ..schema.model import DetailCategory


class Reconciliation(BaseModel):
    """A maintainer's decision and how it was reached, returned to the caller rather than kept on the maintainer
    (one maintainer serves many threads). `valid_at_try`: the try whose answer was used (1 or 2); None when no
    answer was used (an LLM asked nothing because nothing was stored yet, or failed twice and the default won)."""

    model_config = ConfigDict(frozen=True)

    decision: Decision
    valid_at_try: Optional[Literal[1, 2]] = 1


@runtime_checkable
class Maintainer(Protocol):
    def decide(self, candidate: Candidate, existing: list[Preference], detail: DetailCategory) -> Reconciliation:
        """pass (duplicate of `target`), update (replaces `target`), append (new; only if detail.multiple),
        insert (nothing stored yet). Implementations must never return append for a single-preference category."""


def enforce_multiplicity(decision: Decision, existing: list[Preference], detail: DetailCategory) -> Decision:
    """The structural rule the paper gets from offering MNP categories no append tool, applied to any maintainer."""
    if not existing:
        return Decision(action="insert", candidate=decision.candidate, reason=decision.reason or "nothing stored yet")
    ids = {p.id for p in existing}
    if decision.action == "append" and not detail.multiple:
        return Decision(action="update", candidate=decision.candidate, target=existing[-1].id,
                        reason=f"single-preference category; append turned into update. {decision.reason}".strip())
    if decision.action in ("pass", "update") and decision.target not in ids:
        # an unknown target (e.g. an LLM's invented id) falls back to the newest stored preference
        return Decision(action=decision.action, candidate=decision.candidate, target=existing[-1].id,
                        reason=f"target {decision.target!r} unknown; used newest. {decision.reason}".strip())
    return decision
