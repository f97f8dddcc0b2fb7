"""CAIM's own records: inductive thoughts in long-term memory and the drafts post-thinking proposes."""
from __future__ import annotations

import re
from datetime import date, datetime, timezone
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

TURN_ID = re.compile(r"^(\d{4}-\d{2}-\d{2})#(\d+)$")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def turn_id(day: date, index: int) -> str:
    """GVD evidence ids: "<ISO date>#<0-based index into that day's turns>"."""
    return f"{day.isoformat()}#{index}"


def turn_day(tid: str) -> Optional[date]:
    m = TURN_ID.match(tid)
    return date.fromisoformat(m.group(1)) if m else None


THOUGHT_CHARS = 400   # the longest thought a store keeps (ThoughtDraft.text)


def fit_thought(text: str, limit: int = THOUGHT_CHARS) -> str:
    """`text` as a thought may hold it: whitespace folded, cut at the last word boundary within `limit` characters
    (mid-word only for a single word longer than that), never over. Post-thinking cuts rather than crashes: a turn
    of 4,000 characters (or zalgo text, or one endless word) becomes a thought of at most `limit`."""
    t = " ".join(str(text).split())
    if len(t) <= limit:
        return t
    cut = t[:limit + 1].rsplit(" ", 1)[0] if " " in t[:limit + 1] else ""
    return (cut if cut and len(cut) <= limit else t[:limit]).rstrip()


class ThoughtDraft(BaseModel):
    """A thought post-thinking proposes, before it is merged into long-term memory."""

    model_config = ConfigDict(frozen=True)

    text: str = Field(min_length=1, max_length=400)
    tags: tuple[str, ...] = Field(default=(), max_length=3)
    timestamp: date
    source_turn_ids: tuple[str, ...] = ()

    @field_validator("text")
    @classmethod
    def _strip(cls, v: str) -> str:
        v = " ".join(v.split())
        if not v:
            raise ValueError("thought text is empty")
        return v


class Thought(ThoughtDraft):
    id: str
    user: str
    created_at: datetime
    updated_at: datetime

    def days(self) -> set[date]:
        """Every day this thought speaks for: its timestamp and the days of its sources."""
        out = {self.timestamp}
        out.update(d for d in (turn_day(t) for t in self.source_turn_ids) if d)
        return out


class MergeDecision(BaseModel):
    """What to do with a new thought given similar stored ones.

    new: insert it; duplicate: fold it into `target` (sources unioned, `text` may restate both);
    contradiction: it supersedes `target` (newer wins; the old thought is deleted).
    """

    action: Literal["new", "duplicate", "contradiction"]
    target: Optional[str] = None
    text: Optional[str] = None
