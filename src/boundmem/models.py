"""The typed objects that cross boundmem's boundaries (library API, store, CLI, HTTP)."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .schema.model import CategoryPath


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["user", "assistant"]
    text: str = Field(min_length=1)


class Conversation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    turns: tuple[Turn, ...] = Field(min_length=1)
    at: Optional[datetime] = None

    def user_sentences(self) -> list[tuple[int, str]]:
        return [(i, t.text) for i, t in enumerate(self.turns) if t.role == "user"]


class Candidate(BaseModel):
    """A preference an extractor found, not yet reconciled with what is stored."""

    model_config = ConfigDict(frozen=True)

    path: CategoryPath
    attribute: str = Field(min_length=1)
    sentence: str = ""
    confidence: float = 1.0
    cue: str = Field(default="", description="The words that marked the statement as lasting (recorded in the audit cause).")


class Preference(BaseModel):
    """A stored preference, with the provenance the user is shown."""

    model_config = ConfigDict(frozen=True)

    id: str
    user: str
    path: CategoryPath
    attribute: str
    sentence: str
    conversation_id: Optional[str] = None
    created_at: datetime
    updated_at: datetime


Action = Literal["insert", "pass", "update", "append"]


class Decision(BaseModel):
    """What maintenance chose for one candidate. `target` is the stored preference it passes on or replaces."""

    model_config = ConfigDict(frozen=True)

    action: Action
    candidate: Candidate
    target: Optional[str] = None
    reason: str = ""


class AuditEntry(BaseModel):
    """One entry of a user's audit log. `seq` counts this user's entries only (1, 2, ...).

    Entries whose content was erased (a deleted preference, an opt-out purge, forget) keep what was done (`op`),
    when (`at`), to which category, why (`why`, content-free) and `content_hash`, a salted hash of the erased
    before/after/cause; `before`/`after` are null and `cause` is "erased". `hash` chains the entry to the previous
    one (`prev_hash`) over its metadata and content hash, so erasing a payload never breaks the chain."""

    model_config = ConfigDict(frozen=True)

    seq: int
    user: str
    op: Literal["insert", "update", "delete", "pass", "opt_out", "opt_in", "forget"]
    preference_id: Optional[str] = None
    before: Optional[dict[str, Any]] = None
    after: Optional[dict[str, Any]] = None
    cause: str = ""
    at: datetime
    category: Optional[str] = None
    why: str = ""
    content_hash: Optional[str] = None
    prev_hash: Optional[str] = None
    hash: Optional[str] = None


class RecallHit(BaseModel):
    model_config = ConfigDict(frozen=True)

    preference: Preference
    score: float


class IngestResult(BaseModel):
    user: str
    conversation_id: str
    decisions: list[Decision] = []
    blocked: list[Candidate] = Field(default_factory=list, description="Candidates dropped because their category is opted out.")


class UserExport(BaseModel):
    user: str
    exported_at: datetime
    opt_outs: list[str]
    preferences: list[Preference]
    audit: list[AuditEntry]
