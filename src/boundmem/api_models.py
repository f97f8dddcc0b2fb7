"""Request and response models of the HTTP API, shared by the server (`service/app.py`) and the clients
(`boundmem.Client`, `AsyncClient`): pydantic only, so a client needs no FastAPI."""
from __future__ import annotations

from datetime import date, datetime
from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

from .models import (AuditEntry, Candidate, ConsentAction, ConsentRecord, Decision, Episode, EpisodeHit, EpisodeResult,
                     Polarity, Turn)
from .schema.model import CategoryPath

class ConversationIn(BaseModel):
    """A conversation to learn from. Only the user's turns are mined for preferences."""

    model_config = ConfigDict(extra="forbid")

    id: Optional[str] = Field(None, min_length=1, max_length=200, description="Your id for the conversation; kept as "
                              "provenance. Left out: one is generated and returned as `conversation_id`.")
    turns: Optional[list[Turn]] = Field(None, min_length=1, max_length=1000, description="`[{role, text}]`; or give "
                                        "`messages` instead.")
    messages: Optional[Union[str, list[dict[str, Any]]]] = Field(
        None, max_length=1000, description="Instead of `turns`: the `[{role, content}]` list an LLM SDK holds (system "
        "and tool messages are ignored), or a string (one user turn).")

    @model_validator(mode="after")
    def _one_shape(self) -> "ConversationIn":
        if (self.turns is None) == (self.messages is None):
            raise ValueError("give exactly one of 'turns' and 'messages'")
        return self
    at: Optional[datetime] = Field(None, description="When the conversation took place: the day of the episodes it "
                                   "yields when episodic memory is on (default today). Preferences are dated when stored.")


class RecallRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    utterance: str = Field(min_length=1, max_length=4000, description="What the user just said.")
    k: Optional[int] = Field(5, ge=1, le=100, description="At most this many preferences; null = dynamic (one "
                             "subcategory's).")
    gate: bool = Field(True, description="Only the preferences that would change the answer (the recall gate; most "
                       "requests get none). false: raw cosine top-k.")
    min_score: Optional[float] = Field(None, ge=-1.0, le=1.0, description="Raw top-k of at least this cosine "
                                       "(instead of the gate).")


class PreferenceOut(BaseModel):
    id: str
    user: str
    path: CategoryPath
    category: str = Field(description="Display labels, 'Main > Sub > Detail'.")
    attribute: str = Field(description="The value, never negated: `polarity` says whether the user wants it.")
    polarity: Polarity = Field("like", description="like, dislike or indifferent (\"don't mind\").")
    label: str = Field("", description="The detail category's display label, e.g. 'Favorite Genres'.")
    display: str = Field("", description="The value as an end user reads it beside `label`: 'Jazz', 'Dislikes: Jazz', "
                         "'Avoids: Highways'.")
    sentence: str = Field(description="The user's sentence the preference was taken from.")
    edited: bool = Field(False, description="The user corrected the value since: `sentence` is what they said before.")
    conversation_id: Optional[str] = None
    created_at: datetime
    updated_at: datetime


class PreferenceList(BaseModel):
    user: str
    preferences: list[PreferenceOut]


class ObservationOut(BaseModel):
    """A one-off choice the user made ("play some jazz"): held apart from preferences, never recalled; confirming
    it makes it a preference, dismissing it erases it. Repeated in enough conversations, it is promoted."""

    id: str
    user: str
    path: CategoryPath
    category: str = Field(description="Display labels, 'Main > Sub > Detail'.")
    attribute: str
    polarity: Polarity = "like"
    label: str = Field("", description="The detail category's display label.")
    display: str = Field("", description="The choice as an end user reads it: 'you chose Jazz', 'you avoided Highways'.")
    sentence: str = Field(description="What the user said.")
    conversation_id: Optional[str] = None
    created_at: datetime


class ObservationList(BaseModel):
    user: str
    observations: list[ObservationOut]


class IngestOut(BaseModel):
    user: str
    conversation_id: str
    decisions: list[Decision]
    blocked: list[Candidate] = Field(description="Candidates dropped because their category is opted out.")
    stored: list[PreferenceOut] = Field(default_factory=list, description="The preferences this conversation inserted, "
                                        "appended or updated, as stored (one per id, in its final state).")
    consent: list[ConsentAction] = Field(default_factory=list, description="Consent said in the conversation and applied.")
    observed: list[ObservationOut] = Field(default_factory=list, description="One-off choices recorded as observations "
                                           "(not preferences; see GET .../observations).")
    promoted: list[PreferenceOut] = Field(default_factory=list, description="Preferences created by promoting a choice "
                                          "repeated in enough conversations (also in `stored`).")
    episodes: Optional[EpisodeResult] = Field(None, description="What episodic memory learned from the conversation "
                                              "(null when it is off for the tenant).")


class RecallHitOut(BaseModel):
    preference: PreferenceOut
    score: float = Field(description="Cosine of the preference to the utterance.")
    relevance: Optional[float] = Field(None, description="With the gate on: its probability that the preference "
                                       "changes the answer.")
    why: str = Field("", description="With the gate on: the rule and features that let it pass.")


class RecallOut(BaseModel):
    user: str
    hits: list[RecallHitOut] = Field(description="Best first; empty when nothing stored would change the answer.")


class OptOutList(BaseModel):
    user: str
    opt_outs: list[str]
    consents: list[ConsentRecord] = Field(default_factory=list, description="Each opt-out's consent record: when, "
                                          "and what the user said if it was given by voice.")


class OptOutOut(BaseModel):
    user: str
    category: str = Field(description="The canonical category prefix opted out.")
    purged: list[PreferenceOut]


class OptInOut(BaseModel):
    user: str
    category: str
    changed: bool = Field(description="False if the user was not opted out of exactly this category.")


class ForgetOut(BaseModel):
    user: str
    erased: int = Field(description="How many preferences were erased.")


class ErrorOut(BaseModel):
    """Every error: `code` (machine-readable; for a limit, the limit's name), `message`, and `limit` when one was hit."""

    detail: Any
    message: str
    code: str
    limit: Optional[dict] = Field(None, description="The limit that was hit: {name, value}.")
    upstream: Optional[str] = Field(None, description="What failed upstream (a 502), e.g. 'the language model endpoint'.")


class TokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # strict: `true` would be a 1 s token and "60" a string taken for a number
    ttl_seconds: Optional[StrictInt] = Field(None, ge=1, description="Lifetime in seconds, a JSON integer (default 15 min; "
                                                                     "at most the server's maximum).")


class TokenOut(BaseModel):
    user: str
    token: str = Field(description="Send as `Authorization: Bearer TOKEN`.")
    expires_at: datetime
    page_url: str = Field(description="The transparency page for this user, the token in the URL fragment.")


class RevokeOut(BaseModel):
    user: str
    revoked: bool


class WhoAmIOut(BaseModel):
    kind: str = Field(description="'tenant' (API key) or 'user' (user token).")
    user: Optional[str] = None
    expires_at: Optional[datetime] = None


class JobOut(BaseModel):
    """An asynchronous ingestion job (`POST .../conversations?async=true`)."""

    id: str
    user: str
    status: str = Field(description="pending, running, done or failed.")
    attempts: int = 0
    result: Optional[dict] = Field(None, description="When done: what was done where (actions, categories, "
                                                     "preference ids), never the user's words.")
    error: Optional[str] = Field(None, description="When failed: the error's type and message.")
    created_at: Optional[datetime] = None
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None
    url: str = Field(description="Where to follow the job.")


class PreferenceEdit(BaseModel):
    """A correction of one stored preference (`PATCH .../preferences/{id}`): its value, its polarity, or both."""

    model_config = ConfigDict(extra="forbid")

    attribute: Optional[str] = Field(None, min_length=1, max_length=200, description="The corrected value; in a "
                                     "closed category one of its listed items.")
    polarity: Optional[Polarity] = Field(None, description="like, dislike or indifferent.")

    @model_validator(mode="after")
    def _something(self):
        if self.attribute is None and self.polarity is None:
            raise ValueError("give 'attribute' and/or 'polarity'")
        return self


class PreferenceHistory(BaseModel):
    """One preference's audit entries, oldest first (erased content is not in them)."""

    user: str
    preference_id: str
    entries: list[AuditEntry]


# --- episodic memory (service/routes/episodes.py) --------------------------------------------------------
class EpisodeIn(ConversationIn):
    """A conversation to post-think into episodes only (no preferences are extracted from it)."""

    end_session: bool = Field(False, description="Review the day's episodes into long-term memory at once (else the "
                              "first conversation of a later day does).")


class EpisodeList(BaseModel):
    user: str
    episodes: list[Episode]


class EpisodeRecallRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    utterance: str = Field(min_length=1, max_length=4000, description="What the user just said.")
    k: int = Field(5, ge=1, le=100, description="At most this many episodes.")
    since: Optional[date] = Field(None, description="Only episodes of this day or later.")
    until: Optional[date] = Field(None, description="Only episodes of this day or earlier.")
    today: Optional[date] = Field(None, description="The day the utterance is said on ('on Tuesday' is read from "
                                  "it); default today (UTC).")
    gate: bool = Field(True, description="Let CAIM's controller decide first whether the utterance needs memory "
                       "at all (false: always rank).")


class EpisodeRecallOut(BaseModel):
    user: str
    retrieved: bool = Field(description="False when the controller decided the utterance needs no memory.")
    reason: str = Field("", description="Why it decided so.")
    hits: list[EpisodeHit]


class EpisodeOptOutList(BaseModel):
    user: str
    opt_outs: list[str] = Field(description="Episodic tags (categories, subcategories, tags) the user opted out of.")


class EpisodeOptOutOut(BaseModel):
    user: str
    tag: str = Field(description="The canonical tag prefix opted out of.")
    purged: list[Episode]


class EpisodeOptInOut(BaseModel):
    user: str
    tag: str
    changed: bool = Field(description="False if the user was not opted out of exactly this tag.")
