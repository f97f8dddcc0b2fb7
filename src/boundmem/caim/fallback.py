"""The documented fallback for LLM steps: on an unusable reply, log it, count it, and use the local part.

CAIM's LLM steps (controller, tag selection, relevance filter, post-thinking extension and review) each have a local
counterpart. A benchmark run over hundreds of calls should not die on one malformed reply, but a silent fallback would
misreport what was measured, so every fallback is logged with the step and the problem and counted in
`FailureCount.n` (reported by `boundmem bench gvd` as "LLM failures"). With on_llm_error="raise" no wrapper is used
and `CAIMLLMError` reaches the caller; post-thinking then stores nothing (one transaction).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date
from typing import Any, Optional, Sequence

from .llmio import CAIMLLMError

log = logging.getLogger(__name__)


@dataclass
class FailureCount:
    n: int = 0


class Fallback:
    """Wraps any CAIM part (controller, tagger, relevance filter, thinker, merger) with a local backup."""

    def __init__(self, primary: Any, backup: Any, counter: Optional[FailureCount] = None):
        self.primary, self.backup = primary, backup
        self.counter = counter or FailureCount()
        self.name = f"{getattr(primary, 'name', type(primary).__name__)}+fallback"

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self.primary, method)(*args)
        except CAIMLLMError as e:
            self.counter.n += 1
            log.warning("%s; falling back to %s", e, getattr(self.backup, "name", type(self.backup).__name__))
            return getattr(self.backup, method)(*args)

    def needs_memory(self, query: str, stm: Sequence = (), today: Optional[date] = None) -> bool:
        return self._call("needs_memory", query, stm, today)

    def tags(self, text: str, max_tags: int = 3) -> list[str]:
        return self._call("tags", text, max_tags)

    def filter(self, query: str, candidates: Sequence, k: int, today: Optional[date] = None) -> list:
        return self._call("filter", query, candidates, k, today)

    def think(self, turns: Sequence, day: date) -> list:
        return self._call("think", turns, day)

    def decide(self, draft: Any, similar: Sequence) -> Any:
        return self._call("decide", draft, similar)
