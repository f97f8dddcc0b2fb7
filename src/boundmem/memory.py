"""The `Memory` facade: extract -> maintain -> store, and recall, with every stage injected."""
from __future__ import annotations

import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, get_args

from .config import EpisodicSettings, Settings
from .episodes import EpisodicAccess
from .errors import BoundmemError, ConflictError, InputError, LimitError, NotFoundError
from .extract.base import Extractor, Warmable
from .maintain.base import Maintainer, enforce_multiplicity
from .models import (AuditEntry, Candidate, ConsentAction, ConsentRecord, Conversation, Decision, EpisodeRecall,
                     IngestResult, MemoryRecall, Observation, Polarity, Preference, RecallHit, UserExport,
                     consent_records, utcnow)
from .embed import Embedder
from .embed.cache import CachingEmbedder
from .jobs import Job, JobQueue
from .messages import ConversationInput, to_conversation
from .retrieve.cues import request_cues
from .retrieve.gate import RecallGate
from .retrieve.retriever import Retriever
from .retrieve.text import enriched_text
from .schema.model import CategoryPath, Schema, UnknownCategoryError
from .store.base import OptedOutError, Store, blocking_rule, is_store_busy, normalise_value
from .store.schema_record import bind_schema, check_schema
from .user_id import check_store_user_id

log = logging.getLogger("boundmem.memory")


def check_text(value: object, argument: str) -> str:
    """A public method's text argument: a string, else an InputError naming the argument (not an AttributeError)."""
    if not isinstance(value, str):
        raise InputError(f"argument {argument!r} must be a string, not {type(value).__name__}"
                         + (" (give the text of the message, not its list of parts)" if isinstance(value, list) else ""))
    return value


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


@dataclass
class Memory(EpisodicAccess):
    """Bounded preference memory for many users, and (opt-in, `episodic`) their episodic memory (episodes.py).

    Stages are protocols so the local (offline) and LLM implementations are interchangeable;
    `Memory.local()` wires the embedded defaults.
    """

    schema: Schema
    store: Store
    extractor: Extractor
    maintainer: Maintainer
    embedder: Embedder
    consent: Any = None   # consent by voice (consent/); None: the one that goes with the extractor; False: off
    jobs_nice: int = 10   # nice value of the job worker thread (BOUNDMEM_JOBS_NICE)
    promote_after: int = 3          # distinct conversations that promote an observation (BOUNDMEM_PROMOTE_AFTER)
    observation_days: float = 90.0  # days an unconfirmed observation is kept (BOUNDMEM_OBSERVATION_DAYS)
    episodic: EpisodicSettings = field(default_factory=EpisodicSettings)  # BOUNDMEM_EPISODIC*: off by default
    query_cache: int = 1024         # query vectors kept for recall (BOUNDMEM_QUERY_CACHE; 0: none)
    max_ingest_seconds: Optional[float] = 10.0   # CPU time one ingest may take (BOUNDMEM_MAX_INGEST_SECONDS; None: no limit)
    retriever: Retriever = field(init=False)
    _jobs: Optional[JobQueue] = field(default=None, init=False, repr=False)
    _jobs_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)
    _schema_bound: bool = field(default=False, init=False, repr=False)
    _warm_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)
    _warmed: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        check_schema(self.store, self.schema)   # another schema's store is refused at opening (store/schema_record.py)
        if not isinstance(self.embedder, CachingEmbedder):
            # stages built with the bare embedder keep it; build_memory hands them this wrapper, so they share the
            # ingest's vectors too
            self.embedder = CachingEmbedder(self.embedder, self.query_cache)
        self.retriever = Retriever(self.store, self.embedder, self.schema, gate=lambda r: RecallGate(
            self.schema, self.embedder, request_cues, protos=r.prototypes))
        if self.consent is None:
            from .consent.llm import default_detector

            self.consent = default_detector(self.extractor, self.embedder)

    @classmethod
    def local(cls, db: str | Path = "boundmem.db", schema: Optional[Schema] = None,
              settings: Optional[Settings] = None) -> "Memory":
        """The local (offline) stages and MiniLM on `db`; `settings` (the MiniLM backend, its files) default to the
        environment's, as in `build_memory`."""
        return build_memory(settings, db=db, schema=schema, embedder="minilm")

    # --- writing ------------------------------------------------------------------------
    def warm(self) -> None:
        """Load every model the request path uses (the extractor's: the reader and the language identifier; the
        embedder; the recall gate's; episodic memory's parts where it is on) and embed the schema's own texts now,
        once, under a lock: concurrent first callers wait for the one load, and the first user pays for none."""
        with self._warm_lock:
            if self._warmed:
                return
            if isinstance(self.extractor, Warmable):
                self.extractor.warm(self.schema)
            self.embedder.embed(["warm up"])
            if (gate := self.retriever.gate) is not None:
                gate.warm()
            if self.episodic.enabled:
                self.episodic_memory   # noqa: B018 - builds CAIM's tagger, thinker, merger and controller
            self._warmed = True

    def user_schema(self, user: str) -> Schema:
        return self.schema.prune(self.store.opt_outs(user))

    def add(self, conversation: ConversationInput, user: str, then: Optional[Callable[[Any, IngestResult], None]] = None,
            *, conversation_id: Optional[str] = None, day: Optional[date] = None) -> IngestResult:
        """Ingest one conversation in one transaction: all its decisions land, or none do.

        Consent said in the conversation ("stop remembering where I like to eat", "forget my music preferences") is
        found first and applied in the same transaction (opt-out or deletion, the user's turn kept as the consent
        record); those turns are left out of extraction, and an opted-out category out of the schema.
        `conversation`: a `Conversation`, a list of `{"role", "content"}` messages or a string (`messages.py`); the
        id, when neither it nor `conversation_id` gives one, is generated (`IngestResult.conversation_id`).
        When episodic memory is on for the user, the conversation (without its consent turns) is post-thought into
        episodes of `day` (default today) after the preferences are stored (`IngestResult.episodes`)."""
        conversation = to_conversation(conversation, conversation_id)
        user = check_store_user_id(user, "user")
        try:
            with self.embedder.ingest():   # consent, extraction, maintenance, storage: one vector per distinct text
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
        deadline = Deadline(self.max_ingest_seconds)
        opted = self.store.opt_outs(user)
        schema = self.schema.prune(opted)
        requests = self.consent.detect(conversation, self.schema) if self.consent else []
        if requests:
            schema = self.schema.prune([*opted, *(r.prefix for r in requests if r.kind == "opt_out")])
            said = {r.turn for r in requests}
            rest = tuple(t for i, t in enumerate(conversation.turns) if i not in said)
            conversation = conversation.model_copy(update={"turns": rest})
        deadline.check("consent detection")
        has_user_turns = any(t.role == "user" for t in conversation.turns)
        candidates = self.extractor.extract(conversation, schema).candidates if has_user_turns and schema.mains else []
        deadline.check("extraction")
        # the episodic half is thought out before anything is written, and written in the preferences' transaction
        plan = self.episodic_memory.prepare(conversation, user, day) if self.episodic_on(user) else None
        deadline.check("post-thinking")
        written: list[bool] = []

        def write_all(tx, result: IngestResult) -> None:
            if plan is not None:
                result.episodes = self.episodic_memory.write(tx, plan)
            written.append(True)
            if then is not None:
                then(tx, result)

        result = self.apply(candidates, user, conversation.id, schema, then=write_all, consent=requests)
        if plan is not None and not written:   # no preference to write: the episodes' own transaction
            with self.store.transaction(user) as tx:
                write_all(tx, result)
        return result

    def _bind_schema(self) -> None:
        """The first write records the schema in the store (or finds that another writer recorded another one)."""
        if not self._schema_bound:
            bind_schema(self.store, self.schema)
            self._schema_bound = True

    # --- asynchronous ingestion (jobs.py: a durable queue in the store's database) -------------
    @property
    def jobs(self) -> JobQueue:
        """The store's job queue (created on first use, once: request threads submit at the same time)."""
        if self._jobs is None:
            with self._jobs_lock:
                if self._jobs is None:
                    self._jobs = JobQueue(self.store, nice=self.jobs_nice)
        return self._jobs

    def stop_jobs(self) -> None:
        """Stop the job worker if one runs (a queue never used is not created for it)."""
        with self._jobs_lock:
            if self._jobs is not None:
                self._jobs.stop()

    def close_jobs(self) -> None:
        """Stop the worker and close the queue's connections (the store stays open)."""
        with self._jobs_lock:
            if self._jobs is not None:
                self._jobs.close()

    def submit(self, conversation: ConversationInput, user: str, start_worker: bool = True, *,
               conversation_id: Optional[str] = None) -> Job:
        """Queue a conversation for `add` and return at once with its `Job` (committed, so it survives a crash).
        A worker thread of this Memory drains the queue (started here unless `start_worker=False`); follow it
        with `job(id)` or `wait(id)`. Accepts what `add` accepts; the input is checked before anything is queued."""
        user = check_store_user_id(user, "user")
        job = self.jobs.submit(user, to_conversation(conversation, conversation_id))
        if start_worker:
            self.jobs.start(self.add)
        return job

    def job(self, job_id: str, user: Optional[str] = None) -> Job:
        return self.jobs.get(job_id, user)

    def wait(self, job_id: str, timeout: Optional[float] = 30.0) -> Job:
        """Block until the job is done or failed (`JobQueue.wait`: `timeout=None` waits as long as it takes)."""
        return self.jobs.wait(job_id, timeout)

    def apply(self, candidates: list[Candidate], user: str, conversation_id: Optional[str],
              schema: Optional[Schema] = None, then: Optional[Callable[[Any, IngestResult], None]] = None,
              consent: Sequence[Any] = ()) -> IngestResult:
        """Maintain and store already-extracted candidates (used by `add`, and by callers with their own extractor).
        `then(tx, result)` runs inside the write transaction after the decisions (the job queue marks its job
        done there, so both commit together); it is not called when there is nothing to write.

        A candidate with evidence "observed" (a one-off choice) never becomes a preference here: it is kept as an
        observation, and promoted (maintained as a stated candidate) once the same category, value and polarity was
        observed in `promote_after` distinct conversations."""
        with self.embedder.ingest():
            return self._apply(candidates, user, conversation_id, schema or self.user_schema(user), then, consent)

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
        self._bind_schema()
        vecs = self.embedder.embed([_text(ref, c) for c, ref in allowed]) if allowed else []
        vec_of = {c: v for (c, _), v in zip(allowed, vecs)}
        observed = [(c, ref) for c, ref in allowed if c.evidence == "observed"]
        allowed = [(c, ref) for c, ref in allowed if c.evidence != "observed"]
        cause_base = f"conversation {conversation_id}" if conversation_id else "direct"
        # Decide before taking the write lock: an LLM maintainer may take seconds, and holding the
        # store's write transaction that long would stall every other writer.
        decisions, seen = self._plan(allowed, lambda path: self.store.preferences(user, str(path)), user, conversation_id)
        self._embed_rewrites(allowed, decisions, vec_of)
        with self.store.transaction(user) as tx:
            result.consent = [_apply_consent(tx, r, cause_base) for r in consent]
            if any(_signature(tx.preferences(CategoryPath.model_validate_json(k))) != sig for k, sig in seen.items()):
                # someone wrote to these categories meanwhile: decide again, now under the lock
                decisions, _ = self._plan(allowed, tx.preferences, user, conversation_id)
                self._embed_rewrites(allowed, decisions, vec_of)
            self._expire(tx)
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
        if len(conversations) >= self.promote_after:
            p = self._promote(tx, support, ref, vec, conversation_id, cause_base, stored,
                              f"promoted: observed in {len(conversations)} distinct conversations "
                              f"({', '.join(conversations)})")
            result.promoted.append(p)
            result.observed = [x for x in result.observed if x.id not in {s.id for s in support}]

    def _promote(self, tx, support: list, ref, vec, conversation_id: Optional[str], cause_base: str,
                 stored: dict[str, Preference], why: str) -> Preference:
        """Maintain the observed choice as a stated candidate (pass / update / append and the single-preference
        rule apply as for anything said), record a "promote" entry naming what it rests on, and remove the
        promoted observations (their audit payloads erased: the preference now holds what they said)."""
        last = support[-1]
        cand = Candidate(path=last.path, attribute=last.attribute, sentence=last.sentence, polarity=last.polarity,
                         evidence="stated", span=last.attribute)
        existing = tx.preferences(last.path)
        d = enforce_multiplicity(self.maintainer.decide(cand, list(existing), ref.detail).decision, existing, ref.detail)
        if d.candidate != cand:  # the maintainer rewrote it: embed what is stored
            vec = self.embedder.embed([_text(ref, d.candidate)])[0]
        d = self._write(tx, cand, d, vec, conversation_id, cause_base, stored, why=f"{why}; {d.reason}")
        for o in support:
            tx.remove_observation(o.id, None, "", "")
        conversations = sorted({o.conversation_id for o in support if o.conversation_id})
        tx.note("promote", why, d.target, {"attribute": cand.attribute, "polarity": cand.polarity,
                                           "observations": [o.id for o in support], "conversations": conversations})
        return stored.get(d.target) or next(p for p in tx.preferences(last.path) if p.id == d.target)

    def _expire(self, tx, now: Optional[datetime] = None) -> list[Observation]:
        cutoff = (now or utcnow()) - timedelta(days=self.observation_days)
        return tx.expire_observations(cutoff, "retention period ended",
                                      f"expired: unconfirmed for {self.observation_days:g} days")

    def _embed_rewrites(self, allowed, decisions: list[Decision], vec_of: dict) -> None:
        """Embeddings for candidates the maintainer rewrote (another polarity, the stored wording), in one batch."""
        todo = [(d.candidate, ref) for (_, ref), d in zip(allowed, decisions) if d.candidate not in vec_of]
        if todo:
            vecs = self.embedder.embed([_text(ref, c) for c, ref in todo])
            vec_of.update({c: v for (c, _), v in zip(todo, vecs)})

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
            d = enforce_multiplicity(self.maintainer.decide(c, list(existing), ref.detail).decision, existing, ref.detail)
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

    # --- reading ------------------------------------------------------------------------
    def recall(self, utterance: str, user: str, k: Optional[int] = 5, *, gate: bool = True,
               min_score: Optional[float] = None) -> list[RecallHit]:
        """The user's preferences that would change the answer to `utterance`, most relevant first: the recall gate
        (retrieve/gate.py) keeps a hit only when its calibrated relevance passes, so most requests ("what's the
        weather?", "call Anna") get none; `k` caps them (None: the passing ones of one subcategory). `gate=False`:
        raw cosine top-k (k None: dynamic); `min_score`: raw top-k of at least that cosine."""
        utterance, user = check_text(utterance, "utterance"), check_store_user_id(user, "user")
        return self.retriever.recall(utterance, user, k, gate=gate, min_score=min_score)

    def recall_all(self, utterance: str, user: str, k: Optional[int] = 5, *, gate: bool = True,
                   min_score: Optional[float] = None, today: Optional[date] = None) -> MemoryRecall:
        """Preferences and, where episodic memory is on for the user, episodes that help with `utterance`: one reading
        of the request decides both (the recall gate; episodes follow it, `retrieve/joint.py`), and together they are
        at most `k` (`merge_recalls`). `gate=False` turns both gates off."""
        prefs = self.recall(utterance, user, k, gate=gate, min_score=min_score)
        eps = self.joint_episodes(utterance, user, k or 5, bool(prefs), gate=gate, today=today)
        return merge_recalls(prefs, eps, k)

    def stats(self) -> dict:
        """This Memory's query cache (capacity, size, hits, misses, hit rate) and its ingests' embedding counts (texts
        the stages asked for, texts really embedded): how much the shared vectors save, for `bench perf` and operators."""
        return self.embedder.stats()

    def preferences(self, user: str, category: Optional[str] = None) -> list[Preference]:
        user = check_store_user_id(user, "user")
        return self.store.preferences(user, self.schema.resolve_prefix(category) if category else None)

    # --- user control -------------------------------------------------------------------
    def opt_out(self, user: str, category: str) -> list[Preference]:
        """Stop remembering a main, sub or detail category, and purge what is held there."""
        prefix = self.schema.resolve_prefix(category)
        self._bind_schema()
        return self.store.opt_out(user, prefix, cause=f"user opted out of {prefix}")

    def opt_in(self, user: str, category: str) -> bool:
        prefix = self.schema.resolve_prefix(category)
        return self.store.opt_in(user, prefix, cause=f"user opted back in to {prefix}")

    def delete(self, user: str, preference_id: str) -> Preference:
        return self.store.delete(user, preference_id, cause="deleted by user")

    def update(self, user: str, preference_id: str, attribute: Optional[str] = None,
               polarity: Optional[Polarity] = None) -> Preference:
        """Correct a stored preference: its value (`attribute`) and/or its `polarity`, keeping its id, category,
        sentence and conversation as provenance. Audited as an "update" with the cause "edited by the user", and
        re-embedded from the corrected value (the old sentence no longer says what is held, so it is left out of
        the vector). In a closed category the value must be one of the listed items (matched ignoring case);
        the same value twice in a category is a ConflictError, as is editing under an opt-out (OptedOutError).
        NotFoundError for an id the user does not hold."""
        if attribute is None and polarity is None:
            raise InputError("nothing to change: give attribute (the corrected value) and/or polarity")
        if polarity is not None and polarity not in get_args(Polarity):
            raise InputError(f"polarity must be one of {', '.join(get_args(Polarity))}, not {polarity!r}")
        old = self.store.get(user, preference_id)
        ref = self._editable(old)
        value = old.attribute if attribute is None else _edited_value(ref.detail, attribute)
        polarity = polarity or old.polarity
        if (value, polarity) == (old.attribute, old.polarity):
            return old
        vec = self.embedder.embed([enriched_text(ref.detail, value, "", polarity=polarity)])[0]
        self._bind_schema()
        with self.store.transaction(user) as tx:
            twin = next((p for p in tx.preferences(old.path) if p.id != preference_id
                         and normalise_value(p.attribute) == normalise_value(value)), None)
            if twin is not None:
                raise ConflictError(f"{ref.detail.name!r} already holds {twin.attribute!r} (preference {twin.id}); "
                                    "delete one of them instead")
            return tx.replace(preference_id, value, old.sentence, vec, old.conversation_id, "edited by the user",
                              polarity=polarity, why="edited by the user")

    def _editable(self, p: Preference):
        """The category of a preference that may be edited: in the schema, not opted out."""
        rule = blocking_rule(self.store.opt_outs(p.user), p.path)
        if rule is not None:
            raise OptedOutError(p.user, p.path, rule)
        try:
            return self.schema.resolve(p.path)
        except UnknownCategoryError:
            raise ConflictError(f"preference {p.id} is under {p.path}, which schema {self.schema.name!r} does not "
                                "hold any more; it can be deleted, not edited") from None

    def history(self, user: str, preference_id: str) -> list[AuditEntry]:
        """One preference's audit entries, oldest first: how it was learned, seen again, updated or edited, and
        deleted. Entries about content that was erased (a deleted preference) keep what was done, when and why,
        never the content. NotFoundError if the user's log never mentions the id."""
        entries = [a for a in self.store.audit(user) if a.preference_id == preference_id]
        if not entries:
            raise NotFoundError(f"no preference {preference_id!r} in the history of user {user!r}")
        return entries

    def export(self, user: str) -> UserExport:
        return self.store.export(check_store_user_id(user, "user"))

    # --- observations ---------------------------------------------------------------------
    def observations(self, user: str) -> list[Observation]:
        """The user's one-off choices held as observations (never recalled as preferences)."""
        return self.store.observations(user)

    def confirm(self, user: str, observation_id: str) -> Preference:
        """The user confirms an observation: it is promoted at once (maintained as a stated preference, audited
        "promote" citing the confirmation), together with the other observations of the same value and polarity.
        NotFoundError if the user holds no such observation."""
        o = next((x for x in self.store.observations(user) if x.id == observation_id), None)
        if o is None:
            raise NotFoundError(f"no observation {observation_id!r} for user {user!r}")
        ref = self.schema.resolve(o.path)
        vec = self.embedder.embed([_text(ref, o)])[0]
        with self.store.transaction(user) as tx:
            o = tx.observation(observation_id)  # still there under the lock
            support = tx.matching_observations(o.path, o.attribute, o.polarity)
            return self._promote(tx, support, ref, vec, o.conversation_id, "the user's confirmation", {},
                                 "promoted: confirmed by the user")

    def dismiss(self, user: str, observation_id: str) -> None:
        """Erase one observation (on disk, like a deleted preference; audited "dismiss" without content)."""
        self.store.dismiss(user, observation_id, cause="dismissed by user")

    def expire_observations(self, user: Optional[str] = None, now: Optional[datetime] = None) -> int:
        """Erase observations older than `observation_days` (of one user, or of every user); returns how many.
        Also done whenever a user's memory is written through `apply`."""
        n = 0
        cutoff = (now or utcnow()) - timedelta(days=self.observation_days)
        for u in [user] if user is not None else self.store.users():
            if not any(o.created_at < cutoff for o in self.store.observations(u)):
                continue
            with self.store.transaction(u) as tx:
                n += len(self._expire(tx, now))
        return n

    def consents(self, user: str) -> list[ConsentRecord]:
        """Each opt-out in force with its consent record (what the user said, when), from the audit log."""
        return consent_records(self.store.opt_outs(user), self.store.audit(user))

    def forget(self, user: str) -> int:
        """Erase everything held about the user; returns how many preferences were erased. A user the store does not
        hold (never seen, or forgotten already) with nothing queued is a NotFoundError, as on the CLI and the API:
        a mistyped id must not read as an erasure done."""
        user = check_store_user_id(user, "user")
        # queued conversations of the user go too, whoever queued them (another process, an earlier run), before the
        # store's erasure, whose WAL wipe then covers their pages
        queued = self.jobs.forget_user(user)
        if not queued and not self.store.has_user(user):
            raise NotFoundError(f"no user {user!r} in the store"
                                + (" (that user was forgotten; nothing is held)"
                                   if self.store.verify_audit(user).entries else ""))   # a forgotten id's chains stay
        return self.store.forget(user, cause="user asked to be forgotten")


def merge_recalls(prefs: list[RecallHit], episodes: Optional[EpisodeRecall], k: Optional[int]) -> MemoryRecall:
    """One list of what helps, at most `k` (None: no joint cap): preferences and episodes taken in turn, each list
    best first, so neither kind crowds the other out."""
    eps = list(episodes.hits) if episodes is not None else []
    if k is not None and len(prefs) + len(eps) > k:
        order = [x for pair in itertools.zip_longest(prefs, eps) for x in pair if x is not None][:k]
        keep = {id(x) for x in order}
        prefs, eps = [h for h in prefs if id(h) in keep], [h for h in eps if id(h) in keep]
    if episodes is not None:
        episodes = episodes.model_copy(update={"hits": eps})
    return MemoryRecall(preferences=prefs, episodes=episodes)


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


def _text(ref, c) -> str:
    """What is embedded for a candidate: the enriched text of its detail, value, polarity and sentence."""
    return enriched_text(ref.detail, c.attribute, c.sentence, polarity=c.polarity)


def _edited_value(detail, attribute: str) -> str:
    """The value a user typed as a correction: trimmed, bounded; in a closed category the listed item it names."""
    value = " ".join(str(attribute).split()) if isinstance(attribute, str) else ""
    if not value:
        raise InputError("attribute (the corrected value) must be a non-empty string")
    if len(value) > MAX_VALUE_CHARS:
        raise InputError(f"attribute is {len(value)} characters; a value has at most {MAX_VALUE_CHARS}")
    if detail.value_kind == "closed":
        item = next((a for a in detail.attributes if normalise_value(a) == normalise_value(value)), None)
        if item is None:
            raise InputError(f"{detail.name!r} takes one of {', '.join(map(repr, detail.attributes))}, not {value!r}")
        return item
    return value


MAX_VALUE_CHARS = 200


def _signature(prefs: list[Preference]) -> tuple:
    return tuple(sorted((p.id, p.updated_at.isoformat()) for p in prefs))


def build_memory(settings: Optional[Settings] = None, *, db: Optional[str | Path] = None, schema: Optional[Schema] = None,
                 extractor: str = "local", maintainer: str = "local", embedder: Optional[str] = None) -> Memory:
    """A Memory with each stage built by name from its registry (what the CLI, the service and the benchmarks use).
    `settings` defaults to the environment's (`Settings.from_env()`); `db` and `embedder` default to the settings'
    (BOUNDMEM_DB, BOUNDMEM_EMBEDDER). One embedder is shared by every stage that needs one."""
    from .embed.registry import make_embedder
    from .extract.registry import make_extractor
    from .maintain.registry import make_maintainer
    from .schema.load import builtin_schema
    from .store.registry import open_store

    settings = settings if settings is not None else Settings.from_env()
    emb = CachingEmbedder(make_embedder(embedder or settings.embed.embedder, settings), settings.embed.query_cache)
    return Memory(schema=schema or builtin_schema(), store=open_store(str(db or settings.db), settings),
                  extractor=make_extractor(extractor, settings, emb), maintainer=make_maintainer(maintainer, settings, emb),
                  embedder=emb, jobs_nice=settings.jobs_nice, promote_after=settings.promote_after,
                  observation_days=settings.observation_days, episodic=settings.episodic,
                  query_cache=settings.embed.query_cache, max_ingest_seconds=settings.max_ingest_seconds)
