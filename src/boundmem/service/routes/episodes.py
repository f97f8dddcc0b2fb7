"""Episodic memory: the dated thoughts post-thinking drew from a user's conversations (opt-in per tenant,
BOUNDMEM_EPISODIC_TENANTS). List them, recall the ones that help with an utterance (CAIM's controller first), learn
from a conversation, end the day's session, delete one, and opt out of a tag (purging what is held under it).

Listing, deleting and the opt-outs work whether or not episodic memory is on for the tenant: a user always sees and
controls what is held. Learning and recall answer 409 `episodic_off` where it is off.

No `from __future__ import annotations`: FastAPI resolves the Annotated aliases at runtime."""

from datetime import date
from typing import Annotated, Literal, Optional

from fastapi import APIRouter, Path, Query

from ...api_models import (EpisodeIn, EpisodeList, EpisodeOptInOut, EpisodeOptOutList, EpisodeOptOutOut,
                           EpisodeRecallOut, EpisodeRecallRequest)
from ...episodes import tag_prefix
from ...messages import to_conversation
from ...models import Episode, EpisodeHit, EpisodeResult
from ..deps import Limits, Mem, Subj, Subject
from ..error_handlers import NOT_FOUND

router = APIRouter(tags=["episodes"])
EpisodeId = Annotated[str, Path(max_length=100)]
Tag = Annotated[str, Path(max_length=300, description="A category, Category/Subcategory or tag of the ontology.")]


def _own(e: Episode, s: Subject) -> Episode:
    """An episode as the caller sees it: the caller's user id, never the store's namespaced one."""
    return e.model_copy(update={"user": s.user})


def episode_result(r: EpisodeResult, s: Subject) -> EpisodeResult:
    return r.model_copy(update={"user": s.user, "stored": [_own(e, s) for e in r.stored]})


@router.get("/v1/users/{user}/episodes", response_model=EpisodeList)
def list_episodes(s: Subj, mem: Mem,
                  since: Annotated[Optional[date], Query(description="Only of this day or later.")] = None,
                  until: Annotated[Optional[date], Query(description="Only of this day or earlier.")] = None,
                  term: Annotated[Optional[Literal["short", "long"]], Query(description="Short- or long-term only.")] = None
                  ) -> EpisodeList:
    """Every episode held about the user (oldest day first), with its tags, day and the turns it came from."""
    return EpisodeList(user=s.user, episodes=[_own(e, s) for e in mem.episodes(s.ns, since, until, term)])


@router.post("/v1/users/{user}/episodes", response_model=EpisodeResult)
def remember(body: EpisodeIn, s: Subj, mem: Mem, limits: Limits) -> EpisodeResult:
    """Post-think a conversation into episodes only (no preferences; `POST .../conversations` does both). Over a
    content limit: 413; episodic memory off for the tenant: 409 `episodic_off`."""
    conv = to_conversation(body.turns if body.turns is not None else body.messages, body.id)
    limits.check_turns(t.text for t in conv.turns)
    r = mem.remember_episode(conv, s.ns, day=body.at.date() if body.at else None, end_session=body.end_session)
    return episode_result(r, s)


@router.post("/v1/users/{user}/episodes/end-session", response_model=EpisodeResult)
def end_session(s: Subj, mem: Mem) -> EpisodeResult:
    """Review the user's short-term episodes into long-term memory now (duplicates folded, contradictions replaced)."""
    return episode_result(mem.end_episode_session(s.ns), s)


@router.post("/v1/users/{user}/episodes/recall", response_model=EpisodeRecallOut)
def recall_episodes(body: EpisodeRecallRequest, s: Subj, mem: Mem, limits: Limits) -> EpisodeRecallOut:
    """The episodes that help answer the utterance, best first, each with its score and why it ranked ("what was
    that restaurant you suggested on Tuesday?" ranks that Tuesday's first). With `gate` (the default) CAIM's
    controller first decides whether memory is needed; `retrieved` false and no hits when it is not."""
    limits.check_utterance(body.utterance)
    r = mem.episodic_memory.search(body.utterance, s.ns, body.k, body.since, body.until, body.today, body.gate)
    return EpisodeRecallOut(user=s.user, retrieved=r.retrieved, reason=r.reason,
                            hits=[EpisodeHit(episode=_own(h.episode, s), score=h.score, why=h.why) for h in r.hits])


@router.delete("/v1/users/{user}/episodes/{episode_id}", response_model=Episode, responses=NOT_FOUND)
def delete_episode(episode_id: EpisodeId, s: Subj, mem: Mem) -> Episode:
    """Delete one episode (erased, its audit entries keep no content); answers what was deleted. Unknown id: 404."""
    return _own(mem.delete_episode(s.ns, episode_id), s)


@router.get("/v1/users/{user}/episode-opt-outs", response_model=EpisodeOptOutList)
def list_episode_opt_outs(s: Subj, mem: Mem) -> EpisodeOptOutList:
    return EpisodeOptOutList(user=s.user, opt_outs=mem.episode_opt_outs(s.ns))


@router.put("/v1/users/{user}/episode-opt-outs/{tag:path}", response_model=EpisodeOptOutOut)
def episode_opt_out(tag: Tag, s: Subj, mem: Mem) -> EpisodeOptOutOut:
    """Stop keeping episodes under a category, subcategory or tag, and purge those held. An unknown tag: 422."""
    prefix = tag_prefix(mem.episodic_memory.ontology, tag)
    return EpisodeOptOutOut(user=s.user, tag=prefix, purged=[_own(e, s) for e in mem.episode_opt_out(s.ns, prefix)])


@router.delete("/v1/users/{user}/episode-opt-outs/{tag:path}", response_model=EpisodeOptInOut)
def episode_opt_in(tag: Tag, s: Subj, mem: Mem) -> EpisodeOptInOut:
    """Keep episodes under this tag again (only removes an opt-out of exactly it)."""
    prefix = tag_prefix(mem.episodic_memory.ontology, tag)
    return EpisodeOptInOut(user=s.user, tag=prefix, changed=mem.episode_opt_in(s.ns, prefix))
