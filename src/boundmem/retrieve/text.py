"""What gets embedded for a stored preference (the paper's enriched text) and the sentence-only baseline."""
from __future__ import annotations

from ..schema.model import DetailCategory


def enriched_text(detail: DetailCategory, attribute: str, sentence: str, polarity: str = "like") -> str:
    """A like reads as before ("Music genre: Jazz."); a dislike or indifference says so ("Music genre: dislikes Jazz."),
    so that a dislike is not embedded, and recalled, as if it were the like of the same value."""
    text = sentence.strip().rstrip(".")
    value = attribute if polarity == "like" else f"{_SAID[polarity]} {attribute}"
    return f"{detail.name}: {value}." + (f" {text}." if text else "")


_SAID = {"dislike": "dislikes", "indifferent": "does not mind"}


def sentence_text(detail: DetailCategory, attribute: str, sentence: str) -> str:
    return sentence.strip() or f"{detail.name}: {attribute}"
