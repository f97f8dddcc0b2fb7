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

The table lives in the store's database (SQLite file or PostgreSQL) behind the store's `JobTable` contract
(store/sql_jobs.py holds its SQL, tests/store/test_jobs_contract.py runs on both): this module decides, the store
keeps, and neither reaches into the other.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from typing import Any, Callable, Optional, Protocol

from .errors import ConflictError, NotFoundError
from .models import Conversation, IngestResult
from .store.base import JobTable
from .store.sql_jobs import JOB_STATUSES as STATUSES, Job, job_time

log = logging.getLogger("boundmem.jobs")
__all__ = ["STATUSES", "Ingest", "Job", "JobNotFound", "JobQueue", "LeaseLost", "summary"]


class Ingest(Protocol):
    """What applies a job: `Memory.add`. `then(tx, result)` runs inside the ingest's own store transaction (where
    the job is marked done: exactly once); it is not called when nothing was written."""

    def __call__(self, conversation: Conversation, user: str,
                 then: Optional[Callable[[Any, IngestResult], None]] = None) -> IngestResult: ...


class JobNotFound(NotFoundError):
    """No such job (for this user)."""


class LeaseLost(ConflictError):
    """Another worker took the job over (this one's lease expired): the ingest is rolled back."""


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

    def __init__(self, store: JobTable, lease_seconds: float = 60.0, max_attempts: int = 5, backoff: float = 1.0,
                 nice: int = 10, clock: Callable[[], float] = time.time):
        self.store = store
        self.lease_seconds, self.max_attempts, self.backoff = lease_seconds, max_attempts, backoff
        self.nice = nice   # the worker thread's nice value (BOUNDMEM_JOBS_NICE; <= 0 leaves it)
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.clock = clock   # leases, backoff and timestamps: a test moves it instead of sleeping past a lease
        self._finished = threading.Condition()   # notified when a job of this process finishes (`wait`)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._worker: Optional[threading.Thread] = None
        self._start_lock = threading.Lock()

    # --- producing and reading ---------------------------------------------------------------
    def submit(self, user: str, conversation: Conversation) -> Job:
        """Queue a conversation for `user` (a store id); committed when this returns."""
        now = self.clock()
        job_id = uuid.uuid4().hex
        self.store.add_job(job_id, user, conversation.model_dump_json(), now)
        self._wake.set()
        return Job(id=job_id, user=user, status="pending", created_at=job_time(now))

    def get(self, job_id: str, user: Optional[str] = None) -> Job:
        """One job (only if it is `user`'s, when given: another user's job is 'not found')."""
        job = self.store.job(job_id)
        if job is None or (user is not None and job.user != user):
            raise JobNotFound(f"no job {job_id!r}" + (f" for user {user!r}" if user else ""))
        return job

    def of_user(self, user: str) -> list[Job]:
        """A user's jobs, oldest first (what was done, never the words)."""
        return self.store.user_jobs(user)

    def pending(self, user: Optional[str] = None) -> int:
        """Jobs not yet finished (of one user, or all)."""
        return self.store.open_jobs(user)

    def forget_user(self, user: str) -> int:
        """Drop every job of a user (run before the store's own erasure, whose WAL wipe then covers these pages)."""
        return self.store.forget_jobs(user)

    # --- consuming -----------------------------------------------------------------------------
    def claim(self) -> Optional[tuple[Job, Conversation]]:
        """Take the oldest job whose user has no earlier unfinished job (and lease it to this worker)."""
        claimed = self.store.claim_job(self.owner, self.clock(), self.lease_seconds)
        if claimed is None:
            return None
        job, payload = claimed
        conv = json.loads(payload)
        conv.pop("at", None)   # queued before Conversation lost its never-read "at"
        return job, Conversation.model_validate(conv)

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
            if not tx.finish_job(job.id, self.owner, json.dumps(summary(result)), self.clock()):
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
        self.store.finish_job(job.id, self.owner, status, result, error, self.clock())

    def _release(self, job: Job, wait: float) -> None:
        self.store.release_job(job.id, self.owner, self.clock() + wait)

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
        """Stop the worker; the connections are the store's (closed with it)."""
        self.stop()
