"""The job queue's table (`jobs`) behind the store contract: the SQL lives here, once for SQLite and PostgreSQL, so
the queue (`boundmem/jobs.py`) holds the policy (leases, order per user, retries) and touches no connection.

A job row keeps the conversation text only until the job finishes (`payload` set to NULL by `finish_job`); the file's
secure_delete and the store's WAL wipe after an erasure then cover its pages like any other erased content. The table
is created with the store's own schema (on PostgreSQL under the store's start-up lock: two processes starting at
once cannot race a CREATE)."""
from __future__ import annotations

import json
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional

JOB_STATUSES = ("pending", "running", "done", "failed")
_COLS = "seq, id, user_id, kind, status, result, error, attempts, created_at, started_at, finished_at"
_INDEXES = ["CREATE INDEX IF NOT EXISTS jobs_open ON jobs(status, seq)",
            "CREATE INDEX IF NOT EXISTS jobs_user ON jobs(user_id, seq)"]
SQLITE_JOBS_DDL = ["""CREATE TABLE IF NOT EXISTS jobs (
                seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL,
                kind TEXT NOT NULL, status TEXT NOT NULL, payload TEXT, result TEXT, error TEXT,
                attempts INTEGER NOT NULL DEFAULT 0, owner TEXT, lease_until REAL, not_before REAL NOT NULL DEFAULT 0,
                created_at REAL NOT NULL, started_at REAL, finished_at REAL)"""] + _INDEXES
POSTGRES_JOBS_DDL = ["""CREATE TABLE IF NOT EXISTS jobs (
                seq BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, user_id TEXT NOT NULL,
                kind TEXT NOT NULL, status TEXT NOT NULL, payload TEXT, result TEXT, error TEXT,
                attempts INTEGER NOT NULL DEFAULT 0, owner TEXT, lease_until DOUBLE PRECISION,
                not_before DOUBLE PRECISION NOT NULL DEFAULT 0, created_at DOUBLE PRECISION NOT NULL,
                started_at DOUBLE PRECISION, finished_at DOUBLE PRECISION)"""] + _INDEXES

_FINISH = ("UPDATE jobs SET status=?, payload=NULL, result=?, error=?, finished_at=?, owner=NULL, lease_until=NULL "
           "WHERE id=? AND status='running' AND owner=?")
_OPEN = "status IN ('pending', 'running')"
# a job is ready when it is pending past its backoff, or running under an expired lease (its worker died), and no
# earlier job of its user is unfinished: one user's conversations apply in submission order
_READY = ("SELECT j.seq FROM jobs j WHERE ((j.status='pending' AND j.not_before <= ?) OR "
          "(j.status='running' AND j.lease_until < ?)) AND NOT EXISTS (SELECT 1 FROM jobs e WHERE "
          f"e.user_id=j.user_id AND e.seq < j.seq AND e.{_OPEN}) ORDER BY j.seq LIMIT 1")


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


def job_time(t: Optional[float]) -> Optional[datetime]:
    return None if t is None else datetime.fromtimestamp(float(t), timezone.utc)


def _row_to_job(r) -> Job:
    seq, id_, user, kind, status, result, error, attempts, created, started, finished = r
    return Job(id=id_, user=user, status=status, kind=kind, seq=int(seq), attempts=int(attempts),
               result=json.loads(result) if result else None, error=error, created_at=job_time(created),
               started_at=job_time(started), finished_at=job_time(finished))


def _sql(statement: str, param: str) -> str:
    return statement if param == "?" else statement.replace("?", param)


def finish_job(con: Any, param: str, job_id: str, owner: str, status: str, result: Optional[str],
               error: Optional[str], now: float) -> bool:
    """Mark a running job finished on `con` (inside whatever transaction it is in); False if `owner` no longer holds
    its lease (another worker took it over)."""
    cur = con.execute(_sql(_FINISH, param), (status, result, error, now, job_id, owner))
    return cur.rowcount == 1


class JobRows:
    """The `JobTable` part of a store. The store provides `_job_param` ("?" or "%s"), `_job_write()` (a connection
    in a write transaction, committed on exit) and `_job_read()` (a connection for reads)."""

    _job_param: str

    def _job_write(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _job_read(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _jq(self, statement: str) -> str:
        return _sql(statement, self._job_param)

    def add_job(self, job_id: str, user: str, payload: str, now: float, kind: str = "conversation") -> None:
        with self._job_write() as con:
            con.execute(self._jq("INSERT INTO jobs(id, user_id, kind, status, payload, created_at) "
                                 "VALUES (?, ?, ?, 'pending', ?, ?)"), (job_id, user, kind, payload, now))

    def job(self, job_id: str) -> Optional[Job]:
        with self._job_read() as con:
            row = con.execute(self._jq(f"SELECT {_COLS} FROM jobs WHERE id=?"), (job_id,)).fetchone()
        return None if row is None else _row_to_job(row)

    def user_jobs(self, user: str) -> list[Job]:
        with self._job_read() as con:
            rows = con.execute(self._jq(f"SELECT {_COLS} FROM jobs WHERE user_id=? ORDER BY seq"), (user,)).fetchall()
        return [_row_to_job(r) for r in rows]

    def open_jobs(self, user: Optional[str] = None) -> int:
        q = f"SELECT COUNT(*) FROM jobs WHERE {_OPEN}"
        with self._job_read() as con:
            if user is None:
                return int(con.execute(q).fetchone()[0])
            return int(con.execute(self._jq(q + " AND user_id=?"), (user,)).fetchone()[0])

    def forget_jobs(self, user: str) -> int:
        with self._job_write() as con:
            cur = con.execute(self._jq("DELETE FROM jobs WHERE user_id=?"), (user,))
            return max(cur.rowcount or 0, 0)

    def claim_job(self, owner: str, now: float, lease_seconds: float) -> Optional[tuple[Job, str]]:
        with self._job_read() as con:   # idle polling takes no write lock
            if con.execute(f"SELECT 1 FROM jobs WHERE {_OPEN} LIMIT 1").fetchone() is None:
                return None
        with self._job_write() as con:
            row = con.execute(self._jq(_READY), (now, now)).fetchone()
            if row is None:
                return None
            cur = con.execute(self._jq(
                "UPDATE jobs SET status='running', owner=?, lease_until=?, attempts=attempts+1, started_at=? "
                "WHERE seq=? AND (status='pending' OR (status='running' AND lease_until < ?))"),
                (owner, now + lease_seconds, now, row[0], now))
            if cur.rowcount != 1:
                return None
            got = con.execute(self._jq(f"SELECT {_COLS}, payload FROM jobs WHERE seq=?"), (row[0],)).fetchone()
        return _row_to_job(got[:-1]), got[-1]

    def finish_job(self, job_id: str, owner: str, status: str, result: Optional[str], error: Optional[str],
                   now: float) -> bool:
        with self._job_write() as con:
            return finish_job(con, self._job_param, job_id, owner, status, result, error, now)

    def release_job(self, job_id: str, owner: str, not_before: float) -> bool:
        with self._job_write() as con:
            cur = con.execute(self._jq("UPDATE jobs SET status='pending', owner=NULL, lease_until=NULL, not_before=? "
                                       "WHERE id=? AND owner=?"), (not_before, job_id, owner))
            return cur.rowcount == 1
