"""PostgreSQL store (psycopg 3 + pgvector): the same contract as SQLiteStore, for several service
processes or hosts sharing one database.

Design choices (why, not what):
- The embedding column is an untyped `vector` (no fixed dimension). The dimension is a property
  of one user's memory, fixed by the first vector written for that user and enforced on every
  later write (a clear StoreError otherwise). So one database serves MiniLM (384), HashEmbedder
  (256) or OpenAI (1536) installs without a migration, and a switched embedder fails loudly
  instead of producing meaningless scores.
- No ANN index: an ivfflat/hnsw index needs a fixed dimension and, combined with a per-user
  filter, pgvector applies the filter *after* the approximate scan, which loses recall. A user
  holds tens to hundreds of preferences, so an exact scan of the rows found through the indexed
  user column is both exact and fast.
- Ranking is by inner product (`<#>`) over vectors stored at unit norm, which is the cosine;
  unlike `<=>` it gives 0 rather than NaN for a zero vector, matching SQLiteStore.
- Writes of one user are serialised with `pg_advisory_xact_lock` on a hash of the user id,
  taken as the transaction's first statement. Under READ COMMITTED every later statement then
  sees what the previous holder committed, so two concurrent ingests that both read "nothing
  stored" and both append cannot happen. Different users do not wait for each other.
- The audit table is append-only by trigger: DELETE and TRUNCATE fail; UPDATE is allowed only
  to erase an entry's payload (what `forget` does), never to rewrite it.
- Tables use plain names (users, preferences, opt_outs, audit) like the SQLite file; give
  boundmem its own database, or a schema via the URL
  (`...?options=-csearch_path%3Dboundmem,public`).
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional

import numpy as np

from ..models import AuditEntry, Preference, UserExport, utcnow
from .base import NotFoundError, StoreError, unit
from .sql_tx import Dialect, SingleWrites, SqlTx, dim_mismatch, forget_user, row_to_pref, stack

try:
    import psycopg
    from psycopg.types.json import Jsonb
    from psycopg.types import TypeInfo
    from pgvector.psycopg.vector import register_vector_info
    from psycopg_pool import ConnectionPool
except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError("PostgresStore needs psycopg 3, psycopg-pool and pgvector: pip install 'boundmem[postgres]'") from e

# advisory-lock namespace (first int4 key), so our locks cannot collide with another application's
_LOCK_NS = 0x626D  # "bm"

_DDL = [
    "CREATE EXTENSION IF NOT EXISTS vector",
    "CREATE TABLE IF NOT EXISTS users (id text PRIMARY KEY, created_at timestamptz NOT NULL)",
    """CREATE TABLE IF NOT EXISTS preferences (
      seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
      id text PRIMARY KEY, user_id text NOT NULL, main text NOT NULL, sub text NOT NULL, detail text NOT NULL,
      attribute text NOT NULL, sentence text NOT NULL, conversation_id text,
      created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL, embedding vector NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS preferences_user ON preferences(user_id, main, sub, detail)",
    """CREATE TABLE IF NOT EXISTS opt_outs (user_id text NOT NULL, prefix text NOT NULL, at timestamptz NOT NULL,
      PRIMARY KEY (user_id, prefix))""",
    """CREATE TABLE IF NOT EXISTS audit (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, user_id text NOT NULL, op text NOT NULL,
      preference_id text, before jsonb, after jsonb, cause text NOT NULL, at timestamptz NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS audit_user ON audit(user_id, seq)",
    """CREATE OR REPLACE FUNCTION boundmem_audit_guard() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'UPDATE' AND NEW.seq = OLD.seq AND NEW.user_id = OLD.user_id AND NEW.op = OLD.op
         AND NEW.preference_id IS NOT DISTINCT FROM OLD.preference_id AND NEW.at = OLD.at
         AND NEW.before IS NULL AND NEW.after IS NULL AND NEW.cause = 'erased' THEN
        RETURN NEW;
      END IF;
      RAISE EXCEPTION 'audit log is append-only (% refused; entries can only be erased by forget)', TG_OP
        USING ERRCODE = 'restrict_violation';
    END $$""",
    """DO $$ BEGIN
      IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'audit_append_only'
                     AND tgrelid = to_regclass('audit')) THEN
        CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit
          FOR EACH ROW EXECUTE FUNCTION boundmem_audit_guard();
      END IF;
      IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'audit_no_truncate'
                     AND tgrelid = to_regclass('audit')) THEN
        CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
          FOR EACH STATEMENT EXECUTE FUNCTION boundmem_audit_guard();
      END IF;
    END $$""",
]

_COLS = "id, user_id, main, sub, detail, attribute, sentence, conversation_id, created_at, updated_at"
_ORDER = "ORDER BY created_at, seq"
DIALECT = Dialect(param="%s", user_col="user_id", order=_ORDER, stored_dim="vector_dims(embedding)",
                  distinct="IS DISTINCT FROM", now=utcnow, json=Jsonb, vector=lambda v: v)


def _prefix_sql(prefix: str) -> tuple[str, list[str]]:
    """SQL condition (and params) for "path lies under prefix", the same rule as CategoryPath.within."""
    parts = [p for p in prefix.strip("/").split("/") if p]
    if not parts:
        return "TRUE", []
    if len(parts) > 3:  # deeper than a detail: no path lies under it
        return "FALSE", []
    return " AND ".join(f"{c}=%s" for c in ("main", "sub", "detail")[: len(parts)]), parts


def _vec(row_value: Any) -> np.ndarray:
    return np.asarray(row_value.to_numpy() if hasattr(row_value, "to_numpy") else row_value, dtype=np.float32)


class PostgresStore(SingleWrites):
    """A Store on a PostgreSQL database with the pgvector extension. Safe to share between threads.

    `url` is any libpq connection string ("postgresql://user@host/db" or "host=... dbname=...").
    Connections come from a pool of at most `max_connections` (a web server's 40 worker threads must
    not hold 40 backends each, when several API servers share one database); an operation that finds
    the pool exhausted waits up to `pool_timeout` seconds. Every connection is checked when taken, so
    one killed by a server restart or an idle timeout is replaced, not handed out. After fork() the
    child builds its own pool (the parent's sockets are not its to use).
    """

    def __init__(self, url: str, connect_timeout: int = 10, max_connections: int = 10, pool_timeout: float = 30.0):
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        self.url = url
        self.connect_timeout = connect_timeout
        self.max_connections = max_connections
        self.pool_timeout = pool_timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._vector_info: Optional[TypeInfo] = None
        con = psycopg.connect(self.url, autocommit=True, connect_timeout=self.connect_timeout)
        try:
            with con.transaction():
                # several processes may start at once; CREATE ... IF NOT EXISTS is not race-free
                con.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_LOCK_NS,))
                try:
                    con.execute(_DDL[0])
                except psycopg.Error as e:  # pragma: no cover - depends on the server
                    raise StoreError(f"cannot enable pgvector (CREATE EXTENSION vector): {e}. Install pgvector on "
                                     "the server, or have a superuser run CREATE EXTENSION vector in this database") from e
                for stmt in _DDL[1:]:
                    con.execute(stmt)
            self._vector_info = TypeInfo.fetch(con, "vector")
        finally:
            con.close()
        if self._vector_info is None:  # pragma: no cover
            raise StoreError("type 'vector' not found after CREATE EXTENSION vector")
        self._pool: Optional[ConnectionPool] = self._new_pool()

    # --- connections ----------------------------------------------------------------------
    def _configure(self, con: "psycopg.Connection") -> None:
        con.execute("SET TIME ZONE 'UTC'")
        register_vector_info(con, self._vector_info)

    def _new_pool(self) -> "ConnectionPool":
        return ConnectionPool(self.url, min_size=1, max_size=self.max_connections, timeout=self.pool_timeout,
                              kwargs={"autocommit": True, "connect_timeout": self.connect_timeout},
                              configure=self._configure, check=ConnectionPool.check_connection,
                              name="boundmem", open=True)

    @contextmanager
    def _conn(self) -> Iterator["psycopg.Connection"]:
        """The connection of the transaction this thread is in, else one from the pool for this operation."""
        held = getattr(self._local, "con", None)
        if held is not None:
            yield held
            return
        with self._lock:
            if self._pid != os.getpid():  # forked: abandon the parent's pool, never close its sockets
                self._pid, self._local, self._pool = os.getpid(), threading.local(), self._new_pool()
            if self._pool is None:
                raise StoreError("the store is closed")
            pool = self._pool
        with pool.connection() as con:
            yield con

    def connections(self) -> int:
        """Server connections this store holds open now (for tests and monitoring)."""
        return 0 if self._pool is None else int(self._pool.get_stats().get("pool_size", 0))

    def _query(self, sql: str, params: tuple = ()) -> list:
        """A read; outside a transaction it is retried once if the connection died under it (safe: nothing written)."""
        nested = getattr(self._local, "con", None) is not None
        for attempt in (1, 2):
            with self._conn() as con:
                try:
                    return con.execute(sql, params).fetchall()
                except psycopg.OperationalError:
                    if nested or attempt == 2 or not con.broken:
                        raise
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def _begin(self, lock_user: Optional[str] = None) -> Iterator["psycopg.Connection"]:
        """BEGIN (and take the user's lock) on one pooled connection; reads of this thread run on it until
        the transaction ends. Failures roll back and propagate."""
        if getattr(self._local, "con", None) is not None:
            raise StoreError("a transaction is already open in this thread")
        with self._conn() as con, con.transaction():
            if lock_user is not None:
                con.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_NS, lock_user))
            self._local.con = con
            try:
                yield con
            finally:
                self._local.con = None

    def _locked(self, user: str):
        return self._begin(lock_user=user)

    @contextmanager
    def transaction(self, user: str) -> Iterator[SqlTx]:
        with self._locked(user) as con:
            con.execute("INSERT INTO users(id, created_at) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
                        (user, utcnow()))
            yield SqlTx(con, user, DIALECT)

    # --- reads ------------------------------------------------------------------------------
    def preferences(self, user: str, prefix: Optional[str] = None) -> list[Preference]:
        cond, params = _prefix_sql(prefix or "")
        rows = self._query(f"SELECT {_COLS} FROM preferences WHERE user_id=%s AND {cond} {_ORDER}", (user, *params))
        return [row_to_pref(r) for r in rows]

    def get(self, user: str, pref_id: str) -> Preference:
        rows = self._query(f"SELECT {_COLS} FROM preferences WHERE id=%s AND user_id=%s", (pref_id, user))
        if not rows:
            raise NotFoundError(f"no preference {pref_id!r} for user {user!r}")
        return row_to_pref(rows[0])

    def vectors(self, user: str) -> tuple[list[Preference], np.ndarray]:
        rows = self._query(f"SELECT {_COLS}, embedding FROM preferences WHERE user_id=%s {_ORDER}", (user,))
        return [row_to_pref(r) for r in rows], stack(user, [_vec(r[10]) for r in rows])

    def search(self, user, query, k, exclude_prefixes=()) -> list[tuple[Preference, float]]:
        if k <= 0:
            return []
        q = unit(query)
        conds, params = [], []
        for x in exclude_prefixes:
            c, p = _prefix_sql(x)
            conds.append(f"NOT ({c})")
            params += p
        where = " AND ".join(["user_id=%s", *conds])
        try:
            rows = self._query(f"SELECT {_COLS}, embedding <#> %s AS d FROM preferences WHERE {where} "
                               f"ORDER BY d, created_at, seq LIMIT %s", (q, user, *params, k))
        except psycopg.errors.DataException as e:
            if "dimensions" not in str(e):
                raise
            r = self._query("SELECT vector_dims(embedding) FROM preferences WHERE user_id=%s LIMIT 1", (user,))
            raise dim_mismatch(user, r[0][0] if r else -1, len(q)) from e
        return [(row_to_pref(r), -float(r[10])) for r in rows]

    def opt_outs(self, user: str) -> list[str]:
        return [r[0] for r in self._query("SELECT prefix FROM opt_outs WHERE user_id=%s ORDER BY prefix", (user,))]

    def audit(self, user: str) -> list[AuditEntry]:
        rows = self._query("SELECT seq, user_id, op, preference_id, before, after, cause, at FROM audit "
                           "WHERE user_id=%s ORDER BY seq", (user,))
        return [AuditEntry(seq=r[0], user=r[1], op=r[2], preference_id=r[3], before=r[4], after=r[5], cause=r[6],
                           at=r[7]) for r in rows]

    def users(self) -> list[str]:
        return [r[0] for r in self._query("SELECT id FROM users ORDER BY id")]

    def export(self, user: str) -> UserExport:
        with self._begin() as con:  # one consistent snapshot across the three reads
            con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return UserExport(user=user, exported_at=utcnow(), opt_outs=self.opt_outs(user),
                              preferences=self.preferences(user), audit=self.audit(user))

    # --- writes outside ingest (delete, opt_out, opt_in: SingleWrites) ---------------------
    def forget(self, user: str, cause: str) -> int:
        with self._locked(user) as con:
            return forget_user(con, DIALECT, user, cause)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None and self._pid == os.getpid():
            pool.close()
        self._local = threading.local()
