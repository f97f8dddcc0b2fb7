"""SQLite store: the embedded default. One file, WAL, one IMMEDIATE transaction per ingest.

Vector search is numpy over one user's rows: a user holds tens of preferences, so loading
them by an indexed user column and taking a dot product is faster than any ANN index.

Durability: WAL with synchronous=NORMAL. A crash of the process (kill -9) never loses or
half-applies a committed transaction; a power cut may roll back the last few commits, but the
file stays consistent (tests/store/test_store_crash.py).
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from ..models import AuditEntry, Preference, UserExport, utcnow
from .base import NotFoundError, unit
from .sql_tx import Dialect, SingleWrites, SqlTx, dim_mismatch, forget_user, row_to_pref, stack

_DDL = """
CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS preferences (
  id TEXT PRIMARY KEY, user TEXT NOT NULL, main TEXT NOT NULL, sub TEXT NOT NULL, detail TEXT NOT NULL,
  attribute TEXT NOT NULL, sentence TEXT NOT NULL, conversation_id TEXT,
  created_at TEXT NOT NULL, updated_at TEXT NOT NULL, embedding BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS preferences_user ON preferences(user, main, sub, detail);
CREATE TABLE IF NOT EXISTS opt_outs (user TEXT NOT NULL, prefix TEXT NOT NULL, at TEXT NOT NULL, PRIMARY KEY (user, prefix));
CREATE TABLE IF NOT EXISTS audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, user TEXT NOT NULL, op TEXT NOT NULL, preference_id TEXT,
  before TEXT, after TEXT, cause TEXT NOT NULL, at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS audit_user ON audit(user, seq);
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_erase_only BEFORE UPDATE ON audit
  WHEN NEW.seq IS NOT OLD.seq OR NEW.user IS NOT OLD.user OR NEW.op IS NOT OLD.op
    OR NEW.preference_id IS NOT OLD.preference_id OR NEW.at IS NOT OLD.at
    OR NEW.before IS NOT NULL OR NEW.after IS NOT NULL OR NEW.cause IS NOT 'erased'
  BEGIN SELECT RAISE(ABORT, 'audit log is append-only: an entry can only be erased (forget), not rewritten'); END;
"""

_COLS = "id, user, main, sub, detail, attribute, sentence, conversation_id, created_at, updated_at"
# created_at alone ties when two rows land in the same microsecond; rowid keeps insertion order
_ORDER = "ORDER BY created_at, rowid"


DIALECT = Dialect(param="?", user_col="user", order=_ORDER, stored_dim="length(embedding) / 4", distinct="IS NOT",
                  now=lambda: utcnow().isoformat(), json=json.dumps, vector=lambda v: v.tobytes())


class SQLiteStore(SingleWrites):
    """A Store on one SQLite file. Safe to share between threads; each process opens its own.

    Connections are per thread (sqlite3 objects must not be used by two threads at once) and
    per process: a connection inherited through fork() is abandoned, never used or closed, since
    SQLite forbids carrying an open connection across fork. ":memory:" is one private database
    shared by all threads of this object through a single connection under a lock.
    """

    def __init__(self, path: str | Path = "boundmem.db", timeout: float = 60.0):
        self.path = str(path)
        self.memory = self.path == ":memory:"
        if not self.memory:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self._local = threading.local()
        self._all: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._lock = threading.Lock()
        self._mem_lock = threading.RLock()  # serialises use of the one :memory: connection
        self._shared: Optional[sqlite3.Connection] = None
        self._pid = os.getpid()
        with self._use() as con:
            con.executescript(_DDL)

    def _open(self) -> sqlite3.Connection:
        con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        if not self.memory:
            con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        con.execute("PRAGMA foreign_keys=ON")
        with self._lock:
            # one connection per thread: close those of threads that have ended (thread pools recycle)
            dead = [c for t, c in self._all if not t.is_alive()]
            self._all = [(t, c) for t, c in self._all if t.is_alive()]
            self._all.append((threading.current_thread(), con))
        for c in dead:
            c.close()
        return con

    def _con(self) -> sqlite3.Connection:
        if self._pid != os.getpid():  # forked: start afresh, leave the parent's connections alone
            self._pid, self._local, self._all, self._shared = os.getpid(), threading.local(), [], None
        if self.memory:
            if self._shared is None:
                self._shared = self._open()
            return self._shared
        con = getattr(self._local, "con", None)
        if con is None:
            con = self._local.con = self._open()
        return con

    @contextmanager
    def _use(self) -> Iterator[sqlite3.Connection]:
        if self.memory:
            with self._mem_lock:
                yield self._con()
        else:
            yield self._con()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._use() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                if con.in_transaction:  # an error inside SQLite may already have rolled back
                    con.execute("ROLLBACK")
                raise
            try:
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:  # never leave the thread's connection stuck in a transaction
                    con.execute("ROLLBACK")
                raise

    @contextmanager
    def transaction(self, user: str) -> Iterator[SqlTx]:
        with self._write() as con:
            con.execute("INSERT OR IGNORE INTO users(id, created_at) VALUES (?, ?)", (user, utcnow().isoformat()))
            yield SqlTx(con, user, DIALECT)

    # --- reads --------------------------------------------------------------------------
    def preferences(self, user: str, prefix: Optional[str] = None) -> list[Preference]:
        with self._use() as con:
            rows = con.execute(f"SELECT {_COLS} FROM preferences WHERE user=? {_ORDER}", (user,)).fetchall()
        prefs = [row_to_pref(r) for r in rows]
        return [p for p in prefs if prefix is None or p.path.within(prefix)]

    def get(self, user: str, pref_id: str) -> Preference:
        with self._use() as con:
            r = con.execute(f"SELECT {_COLS} FROM preferences WHERE id=? AND user=?", (pref_id, user)).fetchone()
        if r is None:
            raise NotFoundError(f"no preference {pref_id!r} for user {user!r}")
        return row_to_pref(r)

    def vectors(self, user: str) -> tuple[list[Preference], np.ndarray]:
        with self._use() as con:
            rows = con.execute(f"SELECT {_COLS}, embedding FROM preferences WHERE user=? {_ORDER}", (user,)).fetchall()
        prefs = [row_to_pref(r) for r in rows]
        return prefs, stack(user, [np.frombuffer(r[10], dtype=np.float32) for r in rows])

    def search(self, user, query, k, exclude_prefixes=()) -> list[tuple[Preference, float]]:
        prefs, mat = self.vectors(user)
        if not prefs or k <= 0:
            return []
        keep = [i for i, p in enumerate(prefs) if not any(p.path.within(x) for x in exclude_prefixes)]
        if not keep:
            return []
        q = unit(query)
        if mat.shape[1] != len(q):
            raise dim_mismatch(user, mat.shape[1], len(q))
        scores = mat[keep] @ q
        order = np.argsort(-scores, kind="stable")[:k]
        return [(prefs[keep[i]], float(scores[i])) for i in order]

    def opt_outs(self, user: str) -> list[str]:
        with self._use() as con:
            return [r[0] for r in con.execute("SELECT prefix FROM opt_outs WHERE user=? ORDER BY prefix", (user,))]

    def audit(self, user: str) -> list[AuditEntry]:
        with self._use() as con:
            rows = con.execute("SELECT seq, user, op, preference_id, before, after, cause, at FROM audit "
                               "WHERE user=? ORDER BY seq", (user,)).fetchall()
        return [AuditEntry(seq=r[0], user=r[1], op=r[2], preference_id=r[3], before=json.loads(r[4]) if r[4] else None,
                           after=json.loads(r[5]) if r[5] else None, cause=r[6], at=r[7]) for r in rows]

    def users(self) -> list[str]:
        with self._use() as con:
            return [r[0] for r in con.execute("SELECT id FROM users ORDER BY id")]

    def export(self, user: str) -> UserExport:
        with self._use() as con:
            con.execute("BEGIN")  # one consistent snapshot across the three reads
            try:
                return UserExport(user=user, exported_at=utcnow(), opt_outs=self.opt_outs(user),
                                  preferences=self.preferences(user), audit=self.audit(user))
            finally:
                con.execute("COMMIT")

    # --- writes outside ingest (delete, opt_out, opt_in: SingleWrites) ---------------------
    def forget(self, user: str, cause: str) -> int:
        with self._write() as con:
            return forget_user(con, DIALECT, user, cause)

    def close(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        if self._pid == os.getpid():
            for _, c in conns:
                try:
                    c.close()
                except Exception:
                    pass
        self._local, self._shared = threading.local(), None
