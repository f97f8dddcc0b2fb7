"""Pieces both baselines need: the chat-model protocol, sentence helpers, cosine top-k."""
from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class ChatLLM(Protocol):
    """The one call the baselines make, as `boundmem.llm.LLMClient` offers it (so CAIM and the baselines share it)."""

    def complete(self, messages: list[dict], json_mode: bool = False) -> str: ...


def ask(llm: ChatLLM, prompt: str, json_mode: bool = False) -> str:
    return llm.complete([{"role": "user", "content": prompt}], json_mode=json_mode)


_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'“(])")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT.split(text.strip()) if s.strip()]


def clip(text: str, limit: int) -> str:
    """Cut at a word boundary so a clipped memory never ends mid-word."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "…"


def top_k(matrix: np.ndarray, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Row indices of the k largest cosine similarities (rows and query are unit vectors), ties by lower index."""
    if matrix.shape[0] == 0 or k <= 0:
        return []
    sims = matrix @ query
    order = np.lexsort((np.arange(len(sims)), -sims))[:k]
    return [(int(i), float(sims[i])) for i in order]
