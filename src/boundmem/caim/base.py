"""What every dialogue-memory system in the GVD benchmark implements (CAIM and the MemoryBank and TiM baselines),
so `boundmem bench gvd` runs them under identical conditions."""
from __future__ import annotations

from datetime import date
from typing import Optional, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field


class DialogueTurn(BaseModel):
    """One user query and the assistant's response; `id` is "<date>#<index>" as in gvd/gold_en.jsonl."""

    model_config = ConfigDict(frozen=True)

    id: str
    query: str
    response: str = ""


class MemoryItem(BaseModel):
    """A retrieved memory and the dialogue turns it came from (for evidence-based scoring)."""

    model_config = ConfigDict(frozen=True)

    id: str
    text: str
    source_turn_ids: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    timestamp: Optional[date] = None
    score: float = 0.0


class RetrievalResult(BaseModel):
    retrieved: bool = Field(description="False when a memory controller decided the turn needs no long-term memory.")
    items: list[MemoryItem] = []


class StorageStats(BaseModel):
    items: int
    chars: int


@runtime_checkable
class DialogueMemory(Protocol):
    name: str

    def add_session(self, user: str, day: date, turns: list[DialogueTurn]) -> None:
        """One day's dialogue; implementations consolidate (summarise, post-think) at the end of it."""

    def retrieve(self, user: str, query: str, today: date, k: int = 5) -> RetrievalResult: ...

    def storage(self, user: str) -> StorageStats: ...
