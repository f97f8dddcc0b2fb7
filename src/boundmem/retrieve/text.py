"""What gets embedded for a stored preference (the paper's enriched text) and the sentence-only baseline."""
from __future__ import annotations

from ..schema.model import DetailCategory


def enriched_text(detail: DetailCategory, attribute: str, sentence: str) -> str:
    text = sentence.strip().rstrip(".")
    return f"{detail.name}: {attribute}." + (f" {text}." if text else "")


def sentence_text(detail: DetailCategory, attribute: str, sentence: str) -> str:
    return sentence.strip() or f"{detail.name}: {attribute}"
