"""Extraction: conversation -> candidate preferences, only inside the (pruned) schema."""
from __future__ import annotations

import threading
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ..errors import UpstreamError
from ..models import Candidate, Conversation
from ..schema.model import Schema


class ExtractionError(UpstreamError):
    """The extractor could not produce valid output (e.g. an LLM's tool call stayed invalid after the retry). An
    upstream failure: the model behind the extractor, not the caller's conversation, is at fault."""

    code = "extraction_failed"
    upstream = "the extractor's model"


class Extraction(BaseModel):
    """What one `extract` call found and how it went, returned to the caller rather than kept on the extractor:
    one extractor serves many threads (the service's pool), so per-call facts on the instance would be overwritten
    by whichever call ended last. `valid_at_try` is the try whose output was used (the paper's 1 or 2; an output
    that stays invalid raises ExtractionError instead); `errors` are the validation errors of the tries before it."""

    model_config = ConfigDict(frozen=True)

    candidates: list[Candidate] = Field(default_factory=list)
    valid_at_try: Literal[1, 2] = 1
    errors: list[str] = Field(default_factory=list)


@runtime_checkable
class Extractor(Protocol):
    def extract(self, conversation: Conversation, schema: Schema) -> Extraction:
        """Only categories present in `schema` may appear in the result; the caller passes the user's pruned schema."""


@runtime_checkable
class Warmable(Protocol):
    """An extractor with one-time work (loading a model, embedding the schema) that a server does before its first
    request rather than during it (`Memory.warm`)."""

    def warm(self, schema: Schema) -> None: ...


@runtime_checkable
class BatchExtractor(Protocol):
    """An extractor that is faster over many conversations at once (bulk import, benchmarks)."""

    def extract_many(self, conversations: list[Conversation], schema: Schema) -> list[list[Candidate]]: ...


class StatsCounter:
    """Counts an extractor keeps over its life, shared by the threads that share the extractor (the service's pool):
    updated under one lock, read as a copy, so a reader never sees a half-applied update."""

    def __init__(self, stats: BaseModel):
        self._stats = stats
        self._stats_lock = threading.Lock()

    @property
    def stats(self) -> Any:
        """A snapshot of the counts over all calls so far."""
        with self._stats_lock:
            return self._stats.model_copy()

    def _count(self, **deltas: int) -> None:
        with self._stats_lock:
            for k, v in deltas.items():
                setattr(self._stats, k, getattr(self._stats, k) + v)
