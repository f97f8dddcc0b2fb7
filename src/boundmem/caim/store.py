"""CAIM's SQLite file: per-user short-term memory (the open session), long-term thoughts and their source turns.

Its own tables (prefixed caim_) so it can share a file with the preference store or live alone, and so the
`boundmem caim` CLI works across processes. Every query carries the user id, and each post-thinking run is one
IMMEDIATE transaction: a crash or a bad LLM reply mid-way leaves long-term memory as it was.
`caim_turns` holds the dialogue turns that long-term thoughts cite as their sources (their own words are a retrieval
key beside the compressed thought, see `caim.sources`); a turn no thought cites any more is deleted with
`prune_turns`, and `forget` erases them with the rest.
"""
from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
import uuid
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Iterator, Union

from ..errors import NotFoundError
from ..store.sqlite_connect import connect, truncate_wal_nowait
from .base import DialogueTurn
from .models import Thought, ThoughtDraft, utcnow

log = logging.getLogger(__name__)

_DDL = """
CREATE TABLE IF NOT EXISTS caim_users (id TEXT PRIMARY KEY, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS caim_thoughts (
  id TEXT PRIMARY KEY, user TEXT NOT NULL REFERENCES caim_users(id), text TEXT NOT NULL, tags TEXT NOT NULL,
  day TEXT NOT NULL, sources TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS caim_thoughts_user ON caim_thoughts(user, day);
CREATE TABLE IF NOT EXISTS caim_stm (
  user TEXT NOT NULL REFERENCES caim_users(id), seq INTEGER NOT NULL, day TEXT NOT NULL, turn_id TEXT NOT NULL,
  query TEXT NOT NULL, response TEXT NOT NULL, PRIMARY KEY (user, seq));
CREATE TABLE IF NOT EXISTS caim_turns (
  user TEXT NOT NULL REFERENCES caim_users(id), turn_id TEXT NOT NULL, day TEXT NOT NULL, query TEXT NOT NULL,
  response TEXT NOT NULL, PRIMARY KEY (user, turn_id));
"""
_COLS = "id, user, text, tags, day, sources, created_at, updated_at"


def _row(r) -> Thought:
    return Thought(id=r[0], user=r[1], text=r[2], tags=tuple(json.loads(r[3])), timestamp=date.fromisoformat(r[4]),
                   source_turn_ids=tuple(json.loads(r[5])), created_at=r[6], updated_at=r[7])


class CAIMTx:
    """One user's view inside a transaction; it cannot address another user's rows."""

    def __init__(self, con: sqlite3.Connection, user: str):
        self.con, self.user = con, user
        self.erased = False  # set by forget: the store wipes the WAL after commit

    def _ensure_user(self) -> None:
        self.con.execute("INSERT OR IGNORE INTO caim_users(id, created_at) VALUES (?, ?)", (self.user, utcnow().isoformat()))

    # long-term memory
    def thoughts(self) -> list[Thought]:
        rows = self.con.execute(f"SELECT {_COLS} FROM caim_thoughts WHERE user=? ORDER BY day, created_at, id",
                                (self.user,))
        return [_row(r) for r in rows]

    def get(self, thought_id: str) -> Thought:
        r = self.con.execute(f"SELECT {_COLS} FROM caim_thoughts WHERE id=? AND user=?", (thought_id, self.user)).fetchone()
        if r is None:
            raise NotFoundError(f"no thought {thought_id!r} for user {self.user!r}")
        return _row(r)

    def insert(self, d: ThoughtDraft) -> Thought:
        self._ensure_user()
        now = utcnow()
        t = Thought(id=uuid.uuid4().hex, user=self.user, created_at=now, updated_at=now, **d.model_dump())
        self.con.execute(f"INSERT INTO caim_thoughts({_COLS}) VALUES (?,?,?,?,?,?,?,?)",
                         (t.id, self.user, t.text, json.dumps(list(t.tags)), t.timestamp.isoformat(),
                          json.dumps(list(t.source_turn_ids)), now.isoformat(), now.isoformat()))
        return t

    def update(self, thought_id: str, *, text: str, tags: tuple[str, ...], timestamp: date,
               sources: tuple[str, ...]) -> Thought:
        self.get(thought_id)
        now = utcnow().isoformat()
        self.con.execute("UPDATE caim_thoughts SET text=?, tags=?, day=?, sources=?, updated_at=? WHERE id=? AND user=?",
                         (text, json.dumps(list(tags)), timestamp.isoformat(), json.dumps(list(sources)), now,
                          thought_id, self.user))
        return self.get(thought_id)

    def delete(self, thought_id: str) -> Thought:
        t = self.get(thought_id)
        self.con.execute("DELETE FROM caim_thoughts WHERE id=? AND user=?", (thought_id, self.user))
        return t

    # short-term memory
    def stm(self) -> list[tuple[date, DialogueTurn]]:
        rows = self.con.execute("SELECT day, turn_id, query, response FROM caim_stm WHERE user=? ORDER BY seq", (self.user,))
        return [(date.fromisoformat(r[0]), DialogueTurn(id=r[1], query=r[2], response=r[3])) for r in rows]

    def push(self, day: date, turn: DialogueTurn) -> None:
        self._ensure_user()
        seq = self.con.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM caim_stm WHERE user=?", (self.user,)).fetchone()[0]
        self.con.execute("INSERT INTO caim_stm(user, seq, day, turn_id, query, response) VALUES (?,?,?,?,?,?)",
                         (self.user, seq, day.isoformat(), turn.id, turn.query, turn.response))

    def clear_stm(self) -> int:
        return self.con.execute("DELETE FROM caim_stm WHERE user=?", (self.user,)).rowcount

    # source turns of long-term thoughts
    def turns(self) -> list[tuple[date, DialogueTurn]]:
        rows = self.con.execute("SELECT day, turn_id, query, response FROM caim_turns WHERE user=? ORDER BY day, rowid",
                                (self.user,))
        return [(date.fromisoformat(r[0]), DialogueTurn(id=r[1], query=r[2], response=r[3])) for r in rows]

    def keep_turns(self, turns: list[tuple[date, DialogueTurn]]) -> None:
        """Store turns as sources (a turn id already held keeps its first text: ids are unique per user)."""
        self._ensure_user()
        self.con.executemany("INSERT OR IGNORE INTO caim_turns(user, turn_id, day, query, response) VALUES (?,?,?,?,?)",
                             [(self.user, t.id, d.isoformat(), t.query, t.response) for d, t in turns])

    def prune_turns(self) -> int:
        """Delete the stored turns no thought cites (their thought was superseded); returns how many."""
        cited = {s for t in self.thoughts() for s in t.source_turn_ids}
        stale = [r[0] for r in self.con.execute("SELECT turn_id FROM caim_turns WHERE user=?", (self.user,))
                 if r[0] not in cited]
        self.con.executemany("DELETE FROM caim_turns WHERE user=? AND turn_id=?", [(self.user, i) for i in stale])
        return len(stale)

    def turn_ids_on(self, day: date) -> list[str]:
        """Ids of the stored and open-session turns of one day (a new turn's index must not reuse one)."""
        rows = self.con.execute("SELECT turn_id FROM caim_turns WHERE user=? AND day=? UNION "
                                "SELECT turn_id FROM caim_stm WHERE user=? AND day=?",
                                (self.user, day.isoformat(), self.user, day.isoformat()))
        return [r[0] for r in rows]

    def forget(self) -> int:
        n = self.con.execute("DELETE FROM caim_thoughts WHERE user=?", (self.user,)).rowcount
        self.con.execute("DELETE FROM caim_turns WHERE user=?", (self.user,))
        self.clear_stm()
        self.con.execute("DELETE FROM caim_users WHERE id=?", (self.user,))
        self.erased = True
        return n


class CAIMStore:
    """SQLite persistence for CAIM. ":memory:" works for benchmarks and tests.

    Forget holds on disk: the connection runs with secure_delete=ON (freed space is zeroed), and after a
    transaction that forgot a user commits, the WAL is checkpointed into the file and truncated to zero bytes."""

    def __init__(self, path: Union[str, Path] = ":memory:"):
        self.path = str(path)
        self._con = connect(self.path, timeout=30)
        self._lock = threading.RLock()
        self._con.executescript(_DDL)
        if self.path != ":memory:":  # a process killed between a forget's commit and its WAL wipe: wipe now
            truncate_wal_nowait(self._con)

    @contextmanager
    def tx(self, user: str) -> Iterator[CAIMTx]:
        if not user or not str(user).strip():
            raise ValueError("user id is empty")
        with self._lock:
            self._con.execute("BEGIN IMMEDIATE")
            tx = CAIMTx(self._con, user)
            try:
                yield tx
            except BaseException:
                self._con.execute("ROLLBACK")
                raise
            else:
                self._con.execute("COMMIT")
            if tx.erased and self.path != ":memory:":
                self._wipe_wal()

    def _wipe_wal(self) -> None:
        """Copy the WAL into the file and truncate it, so no page image written before the forget survives in -wal."""
        for attempt in range(5):
            if not self._con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:
                return
            time.sleep(0.05 * (attempt + 1))
        log.warning("CAIM store %s: forget committed, but the WAL could not be truncated (other connections keep "
                    "reading); it is truncated at the next checkpoint", self.path)

    def thoughts(self, user: str) -> list[Thought]:
        with self.tx(user) as t:
            return t.thoughts()

    def stm(self, user: str) -> list[tuple[date, DialogueTurn]]:
        with self.tx(user) as t:
            return t.stm()

    def turns(self, user: str) -> list[tuple[date, DialogueTurn]]:
        with self.tx(user) as t:
            return t.turns()

    def users(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self._con.execute("SELECT id FROM caim_users ORDER BY id")]

    def close(self) -> None:
        with self._lock:
            self._con.close()


__all__ = ["CAIMStore", "CAIMTx"]
