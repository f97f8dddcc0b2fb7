"""A vocabulary matcher: finds attribute words of the schema in the user's own sentences.

It is the floor that works on any schema with no model at all; the MiniLM-based local
extractor is the default and is measured against it in `boundmem bench carmem`.
"""
from __future__ import annotations

import re

from ..models import Candidate, Conversation
from ..schema.model import Schema
from .base import Extraction


class KeywordExtractor:
    def extract(self, conversation: Conversation, schema: Schema) -> Extraction:
        out: dict[tuple[str, str], Candidate] = {}
        for _, text in conversation.user_sentences():
            low = text.lower()
            for ref in schema.details():
                for attr in ref.detail.attributes:
                    a = attr.split("(")[0].strip().lower()
                    if len(a) >= 3 and a not in ("yes", "no") and re.search(r"\b" + re.escape(a) + r"\b", low):
                        out.setdefault((str(ref.path), attr), Candidate(path=ref.path, attribute=attr, sentence=text))
        return Extraction(candidates=list(out.values()))
