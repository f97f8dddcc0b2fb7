"""Extraction: conversation -> candidate preferences, only inside the (pruned) schema."""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..errors import UpstreamError
from ..models import Candidate, Conversation
from ..schema.model import Schema


class ExtractionError(UpstreamError):
    """The extractor could not produce valid output (e.g. an LLM's tool call stayed invalid after the retry). An
    upstream failure: the model behind the extractor, not the caller's conversation, is at fault."""

    code = "extraction_failed"
    upstream = "the extractor's model"


@runtime_checkable
class Extractor(Protocol):
    def extract(self, conversation: Conversation, schema: Schema) -> list[Candidate]:
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
