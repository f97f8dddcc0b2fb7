"""Extraction: conversation -> candidate preferences, only inside the (pruned) schema."""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..models import Candidate, Conversation
from ..schema.model import Schema


class ExtractionError(Exception):
    """The extractor could not produce valid output (e.g. an LLM's tool call stayed invalid after the retry)."""


@runtime_checkable
class Extractor(Protocol):
    def extract(self, conversation: Conversation, schema: Schema) -> list[Candidate]:
        """Only categories present in `schema` may appear in the result; the caller passes the user's pruned schema."""
