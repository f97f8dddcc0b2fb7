"""The `Memory` facade: extract -> maintain -> store, and recall, with every stage injected."""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, get_args

from .config import EpisodicSettings, Settings
from .episodes import EpisodicAccess
from .errors import ConflictError, InputError, NotFoundError
from .extract.base import Extractor, Warmable
from .maintain.base import Maintainer
from .models import (EDITED_BY_USER, AuditEntry, Candidate, ConsentRecord, EpisodeRecall, IngestResult, MemoryRecall,
                     Observation, Polarity, Preference, RecallHit, UserExport, consent_records, utcnow)
from .embed import Embedder
from .embed.cache import CachingEmbedder
# raised by add, importable from here as before
from .ingest import IngestFailed as IngestFailed, IngestTooLong as IngestTooLong
from .ingest import Ingest, ingest_text
from .jobs import Job, JobQueue
from .messages import ConversationInput, to_conversation
from .retrieve.cues import request_cues
from .retrieve.gate import RecallGate
from .retrieve.retriever import Retriever
from .retrieve.text import enriched_text
from .schema.model import Schema, UnknownCategoryError
from .store.base import OptedOutError, Store, blocking_rule, normalise_value
from .store.schema_record import check_schema
from .user_id import accepts_user_id, check_store_user_id

def check_text(value: object, argument: str) -> str:
    """A public method's text argument: a string, else an InputError naming the argument (not an AttributeError)."""
    if not isinstance(value, str):
        raise InputError(f"argument {argument!r} must be a string, not {type(value).__name__}"
                         + (" (give the text of the message, not its list of parts)" if isinstance(value, list) else ""))
    return value


@accepts_user_id
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
    _ingest: Ingest = field(init=False, repr=False, compare=False)
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
        self._ingest = Ingest(self)   # the write path (ingest.py), reading this Memory's stages when it runs

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
        return self._ingest.add(conversation, user, then, conversation_id=conversation_id, day=day)

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
        return self._ingest.apply(candidates, user, conversation_id, schema, then, consent)

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
        self._ingest.bind_schema()
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
        self._ingest.bind_schema()
        with self.store.transaction(user) as tx:
            twin = next((p for p in tx.preferences(old.path) if p.id != preference_id
                         and normalise_value(p.attribute) == normalise_value(value)), None)
            if twin is not None:
                raise ConflictError(f"{ref.detail.name!r} already holds {twin.attribute!r} (preference {twin.id}); "
                                    "delete one of them instead")
            return tx.replace(preference_id, value, old.sentence, vec, old.conversation_id, EDITED_BY_USER,
                              polarity=polarity, why=EDITED_BY_USER)

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
        vec = self.embedder.embed([ingest_text(ref, o)])[0]
        with self.store.transaction(user) as tx:
            o = tx.observation(observation_id)  # still there under the lock
            support = tx.matching_observations(o.path, o.attribute, o.polarity)
            return self._ingest.promote(tx, support, ref, vec, o.conversation_id, "the user's confirmation", {},
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
                n += len(self._ingest.expire(tx, now))
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

    # mem0's names for the same calls, so code written for it reads here as it did there
    search = recall
    get_all = preferences
    delete_all = forget


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
