"""What the SQL stores share: the write half of a transaction and the row/vector helpers.

SQLite and PostgreSQL differ here only in dialect (placeholder, user column name, how a vector and a
timestamp are encoded, how a stored vector's dimension is read). The rules (opt-outs refused at write
time, one embedding dimension per user, every change audited with before/after images) live once, so
the two stores cannot drift apart; the same contract tests run against both.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from ..models import Preference
from ..schema.model import CategoryPath
from .base import NotFoundError, OptedOutError, StoreError, blocking_rule, unit


def row_to_pref(r) -> Preference:
    return Preference(id=r[0], user=r[1], path=CategoryPath(main=r[2], sub=r[3], detail=r[4]), attribute=r[5],
                      sentence=r[6], conversation_id=r[7], created_at=r[8], updated_at=r[9])


def public(p: Preference) -> dict:
    """The audit log's before/after image of a preference (JSON-safe)."""
    return p.model_dump(mode="json")


def prepare_embedding(v: np.ndarray) -> np.ndarray:
    """A finite, non-empty 1-D vector scaled to unit norm; anything else is bad input, refused before a write."""
    a = np.asarray(v, dtype=np.float32)
    if a.ndim != 1 and not (a.ndim == 2 and 1 in a.shape):
        raise ValueError(f"embedding must be one vector, got an array of shape {a.shape}")
    a = a.reshape(-1)
    if a.size == 0:
        raise ValueError("embedding is empty")
    if not np.all(np.isfinite(a)):
        raise ValueError("embedding contains NaN or infinite values")
    return unit(a)


def dim_mismatch(user: str, stored: int, got: int) -> StoreError:
    return StoreError(f"user {user!r} holds {stored}-d embeddings but got a {got}-d vector: the memory was "
                      f"filled with a different embedder; use the same one (or forget the user and re-ingest)")


def stack(user: str, vecs: list[np.ndarray]) -> np.ndarray:
    if not vecs:
        return np.zeros((0, 0), np.float32)
    dims = {len(v) for v in vecs}
    if len(dims) > 1:
        raise StoreError(f"user {user!r} holds embeddings of several dimensions {sorted(dims)}; "
                         "they were written by different embedders")
    return np.vstack(vecs).astype(np.float32, copy=False)


@dataclass(frozen=True)
class Dialect:
    param: str                            # "?" or "%s"
    user_col: str                         # "user" (SQLite) or "user_id" (PostgreSQL: user is reserved)
    order: str                            # a stable ORDER BY for one user's preferences
    stored_dim: str                       # SQL expression: the dimension of a stored embedding
    distinct: str                         # "IS NOT" (SQLite) or "IS DISTINCT FROM"
    now: Callable[[], Any]                # a timestamp as the driver stores it
    json: Callable[[Any], Any]            # a JSON value as the driver stores it
    vector: Callable[[np.ndarray], Any]   # a unit vector as the driver stores it

    @property
    def cols(self) -> str:
        return f"id, {self.user_col}, main, sub, detail, attribute, sentence, conversation_id, created_at, updated_at"

    def sql(self, statement: str) -> str:
        """Write statements with ? placeholders and {user}, {cols}, {order}, {distinct} fields."""
        s = statement.format(user=self.user_col, cols=self.cols, order=self.order, distinct=self.distinct)
        return s.replace("?", self.param) if self.param != "?" else s


class SqlTx:
    """One user's writes inside an open transaction on a DB-API connection (`con.execute` returning a cursor)."""

    def __init__(self, con: Any, user: str, dialect: Dialect):
        self.con, self.user, self.d = con, user, dialect
        self._opt = [r[0] for r in self._q("SELECT prefix FROM opt_outs WHERE {user}=?", (user,))]
        self._dim: Optional[int] = None

    def _q(self, statement: str, params: tuple = ()):
        return self.con.execute(self.d.sql(statement), params)

    def _audit(self, op: str, pref_id: Optional[str], before, after, cause: str) -> None:
        j = self.d.json
        self._q("INSERT INTO audit({user}, op, preference_id, before, after, cause, at) VALUES (?,?,?,?,?,?,?)",
                (self.user, op, pref_id, j(before) if before is not None else None,
                 j(after) if after is not None else None, cause, self.d.now()))

    def preferences(self, path: Optional[CategoryPath] = None) -> list[Preference]:
        if path is None:
            rows = self._q("SELECT {cols} FROM preferences WHERE {user}=? {order}", (self.user,))
        else:
            rows = self._q("SELECT {cols} FROM preferences WHERE {user}=? AND main=? AND sub=? AND detail=? {order}",
                           (self.user, path.main, path.sub, path.detail))
        return [row_to_pref(r) for r in rows]

    def _get(self, pref_id: str) -> Preference:
        r = self._q("SELECT {cols} FROM preferences WHERE id=? AND {user}=?", (pref_id, self.user)).fetchone()
        if r is None:
            raise NotFoundError(f"no preference {pref_id!r} for user {self.user!r}")
        return row_to_pref(r)

    def _check(self, path: CategoryPath) -> None:
        rule = blocking_rule(self._opt, path)
        if rule:
            raise OptedOutError(self.user, path, rule)

    def _vector(self, embedding: np.ndarray, replacing: Optional[str] = None):
        v = prepare_embedding(embedding)
        if self._dim is None:
            r = self._q(f"SELECT {self.d.stored_dim} FROM preferences WHERE {{user}}=? AND id {{distinct}} ? LIMIT 1",
                        (self.user, replacing)).fetchone()
            self._dim = int(r[0]) if r else None
        if self._dim is not None and self._dim != len(v):
            raise dim_mismatch(self.user, self._dim, len(v))
        self._dim = len(v)
        return self.d.vector(v)

    def insert(self, path, attribute, sentence, embedding, conversation_id, cause) -> Preference:
        self._check(path)
        vec = self._vector(embedding)
        now = self.d.now()
        pid = uuid.uuid4().hex
        self._q("INSERT INTO preferences({cols}, embedding) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (pid, self.user, path.main, path.sub, path.detail, attribute, sentence, conversation_id, now, now, vec))
        p = self._get(pid)
        self._audit("insert", pid, None, public(p), cause)
        return p

    def replace(self, pref_id, attribute, sentence, embedding, conversation_id, cause) -> Preference:
        before = self._get(pref_id)
        self._check(before.path)
        vec = self._vector(embedding, replacing=pref_id)
        self._q("UPDATE preferences SET attribute=?, sentence=?, conversation_id=?, updated_at=?, embedding=? "
                "WHERE id=? AND {user}=?", (attribute, sentence, conversation_id, self.d.now(), vec, pref_id, self.user))
        after = self._get(pref_id)
        self._audit("update", pref_id, public(before), public(after), cause)
        return after

    def delete(self, pref_id, cause) -> Preference:
        before = self._get(pref_id)
        self._q("DELETE FROM preferences WHERE id=? AND {user}=?", (pref_id, self.user))
        self._audit("delete", pref_id, public(before), None, cause)
        return before

    def note(self, op, cause, preference_id=None, detail=None) -> None:
        self._audit(op, preference_id, None, detail, cause)

    def opt_out(self, prefix: str, cause: str) -> list[Preference]:
        """Record the opt-out and purge what it covers; later writes in this transaction are refused too."""
        self._q("INSERT INTO opt_outs({user}, prefix, at) VALUES (?,?,?) ON CONFLICT DO NOTHING",
                (self.user, prefix, self.d.now()))
        self._opt.append(prefix)
        self.note("opt_out", cause, detail={"prefix": prefix})
        purged = [p for p in self.preferences() if p.path.within(prefix)]
        for p in purged:
            self.delete(p.id, f"opt-out of {prefix}")
        return purged

    def opt_in(self, prefix: str, cause: str) -> bool:
        n = self._q("DELETE FROM opt_outs WHERE {user}=? AND prefix=?", (self.user, prefix)).rowcount
        if n:
            self._opt = [p for p in self._opt if p != prefix]
            self.note("opt_in", cause, detail={"prefix": prefix})
        return bool(n)


class SingleWrites:
    """Store methods that are one-operation transactions; the store provides `transaction(user)`."""

    def delete(self, user: str, pref_id: str, cause: str) -> Preference:
        with self.transaction(user) as tx:
            return tx.delete(pref_id, cause)

    def opt_out(self, user: str, prefix: str, cause: str) -> list[Preference]:
        with self.transaction(user) as tx:
            return tx.opt_out(prefix, cause)

    def opt_in(self, user: str, prefix: str, cause: str) -> bool:
        with self.transaction(user) as tx:
            return tx.opt_in(prefix, cause)


def forget_user(con: Any, d: Dialect, user: str, cause: str) -> int:
    """Erase a user's preferences, opt-outs and audit payloads, and log that it happened (caller holds the lock).

    The audit log stays append-only in shape (its trigger allows exactly this update), but the erased
    content must not survive in it."""
    q = lambda statement, params: con.execute(d.sql(statement), params)  # noqa: E731
    n = q("DELETE FROM preferences WHERE {user}=?", (user,)).rowcount
    q("DELETE FROM opt_outs WHERE {user}=?", (user,))
    q("UPDATE audit SET before=NULL, after=NULL, cause='erased' WHERE {user}=?", (user,))
    q("INSERT INTO audit({user}, op, preference_id, before, after, cause, at) VALUES (?,?,?,?,?,?,?)",
      (user, "forget", None, None, d.json({"preferences_erased": n}), cause, d.now()))
    return n
