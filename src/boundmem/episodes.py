"""Episodic memory beside the preferences: CAIM's post-thinking and retrieval on the main store.

What a preference cannot hold: "what was that restaurant you suggested on Tuesday?" needs what happened, when. CAIM
(src/boundmem/caim) turns a conversation into short inductive thoughts ("AI recommended the restaurant Green Leaf to
the user"), files each under up to three tags of an ontology, dates it, and retrieves by relevance with bonuses for
a shared tag and for the day the question names. Here those parts run on the preference store (store/sql_episodes.py),
so a user's episodes are exported, opted out of, audited and forgotten with the rest of their memory.

- Opt-in: off unless the settings turn it on (BOUNDMEM_EPISODIC), optionally only for some tenants.
- Bounded by the operator's ontology: a thought keeps only the tags the operator allows (BOUNDMEM_EPISODIC_ALLOW);
  one left with none is not stored. The user can opt out per tag (category, subcategory or tag): what is held under
  it is purged, new thoughts under it are refused (by the store itself).
- Sessions are days: a conversation's thoughts are short-term while their day is open (repetitions within it are
  folded together); the first conversation of a later day, or `end_session`, reviews them against long-term memory
  (CAIM's merge: a duplicate is folded into the episode held, a contradiction replaces it) and moves them there.
- Local and offline: CAIM's local thinker (rule-based compression), tagger, merger and controller with the store's
  embedder; nothing calls an LLM. Retrieval is `caim.retrieval.rank` with the knobs CAIM ships for the embedder.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import date
from typing import Optional, Sequence

import numpy as np

from .caim.base import DialogueTurn
from .caim.compress import guard_verbatim
from .caim.controller import GatedController, cutoff_applies
from .caim.dates import parse_date_range
from .caim.models import Thought, ThoughtDraft, fit_thought
from .caim.ontology import Ontology, builtin_ontology, load_ontology
from .caim.postthink import similar_thoughts
from .caim.retrieval import RetrievalParams, rank, tag_similarity
from .caim.system import DEFAULT_TAG_MARGIN, default_params, local_parts
from .config import EpisodicSettings
from .embed.cache import embed_query
from .errors import ConfigError, ConflictError, InputError
from .models import Conversation, Episode, EpisodeHit, EpisodeRecall, EpisodeResult, Term, utcnow
from .store.base import OptedOutError, Store, blocking_rule
from .store.sql_episodes import episode_rule
from .user_id import SEP


_BUILD_LOCK = threading.Lock()


class EpisodicOff(ConflictError):
    """Episodic memory is not enabled for this user (the settings, or the user's tenant); nothing was done."""

    code = "episodic_off"


class UnknownTagError(InputError):
    """A tag, subcategory or category the operator's ontology does not hold."""

    code = "unknown_tag"


def tag_prefix(ontology: Ontology, prefix: str) -> str:
    """The canonical spelling of a category, "Category/Subcategory" or tag of the ontology (matched ignoring case)."""
    parts = [p.strip() for p in str(prefix).strip().strip("/").split("/")]
    if not parts or any(not p for p in parts) or len(parts) > 3:
        raise InputError(f"an episodic tag names a category, Category/Subcategory or Category/Subcategory/attribute, "
                         f"not {prefix!r}")
    for info in ontology.infos():
        full = (info.category, info.subcategory, info.attribute)
        if all(a.lower() == b.lower() for a, b in zip(parts, full)):
            return "/".join(full[: len(parts)])
    raise UnknownTagError(f"{prefix!r} is no category, subcategory or tag of ontology {ontology.name} v{ontology.version}")


def dialogue_turns(conversation: Conversation) -> list[DialogueTurn]:
    """The conversation as CAIM's turns: each user turn with the assistant's reply after it; a turn's id is
    "<conversation id>#<index of the user turn>", what an episode cites as its source."""
    out: list[DialogueTurn] = []
    turns = conversation.turns
    for i, t in enumerate(turns):
        if t.role != "user":
            continue
        reply = []
        for nxt in turns[i + 1:]:
            if nxt.role == "user":
                break
            reply.append(nxt.text)
        out.append(DialogueTurn(id=f"{conversation.id}#{i}", query=t.text, response=" ".join(reply)))
    return out


def _thought(e: Episode) -> Thought:
    return Thought(id=e.id, user=e.user, text=e.text, tags=e.tags, timestamp=e.day, source_turn_ids=e.source_turn_ids,
                   created_at=e.created_at, updated_at=e.updated_at)


def _draft(e: Episode) -> ThoughtDraft:
    return ThoughtDraft(text=e.text, tags=e.tags, timestamp=e.day, source_turn_ids=e.source_turn_ids)


@dataclass
class EpisodePlan:
    """What one conversation will write as episodes (`EpisodicMemory.prepare`), before any of it is written."""

    result: EpisodeResult
    drafts: list[ThoughtDraft]
    vectors: list
    conversation_id: str
    day: date


class EpisodicMemory:
    """Post-thinking into the store's episodes, and their retrieval, for the users `enabled_for` admits."""

    def __init__(self, store: Store, embedder, settings: EpisodicSettings = EpisodicSettings(),
                 ontology: Optional[Ontology] = None, params: Optional[RetrievalParams] = None):
        self.store, self.embedder, self.settings = store, embedder, settings
        self.ontology = ontology or (load_ontology(settings.ontology) if settings.ontology else builtin_ontology())
        try:
            self.allow = tuple(tag_prefix(self.ontology, a) for a in settings.allow)
        except InputError as e:
            raise ConfigError(f"BOUNDMEM_EPISODIC_ALLOW: {e}") from None
        self.params = params or default_params(embedder)
        parts = local_parts(self.ontology, embedder, True, DEFAULT_TAG_MARGIN, self.params)
        self.tagger, self.thinker, self.merger = parts.tagger, parts.thinker, parts.merger
        self.gate = GatedController(parts.controller, near=self.params.near)

    # --- who has it ------------------------------------------------------------------------------------
    def enabled_for(self, user: str) -> bool:
        """On in the settings and, when they name tenants, the user ("tenant:user") is one of theirs."""
        s = self.settings
        if not s.enabled:
            return False
        if s.tenants is None:
            return True
        return SEP in user and user.split(SEP, 1)[0] in s.tenants

    def require(self, user: str) -> None:
        if not self.enabled_for(user):
            who = f"tenant {user.split(SEP, 1)[0]!r}" if SEP in user and self.settings.enabled else "this memory"
            raise EpisodicOff(f"episodic memory is not enabled for {who} (BOUNDMEM_EPISODIC"
                              + (", BOUNDMEM_EPISODIC_TENANTS)" if self.settings.enabled else ")"))

    def allowed_tags(self, tags: Sequence[str]) -> tuple[str, ...]:
        """The tags the operator allows (all of the ontology's when the settings name none)."""
        return tuple(t for t in tags if not self.allow or blocking_rule(list(self.allow), t))

    # --- writing ---------------------------------------------------------------------------------------
    def remember(self, conversation: Conversation, user: str, day: Optional[date] = None,
                 end_session: bool = False) -> EpisodeResult:
        """Post-think one conversation of `day` (default today, UTC) into short-term episodes, in one transaction.
        Short-term episodes of earlier days are first moved into long-term memory (their session ended); with
        `end_session` today's are too."""
        plan = self.prepare(conversation, user, day)
        with self.store.transaction(user) as tx:
            return self.write(tx, plan, end_session)

    def prepare(self, conversation: Conversation, user: str, day: Optional[date] = None) -> "EpisodePlan":
        """Everything of `remember` that writes nothing (post-thinking, tags, opt-outs, vectors), so that `Memory.add`
        can write the episodes in the preferences' own transaction: all of an ingest lands, or none of it."""
        self.require(user)
        day = day or utcnow().date()
        turns = dialogue_turns(conversation)
        result = EpisodeResult(user=user, conversation_id=conversation.id, day=day)
        opted = self.store.episode_opt_outs(user)
        kept: list[ThoughtDraft] = []
        for d in self.thinker.think(turns, day) if turns else []:
            tags = self.allowed_tags(d.tags)
            if not tags:
                result.dropped += 1
            elif episode_rule(opted, tags):
                result.blocked += 1
            elif text := fit_thought(guard_verbatim(d.text, turns)):
                kept.append(ThoughtDraft(text=text, tags=tags, timestamp=d.timestamp, source_turn_ids=d.source_turn_ids))
        vecs = self.embedder.embed([d.text for d in kept]) if kept else []
        return EpisodePlan(result, kept, list(vecs), conversation.id, day)

    def write(self, tx, plan: "EpisodePlan", end_session: bool = False) -> EpisodeResult:
        """Write a prepared plan in the user's open transaction `tx`; its result."""
        result, stored = plan.result, {}
        cause = f"post-thinking of conversation {plan.conversation_id}"
        self._consolidate(tx, plan.day, result, stored)
        for d, v in zip(plan.drafts, plan.vectors):
            try:
                self._add_short(tx, d, v, plan.conversation_id, cause, result, stored)
            except OptedOutError:   # opted out since the check above: the store's rule wins
                result.blocked += 1
        if end_session:
            self._consolidate(tx, None, result, stored)
        result.stored = list(stored.values())
        return result

    def end_session(self, user: str) -> EpisodeResult:
        """Move every short-term episode of the user into long-term memory now."""
        self.require(user)
        result = EpisodeResult(user=user, day=utcnow().date())
        stored: dict[str, Episode] = {}
        with self.store.transaction(user) as tx:
            self._consolidate(tx, None, result, stored)
        result.stored = list(stored.values())
        return result

    def _add_short(self, tx, d: ThoughtDraft, vec, conversation_id: str, cause: str, result: EpisodeResult,
                   stored: dict[str, Episode]) -> None:
        """A new thought of the open session, folded into one of the session's own when it repeats it."""
        same_day = [_thought(e) for e in tx.episodes("short") if e.day == d.timestamp]
        dec = self.merger.decide(d, similar_thoughts(d, same_day))
        if dec.action == "duplicate":
            stored[dec.target] = _fold(tx, dec.target, d.source_turn_ids, d.tags, None, cause, "seen again in the session")
            result.merged += 1
            return
        if dec.action == "contradiction":
            stored.pop(dec.target, None)
            tx.delete_episode(dec.target, cause, why="replaced by a newer thought of the session")
            result.replaced += 1
        e = tx.add_episode(d.text, d.tags, d.timestamp, vec, cause, term="short", sources=d.source_turn_ids,
                           conversation_id=conversation_id)
        stored[e.id] = e

    def _consolidate(self, tx, before: Optional[date], result: EpisodeResult, stored: dict[str, Episode]) -> None:
        """Review the short-term episodes (of days before `before`, or all) against long-term memory, oldest first:
        a duplicate is folded into the long-term episode (sources and tags joined, the earlier day kept), a
        contradiction replaces the long-term one, anything else moves into long-term memory as it is."""
        cause = "session ended: post-thinking review"
        for s in [e for e in tx.episodes("short") if before is None or e.day < before]:
            longs = [_thought(e) for e in tx.episodes("long")]
            draft = _draft(s)
            dec = self.merger.decide(draft, similar_thoughts(draft, longs))
            result.consolidated += 1
            if dec.action == "duplicate":
                stored[dec.target] = _fold(tx, dec.target, s.source_turn_ids, s.tags, s.day, cause,
                                           "seen again in a later session")
                stored.pop(s.id, None)
                tx.delete_episode(s.id, cause, why="folded into a long-term episode")
                result.merged += 1
                continue
            if dec.action == "contradiction":
                stored.pop(dec.target, None)
                tx.delete_episode(dec.target, cause, why="replaced by a newer, contradicting episode")
                result.replaced += 1
            stored[s.id] = tx.revise_episode(s.id, cause, "moved into long-term memory", term="long")

    # --- reading ---------------------------------------------------------------------------------------
    def search(self, utterance: str, user: str, k: int = 5, since: Optional[date] = None,
               until: Optional[date] = None, today: Optional[date] = None, gate: bool = True,
               cutoff: Optional[bool] = None) -> EpisodeRecall:
        """CAIM's retrieval over the user's episodes of days since..until: dense cosine, a bonus for a tag shared
        with the request and for the day it names ("on Tuesday", relative to `today`), and CAIM's relevance cutoff
        where `caim.controller.cutoff_applies` says so (not for requests for advice or a task, whose relevant memories
        are worded unlike them, nor for recall questions, which say the answer is in memory). With `gate`, CAIM's
        controller first decides whether the request needs memory at all (small talk and unrelated requests do
        not); `retrieved` says what it decided. `cutoff`: True keeps only what clears the relevance cutoff whatever
        the request (the joint decision's, `retrieve/joint.py`); None: CAIM's rule."""
        self.require(user)
        if k is not None and k <= 0:
            raise InputError(f"k must be at least 1, not {k}")
        today = today or utcnow().date()
        eps, mat = self.store.episode_vectors(user, since, until)
        cos = (mat @ embed_query(self.embedder, utterance)) if eps else np.zeros(0, np.float32)
        if gate:
            ok, reason = self.gate.decide(utterance, (), today, float(cos.max()) if len(cos) else None)
            if not ok:
                return EpisodeRecall(retrieved=False, reason=reason)
        else:
            reason = "gate off"
        if not eps:
            return EpisodeRecall(retrieved=True, reason=reason)
        when = parse_date_range(utterance, today)
        in_range = np.array([1.0 if when is not None and e.day in when else 0.0 for e in eps], np.float32)
        qtags = self.tagger.tags(utterance, 3)
        tag_sim = np.array([tag_similarity(qtags, e.tags) for e in eps], np.float32) if qtags \
            else np.zeros(len(eps), np.float32)
        use_filter = cutoff if cutoff is not None else cutoff_applies(utterance, today)
        top = rank(cos, tag_sim, in_range, self.params, k, use_filter=use_filter)
        hits = [EpisodeHit(episode=eps[i], score=round(s, 4), why=_why(float(cos[i]), qtags, eps[i], when, in_range[i]))
                for i, s in top]
        return EpisodeRecall(retrieved=True, reason=reason, hits=hits)

    # --- the user's control ----------------------------------------------------------------------------
    def opt_out(self, user: str, tag: str) -> list[Episode]:
        prefix = tag_prefix(self.ontology, tag)
        return self.store.episode_opt_out(user, prefix, cause=f"user opted out of episodes under {prefix}")

    def opt_in(self, user: str, tag: str) -> bool:
        prefix = tag_prefix(self.ontology, tag)
        return self.store.episode_opt_in(user, prefix, cause=f"user opted back in to episodes under {prefix}")


def _fold(tx, target: str, sources: Sequence[str], tags: Sequence[str], day: Optional[date], cause: str,
          why: str) -> Episode:
    """A repeated thought folded into the episode held: its sources and tags joined (at most three), the earlier
    of the two days kept when `day` is given."""
    old = tx.episode(target)
    return tx.revise_episode(old.id, cause, why, sources=(*old.source_turn_ids, *sources),
                             tags=tuple(dict.fromkeys((*old.tags, *tags)))[:3],
                             day=None if day is None else min(old.day, day))


def _why(cos: float, qtags: Sequence[str], e: Episode, when, in_range: float) -> str:
    parts = [f"cosine {cos:.2f}"]
    shared = [t for t in e.tags if any(t.split("/")[:2] == q.split("/")[:2] for q in qtags)]
    if shared:
        parts.append(f"tag {shared[0]}")
    if in_range:
        parts.append(f"on {e.day.isoformat()}, the day {when.phrase!r} names")
    return "; ".join(parts)


class EpisodicAccess:
    """What `Memory` offers of episodic memory (Memory inherits it; it provides `store`, `embedder` and the
    `episodic` settings). Listing, deleting and opting out work whether or not episodic memory is on: a user always
    sees and controls what is held."""

    store: Store
    embedder: object
    episodic: EpisodicSettings
    _episodic_memory: Optional[EpisodicMemory] = None

    @property
    def episodic_memory(self) -> EpisodicMemory:
        if self._episodic_memory is None:
            with _BUILD_LOCK:   # concurrent first callers build CAIM's parts once
                if self._episodic_memory is None:
                    self._episodic_memory = EpisodicMemory(self.store, self.embedder, self.episodic)
        return self._episodic_memory

    def episodic_on(self, user: str) -> bool:
        """Whether episodic memory is enabled for this user (the settings and the user's tenant)."""
        return self.episodic.enabled and self.episodic_memory.enabled_for(user)

    def remember_episode(self, conversation, user: str, day: Optional[date] = None, end_session: bool = False, *,
                         conversation_id: Optional[str] = None) -> EpisodeResult:
        """Post-think a conversation (what `add` accepts) into episodes of `day`; EpisodicOff when it is not enabled
        for the user."""
        from .messages import to_conversation

        return self.episodic_memory.remember(to_conversation(conversation, conversation_id), user, day, end_session)

    def end_episode_session(self, user: str) -> EpisodeResult:
        return self.episodic_memory.end_session(user)

    def episodes(self, user: str, since: Optional[date] = None, until: Optional[date] = None,
                 term: Optional[Term] = None) -> list[Episode]:
        return self.store.episodes(user, since, until, term)

    def recall_episodes(self, utterance: str, user: str, k: int = 5, since: Optional[date] = None,
                        until: Optional[date] = None, today: Optional[date] = None,
                        gate: bool = True) -> list[EpisodeHit]:
        """The episodes that help answer `utterance`, best first (see `EpisodicMemory.search`)."""
        return self.episodic_memory.search(utterance, user, k, since, until, today, gate).hits

    def joint_episodes(self, utterance: str, user: str, k: Optional[int], preferences_found: bool, *, gate: bool = True,
                       today: Optional[date] = None) -> Optional[EpisodeRecall]:
        """The episodes beside a preference recall, by the same reading of the request (`retrieve/joint.py`); None
        when episodic memory is off for the user."""
        from .retrieve.joint import episode_decision

        if not self.episodic_on(user):
            return None
        if not gate:
            return self.episodic_memory.search(utterance, user, k, today=today, gate=False)
        d = episode_decision(utterance, preferences_found)
        if not d.recall:
            return EpisodeRecall(retrieved=False, reason=d.reason)
        r = self.episodic_memory.search(utterance, user, k, today=today, cutoff=d.cutoff)
        return r.model_copy(update={"reason": f"{d.reason}; {r.reason}"}) if r.retrieved else r

    def delete_episode(self, user: str, episode_id: str) -> Episode:
        return self.store.delete_episode(user, episode_id, cause="deleted by user")

    def episode_opt_outs(self, user: str) -> list[str]:
        return self.store.episode_opt_outs(user)

    def episode_opt_out(self, user: str, tag: str) -> list[Episode]:
        """Stop keeping episodes under a category, subcategory or tag of the ontology and purge those held."""
        return self.episodic_memory.opt_out(user, tag)

    def episode_opt_in(self, user: str, tag: str) -> bool:
        return self.episodic_memory.opt_in(user, tag)

    def _remember_after_ingest(self, conversation: Conversation, user: str, result, day: Optional[date]):
        """`add`'s episodic half: when it is on for the user, the conversation's episodes (`result.episodes`)."""
        if self.episodic_on(user):
            result.episodes = self.episodic_memory.remember(conversation, user, day)
        return result
