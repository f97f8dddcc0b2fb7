"""SQLite store: the embedded default. One file, WAL, one IMMEDIATE transaction per ingest.

Vector search is numpy over one user's rows: a user holds tens of preferences, so loading
them by an indexed user column and taking a dot product is faster than any ANN index.
"""
from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from ..models import AuditEntry, Preference, UserExport, utcnow
from ..schema.model import CategoryPath
from .base import NotFoundError, OptedOutError, blocking_rule, unit

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
"""

_COLS = "id, user, main, sub, detail, attribute, sentence, conversation_id, created_at, updated_at"


def _row_to_pref(r) -> Preference:
    return Preference(id=r[0], user=r[1], path=CategoryPath(main=r[2], sub=r[3], detail=r[4]), attribute=r[5],
                      sentence=r[6], conversation_id=r[7], created_at=r[8], updated_at=r[9])


def _public(p: Preference) -> dict:
    return p.model_dump(mode="json")


class _Tx:
    def __init__(self, store: "SQLiteStore", con: sqlite3.Connection, user: str):
        self.store, self.con, self.user = store, con, user
        self._opt = [r[0] for r in con.execute("SELECT prefix FROM opt_outs WHERE user=?", (user,))]

    def _audit(self, op: str, pref_id: Optional[str], before, after, cause: str) -> None:
        self.con.execute("INSERT INTO audit(user, op, preference_id, before, after, cause, at) VALUES (?,?,?,?,?,?,?)",
                         (self.user, op, pref_id, json.dumps(before) if before is not None else None,
                          json.dumps(after) if after is not None else None, cause, utcnow().isoformat()))

    def preferences(self, path: Optional[CategoryPath] = None) -> list[Preference]:
        if path is None:
            rows = self.con.execute(f"SELECT {_COLS} FROM preferences WHERE user=? ORDER BY created_at, id", (self.user,))
        else:
            rows = self.con.execute(f"SELECT {_COLS} FROM preferences WHERE user=? AND main=? AND sub=? AND detail=? "
                                    "ORDER BY created_at, id", (self.user, path.main, path.sub, path.detail))
        return [_row_to_pref(r) for r in rows]

    def _get(self, pref_id: str) -> Preference:
        r = self.con.execute(f"SELECT {_COLS} FROM preferences WHERE id=? AND user=?", (pref_id, self.user)).fetchone()
        if r is None:
            raise NotFoundError(f"no preference {pref_id!r} for user {self.user!r}")
        return _row_to_pref(r)

    def _check(self, path: CategoryPath) -> None:
        rule = blocking_rule(self._opt, path)
        if rule:
            raise OptedOutError(self.user, path, rule)

    def insert(self, path, attribute, sentence, embedding, conversation_id, cause) -> Preference:
        self._check(path)
        now = utcnow().isoformat()
        pid = uuid.uuid4().hex
        self.con.execute(f"INSERT INTO preferences({_COLS}, embedding) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                         (pid, self.user, path.main, path.sub, path.detail, attribute, sentence, conversation_id,
                          now, now, unit(embedding).tobytes()))
        p = self._get(pid)
        self._audit("insert", pid, None, _public(p), cause)
        return p

    def replace(self, pref_id, attribute, sentence, embedding, conversation_id, cause) -> Preference:
        before = self._get(pref_id)
        self._check(before.path)
        self.con.execute("UPDATE preferences SET attribute=?, sentence=?, conversation_id=?, updated_at=?, embedding=? "
                         "WHERE id=? AND user=?", (attribute, sentence, conversation_id, utcnow().isoformat(),
                                                   unit(embedding).tobytes(), pref_id, self.user))
        after = self._get(pref_id)
        self._audit("update", pref_id, _public(before), _public(after), cause)
        return after

    def delete(self, pref_id, cause) -> Preference:
        before = self._get(pref_id)
        self.con.execute("DELETE FROM preferences WHERE id=? AND user=?", (pref_id, self.user))
        self._audit("delete", pref_id, _public(before), None, cause)
        return before

    def note(self, op, cause, preference_id=None, detail=None) -> None:
        self._audit(op, preference_id, None, detail, cause)


class SQLiteStore:
    """A Store on one SQLite file. Safe to share between threads and processes."""

    def __init__(self, path: str | Path = "boundmem.db", timeout: float = 60.0):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        con = self._con()
        con.executescript(_DDL)

    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute("PRAGMA foreign_keys=ON")
            self._local.con = con
            with self._lock:
                self._all.append(con)
        return con

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        con = self._con()
        con.execute("BEGIN IMMEDIATE")
        try:
            yield con
        except BaseException:
            con.execute("ROLLBACK")
            raise
        else:
            con.execute("COMMIT")

    @contextmanager
    def transaction(self, user: str) -> Iterator[_Tx]:
        with self._write() as con:
            con.execute("INSERT OR IGNORE INTO users(id, created_at) VALUES (?, ?)", (user, utcnow().isoformat()))
            yield _Tx(self, con, user)

    # --- reads --------------------------------------------------------------------------
    def preferences(self, user: str, prefix: Optional[str] = None) -> list[Preference]:
        rows = self._con().execute(f"SELECT {_COLS} FROM preferences WHERE user=? ORDER BY created_at, id", (user,))
        prefs = [_row_to_pref(r) for r in rows]
        return [p for p in prefs if prefix is None or p.path.within(prefix)]

    def get(self, user: str, pref_id: str) -> Preference:
        r = self._con().execute(f"SELECT {_COLS} FROM preferences WHERE id=? AND user=?", (pref_id, user)).fetchone()
        if r is None:
            raise NotFoundError(f"no preference {pref_id!r} for user {user!r}")
        return _row_to_pref(r)

    def vectors(self, user: str) -> tuple[list[Preference], np.ndarray]:
        rows = self._con().execute(f"SELECT {_COLS}, embedding FROM preferences WHERE user=? ORDER BY created_at, id",
                                   (user,)).fetchall()
        prefs = [_row_to_pref(r) for r in rows]
        mat = np.vstack([np.frombuffer(r[10], dtype=np.float32) for r in rows]) if rows else np.zeros((0, 0), np.float32)
        return prefs, mat

    def search(self, user, query, k, exclude_prefixes=()) -> list[tuple[Preference, float]]:
        prefs, mat = self.vectors(user)
        if not prefs or k <= 0:
            return []
        keep = [i for i, p in enumerate(prefs) if not any(p.path.within(x) for x in exclude_prefixes)]
        if not keep:
            return []
        scores = mat[keep] @ unit(query)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(prefs[keep[i]], float(scores[i])) for i in order]

    def opt_outs(self, user: str) -> list[str]:
        return [r[0] for r in self._con().execute("SELECT prefix FROM opt_outs WHERE user=? ORDER BY prefix", (user,))]

    def audit(self, user: str) -> list[AuditEntry]:
        rows = self._con().execute("SELECT seq, user, op, preference_id, before, after, cause, at FROM audit "
                                   "WHERE user=? ORDER BY seq", (user,))
        return [AuditEntry(seq=r[0], user=r[1], op=r[2], preference_id=r[3], before=json.loads(r[4]) if r[4] else None,
                           after=json.loads(r[5]) if r[5] else None, cause=r[6], at=r[7]) for r in rows]

    def users(self) -> list[str]:
        return [r[0] for r in self._con().execute("SELECT id FROM users ORDER BY id")]

    def export(self, user: str) -> UserExport:
        con = self._con()
        con.execute("BEGIN")  # one consistent snapshot
        try:
            return UserExport(user=user, exported_at=utcnow(), opt_outs=self.opt_outs(user),
                              preferences=self.preferences(user), audit=self.audit(user))
        finally:
            con.execute("COMMIT")

    # --- writes outside ingest ----------------------------------------------------------
    def delete(self, user: str, pref_id: str, cause: str) -> Preference:
        with self.transaction(user) as tx:
            return tx.delete(pref_id, cause)

    def opt_out(self, user: str, prefix: str, cause: str) -> list[Preference]:
        with self.transaction(user) as tx:
            tx.con.execute("INSERT OR IGNORE INTO opt_outs(user, prefix, at) VALUES (?,?,?)", (user, prefix, utcnow().isoformat()))
            tx.note("opt_out", cause, detail={"prefix": prefix})
            purged = [p for p in tx.preferences() if p.path.within(prefix)]
            for p in purged:
                tx.delete(p.id, f"opt-out of {prefix}")
            return purged

    def opt_in(self, user: str, prefix: str, cause: str) -> bool:
        with self.transaction(user) as tx:
            n = tx.con.execute("DELETE FROM opt_outs WHERE user=? AND prefix=?", (user, prefix)).rowcount
            if n:
                tx.note("opt_in", cause, detail={"prefix": prefix})
            return bool(n)

    def forget(self, user: str, cause: str) -> int:
        with self._write() as con:
            n = con.execute("DELETE FROM preferences WHERE user=?", (user,)).rowcount
            con.execute("DELETE FROM opt_outs WHERE user=?", (user,))
            # the log stays append-only in shape, but the erased content must not survive in it
            con.execute("UPDATE audit SET before=NULL, after=NULL, cause='erased' WHERE user=?", (user,))
            con.execute("INSERT INTO audit(user, op, preference_id, before, after, cause, at) VALUES (?,?,?,?,?,?,?)",
                        (user, "forget", None, None, json.dumps({"preferences_erased": n}), cause, utcnow().isoformat()))
            return n

    def close(self) -> None:
        with self._lock:
            for c in self._all:
                try:
                    c.close()
                except Exception:
                    pass
            self._all.clear()
        self._local = threading.local()
