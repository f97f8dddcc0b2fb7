"""What the reader reads: one user turn after the assistant turn before it, as word-pieces, and the words it
compares a span with (a category's description, a listed item).

The trainer (benchmarks/boundmem_bench/train/reader.py) and the run time both build their inputs here, so a model is
always fed exactly what it was trained on; `INPUT_VERSION` is part of the model's input hash and changes whenever
anything here changes what the model sees.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..schema.model import DetailRef

INPUT_VERSION = "reader-input-2"
TOKENIZER = Path(__file__).resolve().parents[1] / "embed" / "data" / "minilm-tokenizer.json"
MAX_CONTEXT = 32   # word-pieces of the assistant turn kept (its end: the question it just asked)
MAX_TEXT = 96      # word-pieces of the user turn per window; a longer turn is read in overlapping windows
STRIDE = 64        # how far one window moves on from the last
CLS, SEP, PAD = 101, 102, 0

BIO = ("O", "B", "I")
POLARITY = ("like", "dislike", "indifferent")
EVIDENCE = ("stated", "observed", "none")
HOLDER = ("self", "other")


def load_tokenizer():
    """The bundled MiniLM word-piece tokenizer with its fixed padding and truncation off: windows are cut here."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.no_padding()
    tok.no_truncation()
    return tok


@dataclass(frozen=True)
class Window:
    """One encoder input: ids/types, and for each position of the user's words the character span in the turn."""

    ids: list[int]
    types: list[int]
    text_offsets: list[tuple[int, int]]   # character offsets in the user turn, one per user word-piece
    text_start: int                      # index in `ids` of the first user word-piece


def windows(tokenizer, context: str, text: str) -> list[Window]:
    """The turn as encoder inputs: `[CLS] end of the assistant turn [SEP] user words [SEP]`, one window per
    `MAX_TEXT` word-pieces of the user turn (each overlapping the last), so a long turn is read whole."""
    ctx = tokenizer.encode(context or "", add_special_tokens=False).ids[-MAX_CONTEXT:]
    enc = tokenizer.encode(text, add_special_tokens=False)
    ids, offsets = enc.ids, enc.offsets
    out = []
    start = 0
    while True:
        piece = ids[start:start + MAX_TEXT]
        head = [CLS, *ctx, SEP]
        out.append(Window(ids=head + piece + [SEP], types=[0] * len(head) + [1] * (len(piece) + 1),
                          text_offsets=list(offsets[start:start + MAX_TEXT]), text_start=len(head)))
        if start + MAX_TEXT >= len(ids):
            return out
        start += STRIDE


def category_text(ref: DetailRef) -> str:
    """How a detail category is described to the encoder: its place in the tree, its description, its examples and
    listed values, all from the operator's schema (so any schema can be read without retraining)."""
    d = ref.detail
    parts = [f"{ref.main.label} > {ref.sub.label} > {d.label}.", d.description]
    if d.examples:
        parts.append(" ".join(d.examples[:3]))
    if d.attributes:
        parts.append("For example: " + ", ".join(a.split("(")[0].strip() for a in d.attributes[:8]) + ".")
    return " ".join(p for p in parts if p)


def item_text(ref: DetailRef, item: str) -> str:
    """A listed value of a closed category as the encoder compares it with the user's words."""
    return f"{ref.detail.label}: {item}"


def pad(batch: Sequence[Window]) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
    """ids, attention mask and token types of windows padded to the longest."""
    n = max(len(w.ids) for w in batch)
    ids = [w.ids + [PAD] * (n - len(w.ids)) for w in batch]
    mask = [[1] * len(w.ids) + [0] * (n - len(w.ids)) for w in batch]
    types = [w.types + [0] * (n - len(w.types)) for w in batch]
    return ids, mask, types
