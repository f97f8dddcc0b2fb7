"""The typed objects that cross boundmem's boundaries (library API, store, CLI, HTTP)."""
from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import InputError

from .schema.model import CategoryPath


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class InvalidTurn(InputError):
    """A conversation turn (or conversation) built with a bad argument; names it."""


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["user", "assistant"]
    text: str = Field(min_length=1)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:   # a BoundmemError naming the argument, not pydantic's report
            bad = "; ".join(f"argument {'.'.join(map(str, err['loc'])) or 'turn'!r}: {err['msg']}" for err in e.errors())
            raise InvalidTurn(f"invalid turn: {bad}") from None


class Conversation(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    turns: tuple[Turn, ...] = Field(min_length=1)

    def user_sentences(self) -> list[tuple[int, str]]:
        return [(i, t.text) for i, t in enumerate(self.turns) if t.role == "user"]


Polarity = Literal["like", "dislike", "indifferent"]
"""Whether the user wants the value, turns against it, or does not mind it. Data, never a "not X" string: an
assistant must be able to tell "avoid jazz" from "play jazz" without parsing the value."""

Evidence = Literal["stated", "observed"]
"""`stated`: a lasting preference said as such ("I always go for Italian"), stored at once. `observed`: a one-off
choice naming an in-schema value ("play some jazz"), kept as an observation and promoted to a preference only when
repeated in enough distinct conversations or confirmed by the user."""


class Candidate(BaseModel):
    """A preference an extractor found, not yet reconciled with what is stored."""

    model_config = ConfigDict(frozen=True)

    path: CategoryPath
    attribute: str = Field(min_length=1, description="The value, in the user's words (open categories) or a listed "
                           "item their words clearly imply (closed ones); never negated: polarity says that.")
    sentence: str = ""
    confidence: float = 1.0
    cue: str = Field(default="", description="The words that marked the statement as lasting (recorded in the audit cause).")
    polarity: Polarity = "like"
    evidence: Evidence = "stated"
    span: str = Field(default="", description="The user's words the value was read from (the audit cause names it).")


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
    polarity: Polarity = "like"


class Observation(BaseModel):
    """A one-off choice the user made ("play some jazz"): shown to the user, erasable like a preference, never
    recalled as one. Several observations of the same category, value and polarity from distinct conversations
    (or the user's confirmation) promote it to a `Preference`; unconfirmed ones expire after the retention period."""

    model_config = ConfigDict(frozen=True)

    id: str
    user: str
    path: CategoryPath
    attribute: str
    polarity: Polarity = "like"
    sentence: str
    conversation_id: Optional[str] = None
    created_at: datetime


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
    op: Literal["insert", "update", "delete", "pass", "opt_out", "opt_in", "forget", "observe", "promote", "dismiss",
                "episode", "episode_update", "episode_delete", "episode_opt_out", "episode_opt_in"]
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


Term = Literal["short", "long"]
"""An episode's place: `short` while its session is open (not yet reviewed against long-term memory), `long` once
post-thinking merged it into long-term memory (duplicates folded, contradicted thoughts replaced)."""


class Episode(BaseModel):
    """An episodic memory: one inductive thought post-thinking drew from a conversation ("AI recommended the
    restaurant Green Leaf to the user"), filed under tags of the operator's ontology ("Category/Subcategory/attr"),
    dated by the day it happened and traced to the turns it came from. Erasable, exportable and audited like a
    preference; only kept under tags the operator allows and the user did not opt out of."""

    model_config = ConfigDict(frozen=True)

    id: str
    user: str
    text: str
    tags: tuple[str, ...]
    day: date
    term: Term = "long"
    source_turn_ids: tuple[str, ...] = ()
    conversation_id: Optional[str] = None
    created_at: datetime
    updated_at: datetime


class EpisodeHit(BaseModel):
    """An episode recalled for a request, its score and why it ranked (cosine, shared tag, the day the request named)."""

    model_config = ConfigDict(frozen=True)

    episode: Episode
    score: float
    why: str = ""


class EpisodeRecall(BaseModel):
    """What episodic recall decided: `retrieved` False when CAIM's controller found no need for memory (`reason`
    says why either way); `hits` best first."""

    retrieved: bool
    reason: str = ""
    hits: list[EpisodeHit] = Field(default_factory=list)


class MemoryRecall(BaseModel):
    """What helps with one request: preferences (the recall gate) and, where episodic memory is on for the user,
    episodes (CAIM's controller; None where it is off), together at most the caller's k."""

    preferences: list[RecallHit] = Field(default_factory=list)
    episodes: Optional[EpisodeRecall] = None

    @property
    def count(self) -> int:
        return len(self.preferences) + (len(self.episodes.hits) if self.episodes else 0)


class EpisodeResult(BaseModel):
    """What post-thinking did with one conversation (or one session end)."""

    user: str
    conversation_id: str = ""
    day: date
    stored: list[Episode] = Field(default_factory=list, description="Episodes written or revised, in their final state.")
    merged: int = Field(0, description="Thoughts folded into an episode already held (a repetition).")
    replaced: int = Field(0, description="Held episodes a newer, contradicting thought replaced.")
    consolidated: int = Field(0, description="Short-term episodes moved into long-term memory (their session ended).")
    dropped: int = Field(0, description="Thoughts under no tag the operator allows: not kept.")
    blocked: int = Field(0, description="Thoughts under a tag the user opted out of: not kept.")


class RecallHit(BaseModel):
    """A recalled preference: `score` its cosine to the request; with the recall gate on, `relevance` the gate's
    probability that it changes the answer and `why` the rule and features that let it pass."""

    model_config = ConfigDict(frozen=True)

    preference: Preference
    score: float
    relevance: Optional[float] = None
    why: str = ""


class ConsentAction(BaseModel):
    """A consent request said in a conversation and what was done about it: `opt_out` (purged, never stored again)
    or `delete` (what was stored there removed; storing later is allowed). `removed` counts erased preferences;
    `note` says why nothing changed (e.g. already opted out)."""

    kind: Literal["opt_out", "delete"]
    prefix: str
    utterance: str
    removed: int = 0
    note: str = ""


class IngestResult(BaseModel):
    user: str
    conversation_id: str
    decisions: list[Decision] = []
    blocked: list[Candidate] = Field(default_factory=list, description="Candidates dropped because their category is opted out.")
    stored: list[Preference] = Field(default_factory=list, description="The preferences this ingest inserted, appended "
                                     "or updated, as stored (one per id, in its final state).")
    consent: list[ConsentAction] = Field(default_factory=list, description="Consent requests said in the conversation "
                                         "(opt-outs, deletions), applied before extraction; those turns are not extracted.")
    observed: list[Observation] = Field(default_factory=list, description="One-off choices this ingest recorded as "
                                        "observations (not preferences).")
    promoted: list[Preference] = Field(default_factory=list, description="Preferences this ingest created by promoting "
                                       "repeated observations (also listed in `stored`).")
    episodes: Optional[EpisodeResult] = Field(None, description="What episodic memory learned from the conversation "
                                              "(None when episodic memory is off for the user).")


class ConsentRecord(BaseModel):
    """An opt-out in force and how it was given: `utterance` is what the user said when it was given by voice
    (None when it came from a button, the CLI or the API, or after `forget` erased it); `at` is when."""

    prefix: str
    at: Optional[datetime] = None
    utterance: Optional[str] = None
    cause: str = ""


EDITED_BY_USER = "edited by the user"   # the cause `Memory.update` audits: the held value is no longer the sentence's


def edited_preference_ids(audit: list[AuditEntry]) -> set[str]:
    """The preferences whose value the user corrected since it was learned: their latest insert or update entry is
    an edit, so the sentence beside them is what the user said before the correction (a later conversation that
    updates the value again makes the sentence current, and the mark goes)."""
    last: dict[str, str] = {}
    for a in audit:
        if a.preference_id and a.op in ("insert", "update"):
            last[a.preference_id] = a.cause
    return {pid for pid, cause in last.items() if cause == EDITED_BY_USER}


def consent_records(opt_outs: list[str], audit: list[AuditEntry]) -> list[ConsentRecord]:
    """The consent record of each opt-out in force: its latest opt_out entry in the audit log."""
    last: dict[str, AuditEntry] = {}
    for a in audit:
        if a.op == "opt_out":
            last[(a.after or {}).get("prefix") or a.category or ""] = a
    out = []
    for prefix in opt_outs:
        a = last.get(prefix)
        out.append(ConsentRecord(prefix=prefix, at=a.at if a else None,
                                 utterance=(a.after or {}).get("utterance") if a else None, cause=a.cause if a else ""))
    return out


class UserExport(BaseModel):
    user: str
    exported_at: datetime
    opt_outs: list[str]
    preferences: list[Preference]
    audit: list[AuditEntry]
    observations: list[Observation] = Field(default_factory=list, description="One-off choices held as observations.")
    episodes: list[Episode] = Field(default_factory=list, description="Episodic memories (dated thoughts).")
    episode_opt_outs: list[str] = Field(default_factory=list, description="The episodic tags the user opted out of.")
    consents: list[ConsentRecord] = Field(default_factory=list, description="Each opt-out's consent record "
                                          "(derived from the opt-outs and the audit log when not given).")

    @model_validator(mode="after")
    def _consents(self):
        if not self.consents and self.opt_outs:
            self.consents = consent_records(self.opt_outs, self.audit)
        return self
