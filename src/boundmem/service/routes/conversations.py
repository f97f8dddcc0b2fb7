"""Memory: learn from a conversation (at once, or queued as a job), recall what is relevant to an utterance.

No `from __future__ import annotations`: FastAPI resolves the Annotated aliases at runtime."""

from typing import Annotated

from fastapi import APIRouter, Query

from ...api_models import ConversationIn, ErrorOut, IngestOut, JobOut, RecallHitOut, RecallOut, RecallRequest
from ...messages import to_conversation
from .. import jobs_api
from ..deps import Limits, Mem, Subj
from .episodes import episode_result
from .observations import observation_out
from .preferences import preference_out

router = APIRouter(tags=["memory"])


@router.post("/v1/users/{user}/conversations", response_model=IngestOut,
             responses={502: {"model": ErrorOut}, 202: {"model": JobOut}})
def add_conversation(body: ConversationIn, s: Subj, mem: Mem, limits: Limits,
                     run_async: Annotated[bool, Query(alias="async", description=(
                         "Answer 202 with a job at once; a worker applies it (durable, in order per user). "
                         "Follow it at GET /v1/users/{user}/jobs/{id}."))] = False) -> IngestOut:
    """Extract preferences from a conversation and store them (all of them or none); one-off choices are kept as
    observations (`observed`), and one repeated in enough conversations becomes a preference (`promoted`). Where
    episodic memory is on for the tenant, the conversation is also post-thought into episodes of the day `at`
    names (`episodes`). Over a
    content limit (`max_turns`, `max_turn_chars`, `max_total_chars`): 413 naming it, nothing read or stored. The
    extractor's model or the embedding endpoint failing: 502 naming which, nothing stored."""
    conv = to_conversation(body.turns if body.turns is not None else body.messages, body.id)
    limits.check_turns(t.text for t in conv.turns)
    if run_async:
        return jobs_api.accepted(mem, s.user, s.ns, conv)
    r = mem.add(conv, s.ns, day=body.at.date() if body.at else None)
    return IngestOut(user=s.user, conversation_id=r.conversation_id, decisions=r.decisions, blocked=r.blocked,
                     stored=[preference_out(mem, p, s.user) for p in r.stored], consent=r.consent,
                     observed=[observation_out(mem, o, s.user) for o in r.observed],
                     promoted=[preference_out(mem, p, s.user) for p in r.promoted],
                     episodes=episode_result(r.episodes, s) if r.episodes else None)


@router.post("/v1/users/{user}/recall", response_model=RecallOut)
async def recall(body: RecallRequest, s: Subj, mem: Mem, limits: Limits) -> RecallOut:
    """The stored preferences that would change the answer to what the user just said (the recall gate: most
    requests get none); `gate: false` or `min_score`: raw cosine top-k."""
    # on the event loop, no thread hop: a recall is one forward pass and a search, and each hop to the thread pool and
    # back costs two thread wake-ups, which on a busy machine wait for a core. Concurrent recalls take turns on one
    # process's loop; `serve --workers N` runs N processes on the port, so every core serves (cli/workers.py).
    limits.check_utterance(body.utterance)
    hits = mem.recall(body.utterance, s.ns, body.k, gate=body.gate, min_score=body.min_score)
    return RecallOut(user=s.user, hits=[RecallHitOut(preference=preference_out(mem, h.preference, s.user), score=h.score,
                                                     relevance=h.relevance, why=h.why) for h in hits])
