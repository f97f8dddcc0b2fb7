"""Asynchronous ingestion: a durable queue of conversations to learn from, in the store's own database.

A voice assistant cannot wait for extraction on its request path. `JobQueue.submit` writes the conversation as a
job row (one short INSERT, committed before it returns) and a worker thread drains the queue through an ingest
callable (`Memory.add`: the queue knows nothing of the Memory, so the two modules do not import each other).

Guarantees (tests/test_jobs.py):

- *Durable*: a job is in the database once `submit` returns; a process killed with `kill -9` loses none (the next
  worker on the same database runs what is pending, and takes over a job whose worker died once its lease expires).
- *Exactly once*: the job is marked done inside the same store transaction that writes its preferences (on the
  transaction's own connection), and only while this worker still holds its lease; a worker that lost its lease
  rolls the whole ingest back. So a job's decisions land once or not at all.
- *Ordered per user*: a job is taken only when no earlier job of the same user is pending or running, so one
  user's conversations are applied in submission order; different users' jobs do not wait for each other.
- *Nothing kept longer than needed*: the conversation text is removed from the row when the job finishes (done or
  failed); the result kept for `GET .../jobs/{id}` holds actions, categories and preference ids, not the user's
  words. `Memory.forget` drops the user's jobs too (pending ones are never run).

Failures: a busy store or a failing LLM endpoint is retried with backoff (up to `max_attempts`); anything else
(e.g. invalid extractor output) marks the job failed with the error's type and message, logged, and the queue
goes on with the user's next job.

The table lives in the store's database (SQLite file or PostgreSQL), created on first use; it is this module's own
(`jobs`), never touched by the stores.
"""
from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, Optional, Protocol

from .errors import ConflictError, NotFoundError
from .models import Conversation, IngestResult
from .store.sqlite_connect import connect

log = logging.getLogger("boundmem.jobs")

STATUSES = ("pending", "running", "done", "failed")
_COLS = "seq, id, user_id, kind, status, result, error, attempts, created_at, started_at, finished_at"


class Ingest(Protocol):
    """What applies a job: `Memory.add`. `then(tx, result)` runs inside the ingest's own store transaction (where
    the job is marked done: exactly once); it is not called when nothing was written."""

    def __call__(self, conversation: Conversation, user: str,
                 then: Optional[Callable[[Any, IngestResult], None]] = None) -> IngestResult: ...


class JobNotFound(NotFoundError):
    """No such job (for this user)."""


class LeaseLost(ConflictError):
    """Another worker took the job over (this one's lease expired): the ingest is rolled back."""


@dataclass(frozen=True)
class Job:
    id: str
    user: str
    status: str
    kind: str = "conversation"
    seq: int = 0
    attempts: int = 0
    result: Optional[dict] = None
    error: Optional[str] = None
    created_at: Optional[datetime] = None
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed")


def _dt(t: Optional[float]) -> Optional[datetime]:
    return None if t is None else datetime.fromtimestamp(float(t), timezone.utc)


def _row_to_job(r) -> Job:
    seq, id_, user, kind, status, result, error, attempts, created, started, finished = r
    return Job(id=id_, user=user, status=status, kind=kind, seq=int(seq), attempts=int(attempts),
               result=json.loads(result) if result else None, error=error, created_at=_dt(created),
               started_at=_dt(started), finished_at=_dt(finished))


def summary(result: IngestResult) -> dict:
    """What a finished job keeps: what was done where, never the user's words."""
    return {"conversation_id": result.conversation_id,
            "decisions": [{"action": d.action, "path": str(d.candidate.path), "target": d.target}
                          for d in result.decisions],
            "blocked": [str(c.path) for c in result.blocked],
            "observed": [{"id": o.id, "path": str(o.path)} for o in result.observed],
            "promoted": [{"id": p.id, "path": str(p.path)} for p in result.promoted]}


def _transient(e: BaseException) -> bool:
    from .llm.errors import LLMOutputError, LLMError
    from .store.base import is_store_busy

    if is_store_busy(e):
        return True
    return isinstance(e, LLMError) and not isinstance(e, LLMOutputError)


class _SQLite:
    placeholder = "?"
    ddl = ["""CREATE TABLE IF NOT EXISTS jobs (
                seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL,
                kind TEXT NOT NULL, status TEXT NOT NULL, payload TEXT, result TEXT, error TEXT,
                attempts INTEGER NOT NULL DEFAULT 0, owner TEXT, lease_until REAL, not_before REAL NOT NULL DEFAULT 0,
                created_at REAL NOT NULL, started_at REAL, finished_at REAL)""",
           "CREATE INDEX IF NOT EXISTS jobs_open ON jobs(status, seq)",
           "CREATE INDEX IF NOT EXISTS jobs_user ON jobs(user_id, seq)"]

    def __init__(self, store: Any):
        self.store = store
        self.path = store.path
        self.memory = store.path == ":memory:"
        self.timeout = getattr(store, "timeout", 5.0)
        self._local = threading.local()

    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None or getattr(self._local, "pid", None) != os.getpid():
            con = connect(self.path, self.timeout)   # secure_delete: a finished job's text is zeroed, not freed
            self._local.con, self._local.pid = con, os.getpid()
        return con

    @contextmanager
    def write(self) -> Iterator[Any]:
        if self.memory:   # one shared connection: the store's own
            with self.store._use() as con:
                con.execute("BEGIN IMMEDIATE")
                try:
                    yield con
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
                con.execute("COMMIT")
            return
        con = self._con()
        con.execute("BEGIN IMMEDIATE")
        try:
            yield con
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[Any]:
        if self.memory:
            with self.store._use() as con:
                yield con
        else:
            yield self._con()

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None


class _Postgres:
    placeholder = "%s"
    ddl = ["""CREATE TABLE IF NOT EXISTS jobs (
                seq BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL,
                kind TEXT NOT NULL, status TEXT NOT NULL, payload TEXT, result TEXT, error TEXT,
                attempts INTEGER NOT NULL DEFAULT 0, owner TEXT, lease_until DOUBLE PRECISION,
                not_before DOUBLE PRECISION NOT NULL DEFAULT 0, created_at DOUBLE PRECISION NOT NULL,
                started_at DOUBLE PRECISION, finished_at DOUBLE PRECISION)""",
           "CREATE INDEX IF NOT EXISTS jobs_open ON jobs(status, seq)",
           "CREATE INDEX IF NOT EXISTS jobs_user ON jobs(user_id, seq)"]

    def __init__(self, store: Any):
        self.store = store

    @contextmanager
    def write(self) -> Iterator[Any]:
        with self.store._conn() as con, con.transaction():
            yield con

    read = write

    def close(self) -> None:
        pass


def _lower_priority(nice: int) -> None:
    """Run this (worker) thread at a lower CPU priority (Linux: a thread's own nice value, `BOUNDMEM_JOBS_NICE`,
    default 10), so background ingestion yields the cores to recalls and requests on the same machine. Embedding runs
    in the calling thread (one ONNX Runtime thread per run), so the model's work is lowered too."""
    try:
        if nice > 0 and hasattr(os, "setpriority") and hasattr(threading, "get_native_id"):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except OSError:
        log.debug("could not lower the job worker's priority", exc_info=True)


class JobQueue:
    """The jobs table of one store, and the worker that drains it through an `Ingest` (`Memory.add`)."""

    def __init__(self, store: Any, lease_seconds: float = 60.0, max_attempts: int = 5, backoff: float = 1.0,
                 nice: int = 10, clock: Callable[[], float] = time.time):
        self.db = _Postgres(store) if type(store).__name__ == "PostgresStore" else _SQLite(store)
        self.lease_seconds, self.max_attempts, self.backoff = lease_seconds, max_attempts, backoff
        self.nice = nice   # the worker thread's nice value (BOUNDMEM_JOBS_NICE; <= 0 leaves it)
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.clock = clock   # leases, backoff and timestamps: a test moves it instead of sleeping past a lease
        self._finished = threading.Condition()   # notified when a job of this process finishes (`wait`)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._worker: Optional[threading.Thread] = None
        self._start_lock = threading.Lock()
        with self.db.write() as con:
            for stmt in self.db.ddl:
                con.execute(stmt)

    def _sql(self, s: str) -> str:
        return s if self.db.placeholder == "?" else s.replace("?", "%s")

    # --- producing and reading ---------------------------------------------------------------
    def submit(self, user: str, conversation: Conversation) -> Job:
        """Queue a conversation for `user` (a store id); committed when this returns."""
        now = self.clock()
        job_id = uuid.uuid4().hex
        with self.db.write() as con:
            con.execute(self._sql("INSERT INTO jobs(id, user_id, kind, status, payload, created_at) "
                                  "VALUES (?, ?, 'conversation', 'pending', ?, ?)"),
                        (job_id, user, conversation.model_dump_json(), now))
        self._wake.set()
        return Job(id=job_id, user=user, status="pending", created_at=_dt(now))

    def get(self, job_id: str, user: Optional[str] = None) -> Job:
        """One job (only if it is `user`'s, when given: another user's job is 'not found')."""
        with self.db.read() as con:
            row = con.execute(self._sql(f"SELECT {_COLS} FROM jobs WHERE id=?"), (job_id,)).fetchone()
        if row is None or (user is not None and row[2] != user):
            raise JobNotFound(f"no job {job_id!r}" + (f" for user {user!r}" if user else ""))
        return _row_to_job(row)

    def of_user(self, user: str) -> list[Job]:
        """A user's jobs, oldest first (what was done, never the words)."""
        with self.db.read() as con:
            rows = con.execute(self._sql(f"SELECT {_COLS} FROM jobs WHERE user_id=? ORDER BY seq"), (user,)).fetchall()
        return [_row_to_job(r) for r in rows]

    def pending(self, user: Optional[str] = None) -> int:
        """Jobs not yet finished (of one user, or all)."""
        q = "SELECT COUNT(*) FROM jobs WHERE status IN ('pending', 'running')"
        with self.db.read() as con:
            if user is None:
                return int(con.execute(q).fetchone()[0])
            return int(con.execute(self._sql(q + " AND user_id=?"), (user,)).fetchone()[0])

    def forget_user(self, user: str) -> int:
        """Drop every job of a user (run before the store's own erasure, whose WAL wipe then covers these pages)."""
        with self.db.write() as con:
            cur = con.execute(self._sql("DELETE FROM jobs WHERE user_id=?"), (user,))
            return max(cur.rowcount or 0, 0)

    # --- consuming -----------------------------------------------------------------------------
    def claim(self) -> Optional[tuple[Job, Conversation]]:
        """Take the oldest job whose user has no earlier unfinished job (and lease it to this worker)."""
        now = self.clock()
        with self.db.read() as con:   # idle polling takes no write lock
            if con.execute("SELECT 1 FROM jobs WHERE status IN ('pending', 'running') LIMIT 1").fetchone() is None:
                return None
        with self.db.write() as con:
            rows = con.execute(self._sql(
                "SELECT j.seq, j.id, j.user_id, j.payload FROM jobs j "
                "WHERE ((j.status='pending' AND j.not_before <= ?) OR (j.status='running' AND j.lease_until < ?)) "
                "AND NOT EXISTS (SELECT 1 FROM jobs e WHERE e.user_id=j.user_id AND e.seq < j.seq "
                "AND e.status IN ('pending', 'running')) ORDER BY j.seq LIMIT 1"), (now, now)).fetchall()
            if not rows:
                return None
            seq, job_id, user, payload = rows[0]
            cur = con.execute(self._sql(
                "UPDATE jobs SET status='running', owner=?, lease_until=?, attempts=attempts+1, started_at=? "
                "WHERE seq=? AND (status='pending' OR (status='running' AND lease_until < ?))"),
                (self.owner, now + self.lease_seconds, now, seq, now))
            if cur.rowcount != 1:
                return None
        conv = json.loads(payload)
        conv.pop("at", None)   # queued before Conversation lost its never-read "at"
        return self.get(job_id), Conversation.model_validate(conv)

    def _finish_sql(self) -> str:
        return self._sql("UPDATE jobs SET status=?, payload=NULL, result=?, error=?, finished_at=?, owner=NULL, "
                         "lease_until=NULL WHERE id=? AND status='running' AND owner=?")

    def run_one(self, ingest: Ingest) -> Optional[Job]:
        """Claim and apply one job; None if there was nothing to do."""
        claimed = self.claim()
        if claimed is None:
            return None
        return self.apply(ingest, *claimed)

    def apply(self, ingest: Ingest, job: Job, conv: Conversation) -> Job:
        """Apply a claimed job: done (in the ingest's transaction), retried later, or failed."""
        marked = []

        def then(tx, result: IngestResult) -> None:   # inside the ingest's own transaction: exactly once
            cur = tx.con.execute(self._finish_sql(),
                                 ("done", json.dumps(summary(result)), None, self.clock(), job.id, self.owner))
            if cur.rowcount != 1:
                raise LeaseLost(f"job {job.id}: lease lost to another worker")
            marked.append(True)

        try:
            result = ingest(conv, job.user, then=then)
            if not marked:   # nothing to write (no candidate allowed): no store transaction was opened
                self._finish(job, "done", json.dumps(summary(result)), None)
        except LeaseLost as e:
            log.warning("%s; the ingest was rolled back", e)
        except Exception as e:  # noqa: BLE001 - a job's failure must never stop the queue
            if _transient(e) and job.attempts < self.max_attempts:
                wait = max(getattr(e, "retry_after", 0) or 0, self.backoff * 2 ** (job.attempts - 1))
                log.warning("job %s (attempt %d) failed, retrying in %.1f s: %s: %s", job.id, job.attempts, wait,
                            type(e).__name__, e)
                self._release(job, wait)
            else:
                log.error("job %s failed: %s: %s", job.id, type(e).__name__, e)
                self._finish(job, "failed", None, f"{type(e).__name__}: {e}"[:1000])
        finally:
            with self._finished:   # after the commit: `wait` reads the finished job
                self._finished.notify_all()
        return self.get(job.id)

    def _finish(self, job: Job, status: str, result: Optional[str], error: Optional[str]) -> None:
        with self.db.write() as con:
            con.execute(self._finish_sql(), (status, result, error, self.clock(), job.id, self.owner))

    def _release(self, job: Job, wait: float) -> None:
        with self.db.write() as con:
            con.execute(self._sql("UPDATE jobs SET status='pending', owner=NULL, lease_until=NULL, not_before=? "
                                  "WHERE id=? AND owner=?"), (self.clock() + wait, job.id, self.owner))

    def drain(self, ingest: Ingest, timeout: Optional[float] = None) -> int:
        """Run jobs in this thread until none is ready (or `timeout` passes); returns how many ran."""
        end = None if timeout is None else time.monotonic() + timeout
        n = 0
        while end is None or time.monotonic() < end:
            if self.run_one(ingest) is None:
                break
            n += 1
        return n

    # --- the background worker --------------------------------------------------------------------
    def start(self, ingest: Ingest, poll_seconds: float = 0.5) -> None:
        """Start the worker thread (once), applying jobs through `ingest`."""
        with self._start_lock:
            if self._worker is not None and self._worker.is_alive():
                return
            self._stop.clear()
            self._worker = threading.Thread(target=self._loop, args=(ingest, poll_seconds),
                                            name="boundmem-jobs", daemon=True)
            self._worker.start()

    def _loop(self, ingest: Ingest, poll_seconds: float) -> None:
        from .store.base import StoreClosed

        _lower_priority(self.nice)
        while not self._stop.is_set():
            try:
                ran = self.run_one(ingest)
            except StoreClosed:   # the store went away under the worker (closed by its owner): nothing left to do
                log.info("job worker: the store was closed; stopping")
                return
            except Exception:  # noqa: BLE001 - e.g. the store busy while claiming: wait and go on
                log.exception("job worker: claiming a job failed")
                ran = None
            if ran is None:
                self._wake.wait(poll_seconds)
                self._wake.clear()

    def stop(self, timeout: float = 10.0) -> None:
        with self._start_lock:
            self._stop.set()
            self._wake.set()
            if self._worker is not None:
                self._worker.join(timeout)
                self._worker = None

    def wait(self, job_id: str, timeout: Optional[float] = 30.0, poll: float = 0.05) -> Job:
        """Block until the job is done or failed: TimeoutError after `timeout`; `None` waits as long as the job
        takes (a test waits on the job, never on a time budget). A job this process runs wakes the wait at once;
        `poll` only matters for a job another process runs."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._finished:   # the worker notifies under this lock, after its commit: no wake-up is lost
                j = self.get(job_id)
                if j.finished:
                    return j
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"job {job_id} still {j.status} after {timeout:g} s")
                self._finished.wait(poll if left is None else min(poll, left))

    def close(self) -> None:
        self.stop()
        self.db.close()
