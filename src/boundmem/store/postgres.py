"""PostgreSQL store (psycopg 3 + pgvector): the same contract as SQLiteStore, for several service
processes or hosts sharing one database.

Design choices (why, not what):
- The embedding column is an untyped `vector` (no fixed dimension), so one schema serves MiniLM (384),
  HashEmbedder (256) or OpenAI (1536) installs without a migration. The dimension is a property of the
  store, recorded in `meta` by the first vector ever written and enforced on every later write and
  recall (EmbeddingDimensionError naming both dimensions): a switched embedder fails at its first write
  instead of leaving the users written before it unable to recall.
- A search reads one row, the user's block (postgres_blocks: why), not the user's rows of `preferences`, which a
  heap table scatters over the pages in the order they arrived; every write of a user rewrites the block in its
  transaction, so recall latency does not depend on how the table was filled nor needs a CLUSTER.
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
  to erase an entry's payload (forget, deleting a preference, an opt-out purge), never to rewrite it.
  Entries are kept under the user's pseudonym and hash-chained per user (see sql_tx.AuditKeys).
- Erasure: after each one the touched tables are VACUUMed (dead tuples pruned now, not whenever
  autovacuum runs; `vacuum="full"` rewrites them so no live data file keeps an erased byte). PostgreSQL
  gives no way to make its WAL, archives or replicas forget; docs/guides/privacy.md says what is and is not promised.
- A writer that waits more than `lock_timeout` seconds for a user's lock, or `pool_timeout` for a
  connection, gets StoreBusy (with a retry-after hint) instead of waiting on.
- Tables use plain names (users, preferences, observations, opt_outs, audit) like the SQLite file; give
  boundmem its own database, or a schema via the URL
  (`...?options=-csearch_path%3Dboundmem,public`).
"""
from __future__ import annotations

import os
import threading
from contextlib import ExitStack, contextmanager
from typing import Any, Iterator, Optional

import numpy as np

from ..errors import ConfigError, NotFoundError, StoreError
from ..models import AuditEntry, Observation, Preference, UserExport, utcnow
from .base import AuditCheck, StoreBusy, StoreClosed, unit
from .postgres_blocks import BLOCKS_DDL, SEARCH_FROM, rebuild_blocks, refresh_block
from .sql_episodes import EpisodeReads
from .sql_jobs import POSTGRES_JOBS_DDL, JobRows
from .sql_tx import (AUDIT_COLS, AuditKeys, Dialect, SingleWrites, SqlTx, audit_entry, chain_subject, dim_mismatch,
                     load_keys, migrate_legacy, POLARITY_MIGRATION, row_to_obs, row_to_pref, stack, verify_log)

try:
    import psycopg
    from psycopg.types.json import Jsonb
    from psycopg.types import TypeInfo
    from pgvector.psycopg.vector import register_vector_info
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError("PostgresStore needs psycopg 3, psycopg-pool and pgvector: pip install 'boundmem[postgres]'") from e

# advisory-lock namespace (first int4 key), so our locks cannot collide with another application's
_LOCK_NS = 0x626D  # "bm"

_DDL = [
    "CREATE EXTENSION IF NOT EXISTS vector",
    "CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS users (id text PRIMARY KEY, created_at timestamptz NOT NULL, forgotten_at timestamptz)",
    """CREATE TABLE IF NOT EXISTS preferences (
      seq bigint GENERATED ALWAYS AS IDENTITY,
      id text NOT NULL, user_id text NOT NULL, main text NOT NULL, sub text NOT NULL, detail text NOT NULL,
      attribute text NOT NULL, sentence text NOT NULL, conversation_id text,
      created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL, embedding vector NOT NULL,
      polarity text NOT NULL DEFAULT 'like', PRIMARY KEY (user_id, id))""",
    "CREATE INDEX IF NOT EXISTS preferences_user ON preferences(user_id, main, sub, detail)",
    """CREATE TABLE IF NOT EXISTS observations (
      seq bigint GENERATED ALWAYS AS IDENTITY,
      id text NOT NULL, user_id text NOT NULL, main text NOT NULL, sub text NOT NULL, detail text NOT NULL,
      attribute text NOT NULL, polarity text NOT NULL, sentence text NOT NULL, conversation_id text,
      created_at timestamptz NOT NULL, PRIMARY KEY (user_id, id))""",
    "CREATE INDEX IF NOT EXISTS observations_user ON observations(user_id, main, sub, detail)",
    """CREATE TABLE IF NOT EXISTS opt_outs (subject text NOT NULL, prefix text NOT NULL, at timestamptz NOT NULL,
      PRIMARY KEY (subject, prefix))""",
    """CREATE TABLE IF NOT EXISTS episodes (
      seq bigint GENERATED ALWAYS AS IDENTITY,
      id text NOT NULL, user_id text NOT NULL, text text NOT NULL, tags text NOT NULL, day date NOT NULL,
      term text NOT NULL, sources text NOT NULL, conversation_id text, created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL, embedding vector NOT NULL, PRIMARY KEY (user_id, id))""",
    "CREATE INDEX IF NOT EXISTS episodes_user ON episodes(user_id, day)",
    """CREATE TABLE IF NOT EXISTS episode_opt_outs (subject text NOT NULL, prefix text NOT NULL,
      at timestamptz NOT NULL, PRIMARY KEY (subject, prefix))""",
    """CREATE TABLE IF NOT EXISTS audit (
      seq bigint GENERATED ALWAYS AS IDENTITY, subject text NOT NULL, useq bigint NOT NULL, op text NOT NULL,
      preference_id text, category text, why text NOT NULL, before jsonb, after jsonb, cause text NOT NULL,
      at timestamptz NOT NULL, content_hash text NOT NULL, prev_hash text NOT NULL, hash text NOT NULL,
      PRIMARY KEY (subject, useq))""",
    "CREATE INDEX IF NOT EXISTS audit_preference ON audit(subject, preference_id)",
    """CREATE OR REPLACE FUNCTION boundmem_audit_guard() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'UPDATE' AND NEW.seq = OLD.seq AND NEW.subject = OLD.subject AND NEW.useq = OLD.useq
         AND NEW.op = OLD.op AND NEW.preference_id IS NOT DISTINCT FROM OLD.preference_id
         AND NEW.category IS NOT DISTINCT FROM OLD.category AND NEW.why = OLD.why AND NEW.at = OLD.at
         AND NEW.content_hash = OLD.content_hash AND NEW.prev_hash = OLD.prev_hash AND NEW.hash = OLD.hash
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
# tables written before the audit chain (audit keyed by the raw user id): set aside, then copied by migrate_legacy
_LEGACY = [
    "DROP TRIGGER IF EXISTS audit_append_only ON audit", "DROP TRIGGER IF EXISTS audit_no_truncate ON audit",
    "ALTER TABLE audit RENAME TO audit_v1", "DROP INDEX IF EXISTS audit_user",
    "ALTER TABLE opt_outs RENAME TO opt_outs_v1", "ALTER TABLE opt_outs_v1 RENAME CONSTRAINT opt_outs_pkey TO opt_outs_v1_pkey",
    "ALTER TABLE audit_v1 RENAME CONSTRAINT audit_pkey TO audit_v1_pkey",
    "ALTER TABLE users ADD COLUMN IF NOT EXISTS forgotten_at timestamptz",
]
# Distributable by user (Citus: create_distributed_table(table, key)): every primary key and unique constraint of a
# table holding user data includes the table's user key, which the database requires of a distributed table.
# Files made before this had keys on id / seq alone; `_keys_by_user` rewrites them once, on open.
DISTRIBUTION_KEYS = {"users": "id", "preferences": "user_id", "preference_blocks": "user_id",
                     "observations": "user_id", "episodes": "user_id",
                     "opt_outs": "subject", "episode_opt_outs": "subject", "audit": "subject"}
_PRIMARY_KEYS = {"preferences": ("user_id", "id"), "observations": ("user_id", "id"), "episodes": ("user_id", "id"),
                 "audit": ("subject", "useq")}
_CONSTRAINTS = """SELECT c.conname, c.contype, array_agg(a.attname::text ORDER BY k.ord) FROM pg_constraint c
  CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord)
  JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
  WHERE c.conrelid = to_regclass(%s) AND c.contype IN ('p', 'u') GROUP BY c.conname, c.contype"""


def key_constraints(con, table: str) -> list[tuple[str, str, list[str]]]:
    """(name, 'p' | 'u', columns) of the table's primary key and unique constraints."""
    return [(r[0], r[1], list(r[2])) for r in con.execute(_CONSTRAINTS, (table,)).fetchall()]


def _keys_by_user(con) -> None:
    for table, pk in _PRIMARY_KEYS.items():
        found = key_constraints(con, table)
        stale = [name for name, _, cols in found if DISTRIBUTION_KEYS[table] not in cols or
                 (tuple(cols) == pk and not any(t == "p" and tuple(c) == pk for _, t, c in found))]
        if not stale:
            continue
        drops = ", ".join(f"DROP CONSTRAINT {name}" for name in stale)
        has_pk = any(t == "p" and name not in stale for name, t, _ in found)
        con.execute(f"ALTER TABLE {table} {drops}" + ("" if has_pk else f", ADD PRIMARY KEY ({', '.join(pk)})"))


# vacuumed after an erasure, so the erased rows' dead tuples are removed from the tables' pages
# (jobs: a forgotten user's queued words; preference_blocks: the copy recall reads)
_ERASED_TABLES = "preferences, preference_blocks, observations, episodes, audit, users, jobs"

_COLS = "id, user_id, main, sub, detail, attribute, sentence, conversation_id, created_at, updated_at, polarity"
_ORDER = "ORDER BY created_at, seq"
DIALECT = Dialect(param="%s", user_col="user_id", order=_ORDER, stored_dim="vector_dims(embedding)",
                  distinct="IS DISTINCT FROM", now=utcnow, json=Jsonb, vector=lambda v: v, loads=lambda v: v,
                  day=lambda d: d, episode_order="ORDER BY day, created_at, seq")


def _prefix_sql(prefix: str) -> tuple[str, list[str]]:
    """SQL condition (and params) for "path lies under prefix", the same rule as CategoryPath.within."""
    parts = [p for p in prefix.strip("/").split("/") if p]
    if not parts:
        return "TRUE", []
    if len(parts) > 3:  # deeper than a detail: no path lies under it
        return "FALSE", []
    return " AND ".join(f"{c}=%s" for c in ("main", "sub", "detail")[: len(parts)]), parts


# a preference lies under an opt-out if the prefix is its main, main/sub or main/sub/detail (store.base.blocking_rule)
# The user's opt-outs are read first and passed in, not joined: opt_outs is keyed by the user's pseudonym and
# preferences by the user id, so one query over both would touch two shards where the tables are distributed by
# user (Citus); two single-key queries are each routed to one shard. (An opt-out purges its rows in the same
# transaction, so reading it a moment earlier never lets an opted-out row through.)
_NOT_OPTED_OUT = ("NOT (main = ANY(%s) OR (main || '/' || sub) = ANY(%s) "
                  "OR (main || '/' || sub || '/' || detail) = ANY(%s))")


def _replica_keys(con, url: str) -> AuditKeys:
    """The audit keys of a database opened on a read-only replica: read as the primary wrote them, never created."""
    try:
        r = con.execute("SELECT value FROM meta WHERE key='audit_salt'").fetchone()
    except psycopg.errors.UndefinedTable:
        r = None
    if r is None:
        raise StoreError(f"{url} is a read-only replica whose primary has no boundmem tables yet: open the store on "
                         "the primary once (it creates them), then point readers at the replica")
    return AuditKeys(bytes.fromhex(r[0]))


def _vec(row_value: Any) -> np.ndarray:
    return np.asarray(row_value.to_numpy() if hasattr(row_value, "to_numpy") else row_value, dtype=np.float32)


class ReadOnlyReplica(StoreError):
    """A write asked of a store opened on a streaming replica (a hot standby), which serves reads only."""

    code = "read_only_replica"


class PostgresStore(SingleWrites, EpisodeReads, JobRows):
    """A Store on a PostgreSQL database with the pgvector extension. Safe to share between threads.

    `url` is any libpq connection string ("postgresql://user@host/db" or "host=... dbname=...").
    Connections come from a pool of at most `max_connections` (a web server's 40 worker threads must
    not hold 40 backends each, when several API servers share one database); an operation that finds
    the pool exhausted waits up to `pool_timeout` seconds. Every connection is checked when taken, so
    one killed by a server restart or an idle timeout is replaced, not handed out. After fork() the
    child builds its own pool (the parent's sockets are not its to use).
    """

    def __init__(self, url: str, connect_timeout: int = 10, max_connections: int = 10, pool_timeout: float = 30.0,
                 lock_timeout: float = 5.0, vacuum: str = "plain"):
        if vacuum not in ("plain", "full", "off"):
            raise ConfigError(f"vacuum (BOUNDMEM_PG_VACUUM) must be 'plain', 'full' or 'off', got {vacuum!r}")
        if max_connections < 1:
            raise ConfigError(f"max_connections must be at least 1, got {max_connections}")
        self.url = url
        self.connect_timeout = connect_timeout
        self.max_connections = max_connections
        self.pool_timeout = pool_timeout
        self.lock_timeout = lock_timeout
        self.vacuum = vacuum
        self.last_vacuum_error: Optional[str] = None
        self._dim: Optional[int] = None
        self._local = threading.local()
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._vector_info: Optional[TypeInfo] = None
        con = psycopg.connect(self.url, autocommit=True, connect_timeout=self.connect_timeout)
        try:
            # a hot standby (a streaming replica) serves reads only: no DDL, the keys read as the primary wrote them
            self.replica = bool(con.execute("SELECT pg_is_in_recovery()").fetchone()[0])
            if self.replica:
                self.keys = _replica_keys(con, url)
            else:
                self._create(con)
            self._vector_info = TypeInfo.fetch(con, "vector")
        finally:
            con.close()
        if self._vector_info is None:  # pragma: no cover
            raise StoreError("type 'vector' not found after CREATE EXTENSION vector")
        self._pool: Optional[ConnectionPool] = self._new_pool()

    def _create(self, con: "psycopg.Connection") -> None:
        """The tables, triggers and keys, created or brought up to date once, whichever process starts first."""
        with con.transaction():
            # several processes may start at once; CREATE ... IF NOT EXISTS is not race-free
            con.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_LOCK_NS,))
            try:
                con.execute(_DDL[0])
            except psycopg.Error as e:  # pragma: no cover - depends on the server
                raise StoreError(f"cannot enable pgvector (CREATE EXTENSION vector): {e}. Install pgvector on "
                                 "the server, or have a superuser run CREATE EXTENSION vector in this database") from e
            legacy = con.execute("SELECT 1 FROM information_schema.columns WHERE table_name='audit' "
                                 "AND column_name='user_id' AND table_schema=current_schema()").fetchone()
            cols = {r[0] for r in con.execute("SELECT column_name FROM information_schema.columns WHERE "
                                              "table_name='preferences' AND table_schema=current_schema()")}
            blocks = con.execute("SELECT to_regclass('preference_blocks')").fetchone()[0] is not None
            # the blocks' DDL only once: SET STORAGE would lock the table against every search at each opening
            for stmt in (_LEGACY if legacy else []) + _DDL[1:] + ([] if blocks else BLOCKS_DDL) + POSTGRES_JOBS_DDL:
                con.execute(stmt)
            _keys_by_user(con)
            if cols and "polarity" not in cols:  # written before polarity was data
                con.execute("ALTER TABLE preferences ADD COLUMN polarity text NOT NULL DEFAULT 'like'")
                con.execute(POLARITY_MIGRATION)
            self.keys = load_keys(con, DIALECT)
            if legacy:
                migrate_legacy(con, DIALECT, self.keys, "user_id")
            if not blocks:  # a database written before the blocks: build them once from its rows
                rebuild_blocks(con)

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
                raise StoreClosed("the store is closed")
            pool = self._pool
        with ExitStack() as stack:
            try:
                con = stack.enter_context(pool.connection())
            except PoolTimeout as e:
                raise StoreBusy(f"all {self.max_connections} database connections of this store are in use "
                                f"(waited {self.pool_timeout:g} s)") from e
            yield con

    _job_param = "%s"

    @contextmanager
    def _job_write(self) -> Iterator["psycopg.Connection"]:
        with self._conn() as con, con.transaction():
            yield con

    _job_read = _job_write

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
                # wait at most lock_timeout for the user's lock (another writer), then answer StoreBusy
                saved = con.execute("SELECT current_setting('lock_timeout'), set_config('lock_timeout', %s, true)",
                                    (f"{int(self.lock_timeout * 1000)}ms",)).fetchone()[0]
                try:
                    con.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_NS, lock_user))
                except psycopg.errors.LockNotAvailable as e:
                    raise StoreBusy(f"user {lock_user!r} is being written by another transaction "
                                    f"(waited {self.lock_timeout:g} s)") from e
                con.execute("SELECT set_config('lock_timeout', %s, true)", (saved,))
            self._local.con = con
            try:
                yield con
            finally:
                self._local.con = None

    def _writable(self) -> None:
        if self.replica:
            raise ReadOnlyReplica(f"{self.url} is a read-only replica: recall reads here, but ingest, edits, opt-outs "
                                  "and forget go to the primary")

    @contextmanager
    def _locked(self, user: str) -> Iterator["psycopg.Connection"]:
        """A write transaction of `user` (their lock held); it ends by rewriting the user's block, so a search never
        sees a block that disagrees with the rows committed with it."""
        self._writable()
        with self._begin(lock_user=user) as con:
            yield con
            refresh_block(con, user)

    @contextmanager
    def transaction(self, user: str) -> Iterator[SqlTx]:
        with self._locked(user) as con:
            con.execute("INSERT INTO users(id, created_at) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
                        (user, utcnow()))
            tx = SqlTx(con, user, DIALECT, self.keys, pin_in_tx=False)
            yield tx
        if tx.new_dim is not None:
            with self._conn() as con:
                con.execute("INSERT INTO meta(key, value) VALUES ('embedding_dim', %s) ON CONFLICT DO NOTHING",
                            (str(tx.new_dim),))
        if tx.erased:
            self._vacuum()

    # --- reads ------------------------------------------------------------------------------
    _dialect = DIALECT

    def _ep_rows(self, sql: str, params: tuple) -> list:
        return self._query(sql, params)

    _ep_vector = staticmethod(lambda stored: _vec(stored))

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
        return [row_to_pref(r) for r in rows], stack(user, [_vec(r[11]) for r in rows])

    def observations(self, user: str, prefix: Optional[str] = None) -> list[Observation]:
        cond, params = _prefix_sql(prefix or "")
        rows = self._query(f"SELECT {DIALECT.obs_cols} FROM observations WHERE user_id=%s AND {cond} "
                           "ORDER BY created_at, seq", (user, *params))
        return [row_to_obs(r) for r in rows]

    def embedding_dim(self) -> Optional[int]:
        """The dimension of the store's embeddings (fixed by the first vector written), or None while empty.
        Once set it never changes, so it is read from the database only until it is."""
        if self._dim is None:
            r = self._query("SELECT value FROM meta WHERE key='embedding_dim'")
            self._dim = int(r[0][0]) if r else None
        return self._dim

    def schema_record(self) -> Optional[str]:
        r = self._query("SELECT value FROM meta WHERE key='schema'")
        return r[0][0] if r else None

    def record_schema(self, record: str, replace: bool = False) -> str:
        self._writable()
        with self._begin() as con:
            con.execute("INSERT INTO meta(key, value) VALUES ('schema', %s) ON CONFLICT (key) DO "
                        + ("UPDATE SET value=excluded.value" if replace else "NOTHING"), (record,))
            return con.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0]

    def search(self, user, query, k) -> list[tuple[Preference, float]]:
        q = unit(query)
        dim = self.embedding_dim()
        if dim is not None and dim != len(q):
            raise dim_mismatch(user, dim, len(q))
        if k <= 0:
            return []
        try:
            opted = self.opt_outs(user)
            where, params = ("user_id=%s", (user,)) if not opted else \
                (f"user_id=%s AND {_NOT_OPTED_OUT}", (user, opted, opted, opted))
            rows = self._query(f"{SEARCH_FROM} WHERE b.{where} ORDER BY d, x.created_at, x.seq LIMIT %s",
                               (q, *params, k))
        except psycopg.errors.DataException as e:
            if "dimensions" not in str(e):
                raise
            r = self._query("SELECT vector_dims(embedding) FROM preferences WHERE user_id=%s LIMIT 1", (user,))
            raise dim_mismatch(user, r[0][0] if r else -1, len(q)) from e
        return [(row_to_pref(r), -float(r[11])) for r in rows]

    def opt_outs(self, user: str) -> list[str]:
        return [r[0] for r in self._query("SELECT prefix FROM opt_outs WHERE subject=%s ORDER BY prefix",
                                          (self.keys.subject(user),))]

    def audit(self, user: str) -> list[AuditEntry]:
        with self._conn() as con:
            subject = chain_subject(con, DIALECT, self.keys, user)
        rows = self._query(f"SELECT {AUDIT_COLS} FROM audit WHERE subject=%s ORDER BY useq", (subject,))
        return [audit_entry(user, r, DIALECT.loads) for r in rows]

    def users(self) -> list[str]:
        return [r[0] for r in self._query("SELECT id FROM users WHERE forgotten_at IS NULL ORDER BY id")]

    def has_user(self, user: str) -> bool:
        return bool(self._query("SELECT 1 FROM users WHERE id=%s AND forgotten_at IS NULL", (user,)))

    def verify_audit(self, user: Optional[str] = None) -> AuditCheck:
        users = [user] if user is not None else self.users()
        with self._begin() as con:  # one snapshot of the whole log
            con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return verify_log(con, DIALECT, self.keys, users, every=user is None)

    def export(self, user: str) -> UserExport:
        with self._begin() as con:  # one consistent snapshot across the three reads
            con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return UserExport(user=user, exported_at=utcnow(), opt_outs=self.opt_outs(user),
                              preferences=self.preferences(user), audit=self.audit(user),
                              observations=self.observations(user), episodes=self.episodes(user),
                              episode_opt_outs=self.episode_opt_outs(user))

    # --- writes outside ingest (delete, opt_out, opt_in: SingleWrites) ---------------------
    def forget(self, user: str, cause: str) -> int:
        with self._locked(user) as con:
            n = SqlTx(con, user, DIALECT, self.keys).forget(cause)
        self._vacuum()
        return n

    def _vacuum(self) -> None:
        """After an erasure, VACUUM the tables it touched and the job queue's (`vacuum="plain"`, the default): the
        erased rows' dead tuples are pruned now rather than whenever autovacuum comes by, but PostgreSQL does not zero the space they
        took, so their bytes stay in the table and index files until the space is reused. `vacuum="full"` rewrites
        the tables (VACUUM FULL: no erased byte left in any live data file, at the price of an exclusive lock on
        the tables while it runs); "off" leaves it to autovacuum. WAL segments, archives and replicas are beyond
        any of these (docs/guides/privacy.md). Best effort: a role that may not VACUUM leaves it to autovacuum
        (last_vacuum_error says why)."""
        if self.vacuum == "off":
            return
        try:
            with self._conn() as con:
                con.execute(f"VACUUM {'FULL ' if self.vacuum == 'full' else ''}{_ERASED_TABLES}")
            self.last_vacuum_error = None
        except psycopg.Error as e:  # pragma: no cover - depends on the role's rights
            self.last_vacuum_error = str(e)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None and self._pid == os.getpid():
            pool.close()
        self._local = threading.local()
