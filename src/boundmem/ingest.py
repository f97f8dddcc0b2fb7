"""One ingest as one transaction: consent, extraction, post-thinking, maintenance and storage of a conversation.

Why its own module: `Memory` is the facade a caller sees (reading, user control, jobs); what happens between a
conversation arriving and its decisions being committed is one job with its own rules (all or nothing, a CPU budget,
deciding before taking the write lock, observations promoted by repetition), kept here so it can be read whole."""
from __future__ import annotations

import logging
import time
from datetime import date, datetime, timedelta
from typing import Any, Callable, Optional, Protocol, Sequence

from .episodes import EpisodicMemory
from .errors import BoundmemError, LimitError
from .extract.base import Extractor
from .maintain.base import Maintainer, enforce_multiplicity
from .models import (Candidate, ConsentAction, Conversation, Decision, IngestResult, Observation, Preference,
                     utcnow)
from .embed.cache import CachingEmbedder
from .messages import ConversationInput, to_conversation
from .retrieve.text import enriched_text
from .schema.model import CategoryPath, Schema
from .store.base import OptedOutError, Store, blocking_rule, is_store_busy, normalise_value
from .store.schema_record import bind_schema
from .user_id import check_store_user_id

log = logging.getLogger("boundmem.ingest")


class IngestFailed(BoundmemError):
    """An ingest failed on something that is not the caller's or the store's fault (a bug); it was rolled back
    whole: no preference, observation, episode, audit entry or job state of it was kept."""

    code = "ingest_failed"


class IngestTooLong(LimitError):
    """An ingest ran past `max_ingest_seconds` of CPU time; stopped before anything was written."""

    code = "max_ingest_seconds"
    name = "max_ingest_seconds"
    status = 413


class Deadline:
    """The CPU time one ingest may take (process CPU time of this thread), checked between its stages: a turn that
    would burn seconds in extraction or post-thinking is refused before anything is written, naming the limit."""

    def __init__(self, seconds: Optional[float]):
        self.seconds, self.start = seconds, time.thread_time()

    def check(self, stage: str) -> None:
        if self.seconds is None:
            return
        spent = time.thread_time() - self.start
        if spent > self.seconds:
            raise IngestTooLong(f"the ingest took more than max_ingest_seconds={self.seconds:g} s of CPU time "
                                f"({spent:.1f} s by the end of {stage}); nothing was stored: send shorter turns")


class IngestParts(Protocol):
    """What an ingest reads from its Memory, at the time it runs (a caller may swap a stage between ingests)."""

    schema: Schema
    store: Store
    extractor: Extractor
    maintainer: Maintainer
    embedder: CachingEmbedder
    consent: Any
    promote_after: int
    observation_days: float
    max_ingest_seconds: Optional[float]

    @property
    def episodic_memory(self) -> EpisodicMemory: ...

    def episodic_on(self, user: str) -> bool: ...

    def user_schema(self, user: str) -> Schema: ...


class Ingest:
    """The write path of one Memory: `add` (a conversation) and `apply` (already-extracted candidates)."""

    def __init__(self, parts: IngestParts):
        self.parts = parts
        self._schema_bound = False

    def add(self, conversation: ConversationInput, user: str,
            then: Optional[Callable[[Any, IngestResult], None]] = None, *, conversation_id: Optional[str] = None,
            day: Optional[date] = None) -> IngestResult:
        """`Memory.add`: the conversation ingested in one transaction, or an error and nothing kept."""
        conversation = to_conversation(conversation, conversation_id)
        user = check_store_user_id(user, "user")
        try:
            # consent, extraction, maintenance, storage: one vector per distinct text
            with self.parts.embedder.ingest():
                return self._add(conversation, user, then, day)
        except BoundmemError:
            raise
        except Exception as e:   # one transaction was open at most, and it rolled back: nothing of this ingest is kept
            if is_store_busy(e):   # the same call may succeed later (the job queue retries it)
                raise
            log.exception("ingest of conversation %s failed", conversation.id)
            raise IngestFailed(f"the ingest of conversation {conversation.id!r} failed and nothing of it was stored "
                               f"({type(e).__name__}); the server log has the details") from e

    def _add(self, conversation: Conversation, user: str, then, day: Optional[date]) -> IngestResult:
        deadline = Deadline(self.parts.max_ingest_seconds)
        opted = self.parts.store.opt_outs(user)
        schema = self.parts.schema.prune(opted)
        requests = self.parts.consent.detect(conversation, self.parts.schema) if self.parts.consent else []
        if requests:
            schema = self.parts.schema.prune([*opted, *(r.prefix for r in requests if r.kind == "opt_out")])
            said = {r.turn for r in requests}
            rest = tuple(t for i, t in enumerate(conversation.turns) if i not in said)
            conversation = conversation.model_copy(update={"turns": rest})
        deadline.check("consent detection")
        has_user_turns = any(t.role == "user" for t in conversation.turns)
        candidates = (self.parts.extractor.extract(conversation, schema).candidates
                      if has_user_turns and schema.mains else [])
        deadline.check("extraction")
        # the episodic half is thought out before anything is written, and written in the preferences' transaction
        plan = self.parts.episodic_memory.prepare(conversation, user, day) if self.parts.episodic_on(user) else None
        deadline.check("post-thinking")
        written: list[bool] = []

        def write_all(tx, result: IngestResult) -> None:
            if plan is not None:
                result.episodes = self.parts.episodic_memory.write(tx, plan)
            written.append(True)
            if then is not None:
                then(tx, result)

        result = self.apply(candidates, user, conversation.id, schema, then=write_all, consent=requests)
        if plan is not None and not written:   # no preference to write: the episodes' own transaction
            with self.parts.store.transaction(user) as tx:
                write_all(tx, result)
        return result

    def bind_schema(self) -> None:
        """The first write records the schema in the store (or finds that another writer recorded another one)."""
        if not self._schema_bound:
            bind_schema(self.parts.store, self.parts.schema)
            self._schema_bound = True

    def apply(self, candidates: list[Candidate], user: str, conversation_id: Optional[str],
              schema: Optional[Schema] = None, then: Optional[Callable[[Any, IngestResult], None]] = None,
              consent: Sequence[Any] = ()) -> IngestResult:
        """`Memory.apply`: maintained and stored in one transaction (see there)."""
        with self.parts.embedder.ingest():
            return self._apply(candidates, user, conversation_id, schema or self.parts.user_schema(user), then, consent)

    def _apply(self, candidates: list[Candidate], user: str, conversation_id: Optional[str], schema: Schema,
               then: Optional[Callable[[Any, IngestResult], None]], consent: Sequence[Any]) -> IngestResult:
        result = IngestResult(user=user, conversation_id=conversation_id or "")
        allowed: list[tuple[Candidate, object]] = []
        for c in candidates:
            if schema.allows(c.path):
                allowed.append((c, schema.resolve(c.path)))
            else:
                result.blocked.append(c)
        if not allowed and not consent:
            return result
        self.bind_schema()
        vecs = self.parts.embedder.embed([ingest_text(ref, c) for c, ref in allowed]) if allowed else []
        vec_of = {c: v for (c, _), v in zip(allowed, vecs)}
        observed = [(c, ref) for c, ref in allowed if c.evidence == "observed"]
        allowed = [(c, ref) for c, ref in allowed if c.evidence != "observed"]
        cause_base = f"conversation {conversation_id}" if conversation_id else "direct"
        # Decide before taking the write lock: an LLM maintainer may take seconds, and holding the
        # store's write transaction that long would stall every other writer.
        decisions, seen = self._plan(allowed, lambda path: self.parts.store.preferences(user, str(path)), user,
                                     conversation_id)
        self._embed_rewrites(allowed, decisions, vec_of)
        with self.parts.store.transaction(user) as tx:
            result.consent = [_apply_consent(tx, r, cause_base) for r in consent]
            if any(_signature(tx.preferences(CategoryPath.model_validate_json(k))) != sig for k, sig in seen.items()):
                # someone wrote to these categories meanwhile: decide again, now under the lock
                decisions, _ = self._plan(allowed, tx.preferences, user, conversation_id)
                self._embed_rewrites(allowed, decisions, vec_of)
            self.expire(tx)
            real_ids: dict[str, str] = {}
            stored: dict[str, Preference] = {}
            for (c, ref), d in zip(allowed, decisions):
                if d.target in real_ids:
                    d = d.model_copy(update={"target": real_ids[d.target]})
                pending = d.target or ""
                try:
                    d = self._write(tx, c, d, vec_of[d.candidate], conversation_id, cause_base, stored)
                except OptedOutError:
                    # opted out between pruning and writing: the store's rule wins
                    result.blocked.append(c)
                    continue
                if d.action in ("insert", "append"):
                    real_ids[pending] = d.target
                result.decisions.append(d)
            for c, ref in observed:
                try:
                    self._observe(tx, c, ref, vec_of[c], conversation_id, cause_base, stored, result)
                except OptedOutError:
                    result.blocked.append(c)
            result.stored = list(stored.values())
            if then is not None:
                then(tx, result)
        return result

    def _write(self, tx, c: Candidate, d: Decision, vec, conversation_id: Optional[str], cause_base: str,
               stored: dict[str, Preference], why: str = "") -> Decision:
        """Carry out one maintenance decision in the transaction (audited with its cause); returns it with the real
        id of what it wrote as target."""
        new = d.candidate
        cause = f"{d.action} from {cause_base}: {why or d.reason}".strip()
        notes = [f"lasting: {c.cue!r}"] if c.cue else []
        if c.span:
            notes.append(f"value from {c.span!r}")
        if notes and d.action != "pass":
            cause += f" ({'; '.join(notes)})"
        if d.action in ("insert", "append"):
            p = tx.insert(c.path, new.attribute, new.sentence, vec, conversation_id, cause, polarity=new.polarity)
            stored[p.id] = p
            return d.model_copy(update={"target": p.id})
        if d.action == "update":
            stored[d.target] = tx.replace(d.target, new.attribute, new.sentence, vec, conversation_id, cause,
                                          polarity=new.polarity)
        else:
            tx.note("pass", cause, d.target, {"attribute": c.attribute, "polarity": c.polarity, "sentence": c.sentence})
        return d

    def _observe(self, tx, c: Candidate, ref, vec, conversation_id: Optional[str], cause_base: str,
                 stored: dict[str, Preference], result: IngestResult) -> None:
        """Keep a one-off choice as an observation (unless a stated preference already says the same) and promote
        it when it has now been observed in enough distinct conversations."""
        key = normalise_value(c.attribute)
        if any(normalise_value(p.attribute) == key and p.polarity == c.polarity for p in tx.preferences(c.path)):
            return
        o = tx.observe(c.path, c.attribute, c.polarity, c.sentence, conversation_id, f"observed in {cause_base}")
        result.observed.append(o)
        support = tx.matching_observations(c.path, c.attribute, c.polarity)
        conversations = sorted({x.conversation_id for x in support if x.conversation_id})
        if len(conversations) >= self.parts.promote_after:
            p = self.promote(tx, support, ref, vec, conversation_id, cause_base, stored,
                              f"promoted: observed in {len(conversations)} distinct conversations "
                              f"({', '.join(conversations)})")
            result.promoted.append(p)
            result.observed = [x for x in result.observed if x.id not in {s.id for s in support}]

    def promote(self, tx, support: list, ref, vec, conversation_id: Optional[str], cause_base: str,
                 stored: dict[str, Preference], why: str) -> Preference:
        """Maintain the observed choice as a stated candidate (pass / update / append and the single-preference
        rule apply as for anything said), record a "promote" entry naming what it rests on, and remove the
        promoted observations (their audit payloads erased: the preference now holds what they said)."""
        last = support[-1]
        cand = Candidate(path=last.path, attribute=last.attribute, sentence=last.sentence, polarity=last.polarity,
                         evidence="stated", span=last.attribute)
        existing = tx.preferences(last.path)
        d = self._decide(cand, existing, ref.detail)
        if d.candidate != cand:  # the maintainer rewrote it: embed what is stored
            vec = self.parts.embedder.embed([ingest_text(ref, d.candidate)])[0]
        d = self._write(tx, cand, d, vec, conversation_id, cause_base, stored, why=f"{why}; {d.reason}")
        for o in support:
            tx.remove_observation(o.id, None, "", "")
        conversations = sorted({o.conversation_id for o in support if o.conversation_id})
        tx.note("promote", why, d.target, {"attribute": cand.attribute, "polarity": cand.polarity,
                                           "observations": [o.id for o in support], "conversations": conversations})
        return stored.get(d.target) or next(p for p in tx.preferences(last.path) if p.id == d.target)

    def expire(self, tx, now: Optional[datetime] = None) -> list[Observation]:
        cutoff = (now or utcnow()) - timedelta(days=self.parts.observation_days)
        return tx.expire_observations(cutoff, "retention period ended",
                                      f"expired: unconfirmed for {self.parts.observation_days:g} days")

    def _embed_rewrites(self, allowed, decisions: list[Decision], vec_of: dict) -> None:
        """Embeddings for candidates the maintainer rewrote (another polarity, the stored wording), in one batch."""
        todo = [(d.candidate, ref) for (_, ref), d in zip(allowed, decisions) if d.candidate not in vec_of]
        if todo:
            vecs = self.parts.embedder.embed([ingest_text(ref, c) for c, ref in todo])
            vec_of.update({c: v for (c, _), v in zip(todo, vecs)})

    def _decide(self, c: Candidate, existing: list[Preference], detail) -> Decision:
        """The maintainer's decision on one candidate, held to the category's multiplicity."""
        return enforce_multiplicity(self.parts.maintainer.decide(c, list(existing), detail).decision, existing, detail)

    def _plan(self, allowed, read, user: str, conversation_id: Optional[str]):
        """Maintenance decisions in candidate order, each seeing what the earlier ones of this ingest would write.

        Returns the decisions (inserts carry a placeholder target "pending-i") and, per category read,
        the signature of what was read, so the writer can tell whether it is still current.
        """
        views: dict[str, list[Preference]] = {}
        seen: dict[str, tuple] = {}
        decisions: list[Decision] = []
        for i, (c, ref) in enumerate(allowed):
            key = c.path.model_dump_json()
            if key not in views:
                views[key] = list(read(c.path))
                seen[key] = _signature(views[key])
            existing = views[key]
            d = self._decide(c, existing, ref.detail)
            now = utcnow()
            if d.action in ("insert", "append"):
                d = d.model_copy(update={"target": f"pending-{i}"})
                existing.append(Preference(id=d.target, user=user, path=c.path, attribute=d.candidate.attribute,
                                           sentence=d.candidate.sentence, polarity=d.candidate.polarity,
                                           conversation_id=conversation_id, created_at=now, updated_at=now))
            elif d.action == "update":
                new = d.candidate
                existing[:] = [p.model_copy(update={"attribute": new.attribute, "sentence": new.sentence,
                                                    "polarity": new.polarity, "updated_at": now})
                               if p.id == d.target else p for p in existing]
            decisions.append(d)
        return decisions, seen


def _apply_consent(tx, r, cause_base: str) -> ConsentAction:
    """One consent request inside the ingest's transaction. The utterance goes into the audit: the opt-out's own entry
    (its consent record), or for a deletion a note beside the deletions (whose own entries keep no content). What it
    erases is cut out of the kept utterance ("forget that I like [erased]"), so the record never keeps erased content."""
    gone = [p for p in tx.preferences() if p.path.within(r.prefix)]
    said = _redact(r.utterance, [*gone, *(o for o in tx.observations() if o.path.within(r.prefix))])
    cause = f"consent by voice in {cause_base}: {said!r}"
    if r.kind == "opt_out":
        covered = blocking_rule(tx.opt_outs(), r.prefix)
        if covered is not None:
            return ConsentAction(kind="opt_out", prefix=r.prefix, utterance=r.utterance, note=f"already opted out of {covered}")
        purged = tx.opt_out(r.prefix, cause, utterance=said)
        return ConsentAction(kind="opt_out", prefix=r.prefix, utterance=r.utterance, removed=len(purged))
    tx.note("delete", cause, None, {"prefix": r.prefix, "utterance": said, "deleted": len(gone)})
    for p in gone:
        tx.delete(p.id, f"deleted by voice ({r.prefix})", why=f"deleted on request by voice ({r.prefix})")
    tx.drop_observations(r.prefix, f"deleted by voice ({r.prefix})", why=f"deleted on request by voice ({r.prefix})")
    return ConsentAction(kind="delete", prefix=r.prefix, utterance=r.utterance, removed=len(gone),
                         note="" if gone else "nothing was stored there")


def _redact(utterance: str, erased: list[Preference | Observation]) -> str:
    """The utterance with the values of the preferences and observations it erases replaced by "[erased]"."""
    import re

    for p in erased:
        value = re.sub(r"^not\s+", "", p.attribute.strip(), flags=re.I)
        if len(value) >= 2:
            utterance = re.sub(r"(?<!\w)" + re.escape(value) + r"(?!\w)", "[erased]", utterance, flags=re.I)
    return utterance


def ingest_text(ref, c) -> str:
    """What is embedded for a candidate: the enriched text of its detail, value, polarity and sentence."""
    return enriched_text(ref.detail, c.attribute, c.sentence, polarity=c.polarity)


def _signature(prefs: list[Preference]) -> tuple:
    return tuple(sorted((p.id, p.updated_at.isoformat()) for p in prefs))
