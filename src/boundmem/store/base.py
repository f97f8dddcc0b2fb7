"""The storage contract. SQLite and PostgreSQL implement it; tests/store/test_store_contract.py runs against both.

Writes happen inside `transaction(user)`: one ingest = one transaction, serialised per user so
that two writers deciding pass/update/append against the same stored preferences cannot both
append a duplicate. Every write lands in the append-only audit log in the same transaction.

The audit log and the opt-outs are kept under the user's pseudonym (a keyed hash of the id under the store's
salt), so that `forget` can remove the id itself while consent (opt-outs) and the log's shape survive. Each user's
entries are numbered 1, 2, ... and hash-chained; erasing content (forget, delete, opt-out purge) blanks the payload
of the entries about it but never their hashes, so `verify_audit` still checks the whole chain.
"""
from __future__ import annotations

import re
import sqlite3
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import date, datetime
from typing import Optional, Protocol, Sequence, runtime_checkable

import numpy as np

from ..errors import ConflictError, InputError, NotFoundError, StoreError  # NotFoundError, StoreError: also importable from here, as before
from ..models import AuditEntry, Episode, Observation, Polarity, Preference, Term, UserExport
from ..schema.model import CategoryPath
from .sql_jobs import Job


class OptedOutError(ConflictError):
    """A write into a category the user opted out of. Nothing was written. A conflict, not bad input: the write is
    well-formed; what forbids it is consent the store holds."""

    code = "opted_out"

    def __init__(self, user: str, path: CategoryPath | str, rule: str):
        self.user, self.path, self.rule = user, str(path), rule
        super().__init__(f"user {user!r} opted out of {rule!r}; refusing to store into {path}")


BUSY_RETRY_AFTER = 2.0   # seconds every store (and the service, for SQLite's own "database is locked") advises


class StoreBusy(StoreError):
    """The write lock is held by someone else (another process, a long transaction) for longer than the store
    waits. Nothing was written; the same call may succeed after `retry_after` seconds."""

    code = "store_busy"

    def __init__(self, message: str, retry_after: float = BUSY_RETRY_AFTER):
        self.retry_after = retry_after
        super().__init__(f"{message}; retry in {retry_after:g} s")


class StoreClosed(StoreError):
    """The store was closed; nothing more can be read or written through it (a worker that meets this stops)."""

    code = "store_closed"


class EmbeddingDimensionError(ConflictError, StoreError):
    """A vector of another dimension than the store's embeddings: the memory was filled by another embedder. A
    conflict with what is stored (409); still a StoreError for callers that catch the store's errors."""

    code = "embedding_dimension_mismatch"

    def __init__(self, stored: int, got: int, message: str):
        self.stored, self.got = stored, got
        super().__init__(message)


@runtime_checkable
class StoreTx(Protocol):
    """A write transaction scoped to one user."""

    user: str

    def preferences(self, path: Optional[CategoryPath] = None) -> list[Preference]:
        """The user's stored preferences (of one detail category if given), read inside the transaction."""

    def insert(self, path: CategoryPath, attribute: str, sentence: str, embedding: np.ndarray,
               conversation_id: Optional[str], cause: str, polarity: Polarity = "like") -> Preference: ...

    def replace(self, pref_id: str, attribute: str, sentence: str, embedding: np.ndarray,
                conversation_id: Optional[str], cause: str, polarity: Polarity = "like",
                why: Optional[str] = None) -> Preference:
        """Update in place (keeps the id, records before/after); `why` is the content-free reason the audit entry
        keeps (default: from a conversation, or on request)."""

    def delete(self, pref_id: str, cause: str, why: str = "deleted on request") -> Preference:
        """`why` is the content-free reason the erased entry keeps."""

    def note(self, op: str, cause: str, preference_id: Optional[str] = None, detail: Optional[dict] = None) -> None:
        """Record a decision that changes nothing (e.g. maintenance 'pass') in the audit log."""

    def observe(self, path: CategoryPath, attribute: str, polarity: Polarity, sentence: str,
                conversation_id: Optional[str], cause: str) -> Observation:
        """Record a one-off choice (audited "observe"); OptedOutError under an opt-out, as for preferences."""

    def observations(self, path: Optional[CategoryPath] = None) -> list[Observation]: ...

    def observation(self, obs_id: str) -> Observation:
        """NotFoundError if the user holds no such observation."""

    def matching_observations(self, path: CategoryPath, attribute: str, polarity: Polarity) -> list[Observation]:
        """Observations of this category, value (by `normalise_value`) and polarity."""

    def count_conversations(self, path: CategoryPath, attribute: str, polarity: Polarity) -> int:
        """Distinct conversation ids among `matching_observations`: what promotion counts."""

    def remove_observation(self, obs_id: str, op: Optional[str], cause: str, why: str) -> Observation:
        """Delete one observation and erase its audit payloads; `op`/`why` are recorded without content (op None:
        no entry)."""

    def dismiss(self, obs_id: str, cause: str, why: str = "dismissed by the user") -> Observation: ...

    def drop_observations(self, prefix: str, cause: str, why: str) -> list[Observation]:
        """Erase every observation under a category prefix."""

    def expire_observations(self, older_than: datetime, cause: str, why: str) -> list[Observation]:
        """Erase the observations recorded before `older_than`."""

    def opt_outs(self) -> list[str]:
        """The user's opt-outs in force inside this transaction, including those made in it."""

    # episodic memory (store/sql_episodes.py): dated thoughts under the operator's ontology tags
    def episodes(self, term: Optional[Term] = None) -> list[Episode]: ...

    def episode(self, episode_id: str) -> Episode:
        """NotFoundError if the user holds no such episode."""

    def add_episode(self, text: str, tags: Sequence[str], day: date, embedding: np.ndarray, cause: str, *,
                    term: Term = "short", sources: Sequence[str] = (),
                    conversation_id: Optional[str] = None) -> Episode:
        """Audited "episode"; InputError without a tag, OptedOutError for a tag under an episodic opt-out."""

    def revise_episode(self, episode_id: str, cause: str, why: str, *, text: Optional[str] = None,
                       tags: Optional[Sequence[str]] = None, day: Optional[date] = None, term: Optional[Term] = None,
                       sources: Optional[Sequence[str]] = None, embedding: Optional[np.ndarray] = None) -> Episode: ...

    def delete_episode(self, episode_id: str, cause: str, why: str = "deleted on request") -> Episode:
        """Delete and erase its audit payloads (content-free "episode_delete")."""

    def episode_opt_outs(self) -> list[str]: ...

    def episode_opt_out(self, prefix: str, cause: str) -> list[Episode]:
        """Record the episodic opt-out (category, subcategory or tag) and purge what it covers."""

    def episode_opt_in(self, prefix: str, cause: str) -> bool: ...

    def opt_out(self, prefix: str, cause: str, utterance: Optional[str] = None) -> list[Preference]:
        """Record the opt-out and purge what it covers (`utterance`: what the user said, kept as the consent
        record); later writes in this transaction under it are refused. Returns what was purged."""

    def finish_job(self, job_id: str, owner: str, result: str, now: float) -> bool:
        """Mark a queued job done in this transaction (so its writes and its 'done' commit together: exactly once);
        False if `owner` no longer holds its lease (the caller rolls the transaction back)."""


@runtime_checkable
class Store(Protocol):
    def transaction(self, user: str) -> AbstractContextManager[StoreTx]: ...

    def preferences(self, user: str, prefix: Optional[str] = None) -> list[Preference]:
        """Stored preferences, optionally only under a path prefix ("main", "main/sub", "main/sub/detail")."""

    def get(self, user: str, pref_id: str) -> Preference: ...

    def vectors(self, user: str) -> tuple[list[Preference], np.ndarray]:
        """All of one user's preferences and their unit-norm embeddings (rows aligned)."""

    def search(self, user: str, query: np.ndarray, k: int) -> list[tuple[Preference, float]]:
        """Cosine top-k among one user's preferences only, never one under the user's opt-outs (the store applies
        them itself, so no caller can forget to) (EmbeddingDimensionError for a query of another dimension)."""

    def embedding_dim(self) -> Optional[int]:
        """The store's embedding dimension, fixed by the first vector ever written (None while there is none)."""

    def schema_record(self) -> Optional[str]:
        """The schema the store was first written with (`store/schema_record.py`: JSON name, version, fingerprint),
        or None while nothing was written."""

    def record_schema(self, record: str, replace: bool = False) -> str:
        """Record the schema unless one is held (`replace`: a deliberate migration); returns the record now held,
        so of two first writers with different schemas exactly one wins and the other sees the conflict."""

    def delete(self, user: str, pref_id: str, cause: str) -> Preference: ...

    def observations(self, user: str, prefix: Optional[str] = None) -> list[Observation]:
        """The user's observations (one-off choices), optionally under a path prefix; never part of `search`."""

    def dismiss(self, user: str, obs_id: str, cause: str) -> Observation:
        """Erase one observation (audited "dismiss", content-free); NotFoundError if unknown."""

    def opt_outs(self, user: str) -> list[str]: ...

    def episodes(self, user: str, since: Optional[date] = None, until: Optional[date] = None,
                 term: Optional[Term] = None) -> list[Episode]:
        """The user's episodes (days since..until inclusive), oldest day first; never one under an episodic
        opt-out (the store applies them itself)."""

    def episode_vectors(self, user: str, since: Optional[date] = None,
                        until: Optional[date] = None) -> tuple[list[Episode], np.ndarray]:
        """`episodes` and their unit-norm embeddings (rows aligned)."""

    def delete_episode(self, user: str, episode_id: str, cause: str) -> Episode: ...

    def episode_opt_outs(self, user: str) -> list[str]: ...

    def episode_opt_out(self, user: str, prefix: str, cause: str) -> list[Episode]: ...

    def episode_opt_in(self, user: str, prefix: str, cause: str) -> bool: ...

    def opt_out(self, user: str, prefix: str, cause: str) -> list[Preference]:
        """Record the opt-out and purge what is stored under it (audited); returns what was purged."""

    def opt_in(self, user: str, prefix: str, cause: str) -> bool: ...

    def audit(self, user: str) -> list[AuditEntry]: ...

    def export(self, user: str) -> UserExport: ...

    def forget(self, user: str, cause: str) -> int:
        """Erase the user's content (preferences, observations, episodes, audit payloads) and pseudonymise the user id; record that the
        erasure happened. Opt-outs survive (consent is its own record): only `opt_in` lifts one."""

    def users(self) -> list[str]:
        """Ids of the users that hold (or held) something and were not forgotten since."""

    def has_user(self, user: str) -> bool:
        """Whether the store knows this user id (and it was not forgotten since)."""

    def verify_audit(self, user: Optional[str] = None) -> "AuditCheck":
        """Recompute the audit log's hash chains (one user's, or every user's)."""

    def close(self) -> None: ...


@runtime_checkable
class JobTable(Protocol):
    """The job queue's rows (store/sql_jobs.py), in the store's database; the queue (jobs.py) decides, this keeps.
    Times are the queue's clock (seconds); `owner` names the worker holding a job's lease."""

    def add_job(self, job_id: str, user: str, payload: str, now: float, kind: str = "conversation") -> None:
        """A pending job, committed when this returns (`payload`: the conversation, kept until the job finishes)."""

    def job(self, job_id: str) -> Optional[Job]: ...

    def user_jobs(self, user: str) -> list[Job]:
        """A user's jobs, oldest first."""

    def open_jobs(self, user: Optional[str] = None) -> int:
        """Jobs pending or running (of one user, or all)."""

    def forget_jobs(self, user: str) -> int:
        """Delete every job of a user (before the store's erasure, whose WAL wipe then covers their pages)."""

    def claim_job(self, owner: str, now: float, lease_seconds: float) -> Optional[tuple[Job, str]]:
        """Lease the oldest ready job to `owner`: pending past its backoff, or running under an expired lease, and
        no earlier unfinished job of its user. Returns it (attempts counted) with its payload."""

    def finish_job(self, job_id: str, owner: str, status: str, result: Optional[str], error: Optional[str],
                   now: float) -> bool:
        """Mark a job done or failed and drop its payload, only while `owner` holds it."""

    def release_job(self, job_id: str, owner: str, not_before: float) -> bool:
        """Put a job back to pending, not to be taken before `not_before` (a retry's backoff)."""


@dataclass(frozen=True)
class AuditCheck:
    """The result of `Store.verify_audit`: ok, or the first broken entry (user, or its pseudonym if forgotten)."""

    ok: bool
    entries: int
    users: int
    user: Optional[str] = None
    seq: Optional[int] = None
    reason: str = ""


def is_store_busy(exc: BaseException) -> bool:
    """The store could not get its write lock in time: `StoreBusy` where the store raises it, and SQLite's own
    'database is locked' / 'database is busy' from code paths that do not translate it. Nothing was written; the
    same call may succeed later (the service answers 503, the job queue retries)."""
    if isinstance(exc, StoreBusy):
        return True
    return isinstance(exc, sqlite3.OperationalError) and any(w in str(exc).lower() for w in ("locked", "busy"))


def opt_out_prefix(prefix: str) -> str:
    """The one spelling of an opt-out a store records and matches ("main", "main/sub", "main/sub/detail"): the purge,
    the write check and search (SQL on PostgreSQL) compare it to paths as a string, so "music/" must become "music"
    before it is stored, or it would purge but not hide."""
    p = prefix.strip().strip("/")
    if not p or any(not part.strip() for part in p.split("/")) or p.count("/") > 2:
        raise InputError(f"an opt-out names one category (main, main/sub or main/sub/detail), not {prefix!r}")
    return p


def normalise_value(value: str) -> str:
    """The form two values are compared in when counting repeated observations: "Jazz", " jazz " and "JAZZ!" are one
    choice (case, spacing and surrounding punctuation do not make a new value)."""
    return " ".join(re.sub(r"[^\w\s'&+-]", " ", value.casefold()).split())


def blocking_rule(opt_outs: list[str], path: CategoryPath | str) -> Optional[str]:
    """The opt-out rule that covers a path, if any."""
    p = str(path)
    for rule in opt_outs:
        if p == rule or p.startswith(rule + "/"):
            return rule
    return None


def stack(user: str, vecs: list[np.ndarray]) -> np.ndarray:
    """One user's vectors as a matrix (rows aligned with the rows read); several dimensions are a StoreError."""
    if not vecs:
        return np.zeros((0, 0), np.float32)
    dims = {len(v) for v in vecs}
    if len(dims) > 1:
        raise StoreError(f"user {user!r} holds embeddings of several dimensions {sorted(dims)}; "
                         "they were written by different embedders")
    return np.vstack(vecs).astype(np.float32, copy=False)


def unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32).reshape(-1)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v
