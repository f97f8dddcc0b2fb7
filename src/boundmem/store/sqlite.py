"""SQLite store: the embedded default. One file, WAL, one IMMEDIATE transaction per ingest.

Vector search is numpy over one user's rows: a user holds tens of preferences, so loading
them by an indexed user column and taking a dot product is faster than any ANN index.

Durability: WAL with synchronous=NORMAL. A crash of the process (kill -9) never loses or
half-applies a committed transaction; a power cut may roll back the last few commits, but the
file stays consistent (tests/store/test_store_crash.py).
"""
from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
import zlib
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np

from ..errors import NotFoundError, StoreError
from ..models import AuditEntry, Observation, Preference, UserExport, utcnow
from .base import AuditCheck, StoreBusy, blocking_rule, is_store_busy, unit
from .sql_episodes import EpisodeReads
from .sql_jobs import SQLITE_JOBS_DDL, JobRows
from .sqlite_connect import connect, truncate_wal_nowait
from .sql_tx import (SQLITE_AUDIT_COLS, Dialect, SingleWrites, SqlTx, audit_entry, chain_subject, dim_mismatch, load_keys,
                     migrate_legacy, POLARITY_MIGRATION, row_to_obs, row_to_pref, stack, verify_log)

log = logging.getLogger(__name__)

# Clustered by user: the rowid (`key`) is the user's block (2^16 keys, a fresh block for a user's first row) plus
# the row's number in it, so a user's rows sit together in the table's b-tree and a recall reads a few neighbouring
# pages however many users the file holds, not one page per preference scattered by insertion time (a rowid table,
# not WITHOUT ROWID: its rows of ~1 kB stay on their page, where an index b-tree would spill them to overflow pages).
# Vectors are int8 with one float32 scale per vector (a quarter of float32, half of float16: rows of ~600 bytes, six
# to a page instead of three): the scale is 1/|q|, so a decoded vector is a unit vector again and its cosines move by
# ~1e-3, below the gaps that order a user's rows.
_PREFERENCES = """CREATE TABLE IF NOT EXISTS {name} (
      key INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, user TEXT NOT NULL, main TEXT NOT NULL, sub TEXT NOT NULL,
      detail TEXT NOT NULL, attribute TEXT NOT NULL, sentence TEXT NOT NULL, conversation_id TEXT,
      created_at TEXT NOT NULL, updated_at TEXT NOT NULL, embedding BLOB NOT NULL,
      polarity TEXT NOT NULL DEFAULT 'like')"""
BLOCK = 1 << 16  # keys per user block
VECTOR_FORMAT = "int8"  # meta 'vector_format'; a file without it holds float16 vectors (converted on open)


def encode_vectors(mat: np.ndarray) -> list[bytes]:
    """Unit vectors (rows) as stored: a float32 scale then int8 components, the scale making the decoded vector unit."""
    m = np.atleast_2d(np.asarray(mat, dtype=np.float32))
    top = np.abs(m).max(axis=1, keepdims=True)
    q = np.rint(m * np.divide(127.0, top, out=np.zeros_like(top), where=top > 0)).astype(np.int8)
    norm = np.linalg.norm(q.astype(np.float32), axis=1, keepdims=True)
    scale = np.divide(1.0, norm, out=np.zeros_like(norm), where=norm > 0).astype(np.float32)
    return [sc.tobytes() + row.tobytes() for sc, row in zip(scale, q)]


def encode_vector(v: np.ndarray) -> bytes:
    return encode_vectors(v)[0]


def decode_vectors(blobs: list[bytes]) -> np.ndarray:
    """Stored vectors back to a float32 matrix (one row each; all of one dimension, which the store enforces)."""
    if not blobs:
        return np.zeros((0, 0), dtype=np.float32)
    raw = np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(blobs), -1)
    return raw[:, 4:].astype(np.float32) * raw[:, :4].copy().view(np.float32)


def decode_vector(blob: bytes) -> np.ndarray:
    return decode_vectors([blob])[0]


def _requantize(con: sqlite3.Connection, tables: tuple[str, ...]) -> None:
    """Convert a file's float16 vectors to the int8 format, in the transaction that opens it."""
    for table in tables:
        rows = con.execute(f"SELECT rowid, embedding FROM {table}").fetchall()
        for (rowid, _), blob in zip(rows, encode_vectors(np.array([np.frombuffer(b, dtype=np.float16) for _, b in rows],
                                                                   dtype=np.float32)) if rows else []):
            con.execute(f"UPDATE {table} SET embedding=? WHERE rowid=?", (blob, rowid))

_DDL = [
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY, created_at TEXT NOT NULL, forgotten_at TEXT)",
    _PREFERENCES.format(name="preferences"),
    # a user's rows are found by the user alone (a few dozen, filtered by path in Python where asked): an index of
    # (user, main, sub, detail) cost ~100 bytes a preference for no faster search
    "DROP INDEX IF EXISTS preferences_user",
    "CREATE INDEX IF NOT EXISTS preferences_by_user ON preferences(user)",
    """CREATE TABLE IF NOT EXISTS observations (
      id TEXT PRIMARY KEY, user TEXT NOT NULL, main TEXT NOT NULL, sub TEXT NOT NULL, detail TEXT NOT NULL,
      attribute TEXT NOT NULL, polarity TEXT NOT NULL, sentence TEXT NOT NULL, conversation_id TEXT,
      created_at TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS observations_user ON observations(user, main, sub, detail)",
    """CREATE TABLE IF NOT EXISTS opt_outs (subject TEXT NOT NULL, prefix TEXT NOT NULL, at TEXT NOT NULL,
      PRIMARY KEY (subject, prefix))""",
    """CREATE TABLE IF NOT EXISTS episodes (
      id TEXT PRIMARY KEY, user TEXT NOT NULL, text TEXT NOT NULL, tags TEXT NOT NULL, day TEXT NOT NULL,
      term TEXT NOT NULL, sources TEXT NOT NULL, conversation_id TEXT, created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL, embedding BLOB NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS episodes_user ON episodes(user, day)",
    """CREATE TABLE IF NOT EXISTS episode_opt_outs (subject TEXT NOT NULL, prefix TEXT NOT NULL, at TEXT NOT NULL,
      PRIMARY KEY (subject, prefix))""",
    """CREATE TABLE IF NOT EXISTS audit (
      seq INTEGER PRIMARY KEY AUTOINCREMENT, subject TEXT NOT NULL, useq INTEGER NOT NULL, op TEXT NOT NULL,
      preference_id TEXT, category TEXT, why TEXT NOT NULL, before TEXT, after TEXT, cause TEXT NOT NULL,
      at TEXT NOT NULL, content_hash TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL, UNIQUE (subject, useq))""",
    # an entry is found by its preference (erasing it): the ids are unique, the subject need not be in the index
    "DROP INDEX IF EXISTS audit_preference",
    "CREATE INDEX IF NOT EXISTS audit_by_preference ON audit(preference_id) WHERE preference_id IS NOT NULL",
    "CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END",
    """CREATE TRIGGER IF NOT EXISTS audit_erase_only BEFORE UPDATE ON audit
      WHEN NEW.seq IS NOT OLD.seq OR NEW.subject IS NOT OLD.subject OR NEW.useq IS NOT OLD.useq OR NEW.op IS NOT OLD.op
        OR NEW.preference_id IS NOT OLD.preference_id OR NEW.category IS NOT OLD.category OR NEW.why IS NOT OLD.why
        OR NEW.at IS NOT OLD.at OR NEW.content_hash IS NOT OLD.content_hash OR NEW.prev_hash IS NOT OLD.prev_hash
        OR NEW.hash IS NOT OLD.hash OR NEW.before IS NOT NULL OR NEW.after IS NOT NULL OR NEW.cause IS NOT 'erased'
      BEGIN SELECT RAISE(ABORT, 'audit log is append-only: an entry can only be erased (forget), not rewritten'); END""",
]
# a file written before the audit chain (audit keyed by the raw user id): renamed aside, then copied into the new
# tables by migrate_legacy, all in the one transaction that opens the store
_LEGACY = [
    "DROP TRIGGER IF EXISTS audit_no_delete", "DROP TRIGGER IF EXISTS audit_erase_only",
    "ALTER TABLE audit RENAME TO audit_v1", "DROP INDEX IF EXISTS audit_user",
    "ALTER TABLE opt_outs RENAME TO opt_outs_v1", "ALTER TABLE users ADD COLUMN forgotten_at TEXT",
]

_COLS = "id, user, main, sub, detail, attribute, sentence, conversation_id, created_at, updated_at, polarity"
_ORDER = "ORDER BY key"  # insertion order, also when two rows land in the same microsecond


def next_key(con: Any, user: str) -> int:
    """The key of a user's next row: after their last one in their block, or the first of a fresh block."""
    last = con.execute("SELECT max(key) FROM preferences WHERE user=?", (user,)).fetchone()[0]
    if last is not None and (last + 1) % BLOCK:
        return last + 1
    top = con.execute("SELECT max(key) FROM preferences").fetchone()[0]
    return ((top or 0) // BLOCK + 1) * BLOCK


def _cluster_preferences(con: sqlite3.Connection) -> None:
    """Rewrite a file's preferences table (rows in insertion order, float32 vectors) into the clustered layout,
    inside the transaction that opens the store: each user's rows in their old order, vectors as int8. The old
    table's pages are zeroed as it is dropped (secure_delete)."""
    con.execute(_PREFERENCES.format(name="preferences_v2"))
    rows = con.execute("SELECT user, id, main, sub, detail, attribute, sentence, conversation_id, created_at, updated_at, "
                       "embedding, polarity FROM preferences ORDER BY user, created_at, rowid").fetchall()
    block, n, user = 0, 0, None
    for r in rows:
        if r[0] != user or (n + 1) % BLOCK == 0:
            block, n, user = block + 1, 0, r[0]
        n += 1
        vec = encode_vector(np.frombuffer(r[10], dtype=np.float32))
        con.execute("INSERT INTO preferences_v2(key, user, id, main, sub, detail, attribute, sentence, conversation_id, "
                    "created_at, updated_at, embedding, polarity) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (block * BLOCK + n, *r[:10], vec, r[11]))
    con.execute("DROP TABLE preferences")
    con.execute("ALTER TABLE preferences_v2 RENAME TO preferences")
    con.execute("CREATE INDEX IF NOT EXISTS preferences_by_user ON preferences(user)")


# The audit log's before/after images as stored: compact JSON deflated against a dictionary of what every image
# repeats (the field names of a preference, an observation and an episode, ISO timestamps), less than half the JSON
# text. The first byte names the format, so a later one stays readable; text payloads (files written before, or
# JSON put in by hand) are read as JSON. _ZDICT is part of format 1 and never changes.
_ZDICT = (b'"tags":[],"day":"2026-01-01","term":"","source_turn_ids":[],"text":"","prefix":"","utterance":"",'
          b'"observe","promote","dislike","polarity":"like"}"attribute":"","sentence":"I like ","conversation_id":null,'
          b'"created_at":"2026-01-01T00:00:00.000000Z","updated_at":"2026-01-01T00:00:00.000000Z",'
          b'{"id":"","user":"","path":{"main":"","sub":"","detail":""},"attribute":"')
_PACKED = b"\x01"


def pack_payload(obj: Any) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, _ZDICT)
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return _PACKED + c.compress(text) + c.flush()


def unpack_payload(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, bytes):
        if v[:1] in (b"{", b"[", b'"', b"n"):  # a text payload read as bytes
            return json.loads(v.decode("utf-8"))
        if v[:1] != _PACKED:
            raise StoreError(f"audit payload in an unknown format (first byte {v[:1]!r})")
        d = zlib.decompressobj(-15, _ZDICT)
        return json.loads(d.decompress(v[1:]) + d.flush())
    return json.loads(v)


DIALECT = Dialect(param="?", user_col="user", order=_ORDER, stored_dim="length(embedding) - 4", distinct="IS NOT",
                  now=lambda: utcnow().isoformat(), json=pack_payload, vector=encode_vector, loads=unpack_payload,
                  digest=bytes.fromhex,
                  next_key=next_key, episode_order="ORDER BY day, created_at, rowid", audit_cols=SQLITE_AUDIT_COLS)


class StoreOpenError(StoreError):
    """The store's file cannot be opened: not a SQLite database, truncated, read-only, on a full disk, ...; names
    the file and the cause (the CLI's `error:` line, exit 5; `serve` does not start)."""

    code = "store_unavailable"

    def __init__(self, path: str, cause: BaseException):
        msg = str(cause)
        low = msg.lower()
        why = ("it is not a SQLite database (or it is damaged or truncated)" if "not a database" in low or "malformed" in low
               else "the disk holding it is full" if "full" in low or getattr(cause, "errno", None) == 28
               else "it (or its directory) is read-only for this process" if "readonly" in low or "read-only" in low
               or isinstance(cause, PermissionError)
               else "it (or its directory) is read-only for this process" if "unable to open" in low
               and not os.access(Path(path).resolve().parent, os.W_OK)   # a read-only mount says only this
               else "it cannot be opened" if "unable to open" in low else msg)
        super().__init__(f"cannot open the store {path}: {why} ({type(cause).__name__}: {msg})")
        self.path = path


class SQLiteStore(SingleWrites, EpisodeReads, JobRows):
    """A Store on one SQLite file. Safe to share between threads; each process opens its own.

    Connections are per thread (sqlite3 objects must not be used by two threads at once) and
    per process: a connection inherited through fork() is abandoned, never used or closed, since
    SQLite forbids carrying an open connection across fork. ":memory:" is one private database
    shared by all threads of this object through a single connection under a lock.

    Erasure (forget, deleting a preference, an opt-out purge) is meant to hold on disk: every connection runs
    with `secure_delete=ON` (freed space is overwritten with zeros), and after each erasure commits, the WAL is
    checkpointed into the database file and truncated to zero bytes, so no older page image with the erased
    content survives in the -wal file. A write that cannot get the write lock within `timeout` seconds (another
    process holds it) raises StoreBusy instead of waiting on.
    """

    def __init__(self, path: str | Path = "boundmem.db", timeout: float = 5.0):
        self.path = str(path)
        self.memory = self.path == ":memory:"
        self.timeout = timeout
        self._local = threading.local()
        self._all: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._lock = threading.Lock()
        self._mem_lock = threading.RLock()  # serialises use of the one :memory: connection
        self._shared: Optional[sqlite3.Connection] = None
        self._pid = os.getpid()
        self._dim: Optional[int] = None
        try:
            self._open_file()
        except (sqlite3.DatabaseError, OSError) as e:
            raise StoreOpenError(self.path, e) from e

    def _open_file(self) -> None:
        """Create or migrate the tables (one transaction) and wipe a WAL left by a crash."""
        if not self.memory:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        with self._write() as con:
            legacy = "user" in {r[1] for r in con.execute("PRAGMA table_info(audit)")}
            cols = {r[1] for r in con.execute("PRAGMA table_info(preferences)")}
            for stmt in (_LEGACY if legacy else []) + _DDL + SQLITE_JOBS_DDL:
                con.execute(stmt)
            if cols and "polarity" not in cols:  # written before polarity was data
                con.execute("ALTER TABLE preferences ADD COLUMN polarity TEXT NOT NULL DEFAULT 'like'")
                con.execute(POLARITY_MIGRATION)
            if cols and "key" not in cols:  # written before the clustered layout (float32 vectors)
                _cluster_preferences(con)
            if con.execute("SELECT 1 FROM meta WHERE key='vector_format'").fetchone() is None:
                if cols:  # written before int8 vectors: float16 (but a just-clustered table is int8 already)
                    _requantize(con, ("preferences", "episodes") if "key" in cols else ("episodes",))
                con.execute("INSERT INTO meta(key, value) VALUES ('vector_format', ?)", (VECTOR_FORMAT,))
            self.keys = load_keys(con, DIALECT)
            if legacy:
                migrate_legacy(con, DIALECT, self.keys, "user")
        if not self.memory:
            with self._use() as con:  # a process killed between an erasure's commit and its WAL wipe: wipe now
                truncate_wal_nowait(con)

    def _open(self) -> sqlite3.Connection:
        con = connect(self.path, self.timeout)
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

    def _busy(self, e: sqlite3.OperationalError) -> StoreError:
        return StoreBusy(f"store {self.path} is busy: another process or thread holds its write lock "
                         f"(waited {self.timeout:g} s): {e}")

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._use() as con:
            try:
                con.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                if is_store_busy(e):
                    raise self._busy(e) from e
                raise
            try:
                yield con
            except BaseException as e:
                if con.in_transaction:  # an error inside SQLite may already have rolled back
                    con.execute("ROLLBACK")
                if isinstance(e, sqlite3.OperationalError) and "full" in str(e).lower():
                    raise self._full(e) from e
                raise
            try:
                con.execute("COMMIT")
            except BaseException as e:
                if con.in_transaction:  # never leave the thread's connection stuck in a transaction
                    con.execute("ROLLBACK")
                if isinstance(e, sqlite3.OperationalError) and is_store_busy(e):
                    raise self._busy(e) from e
                if isinstance(e, sqlite3.OperationalError) and "full" in str(e).lower():
                    raise self._full(e) from e   # the journal or the WAL could not grow at commit
                raise

    def _full(self, e: sqlite3.OperationalError) -> StoreError:
        return StoreError(f"store {self.path}: the disk holding it ({Path(self.path).resolve().parent}) is full; "
                          f"nothing of this write was kept and the store is still usable once space is freed ({e})")

    _job_param = "?"

    def _job_write(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._write()

    def _job_read(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._use()

    def _wipe_wal(self) -> None:
        """After an erasure: copy the WAL into the database file and truncate it to zero bytes, so the page images
        written before the erasure (which still hold the erased content) are gone from the -wal file.

        A reader in the middle of a transaction pins the WAL; the checkpoint waits for it (busy timeout) and is
        retried twice; if it still cannot finish, a warning is logged (the erasure itself is committed, and
        the next erasure or checkpoint truncates the WAL)."""
        if self.memory:
            return
        with self._use() as con:
            for attempt in range(3):  # each attempt waits up to the busy timeout for the readers
                busy, _, _ = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                if not busy:
                    return
                time.sleep(0.05 * (attempt + 1))
        log.warning("store %s: erasure committed, but the WAL could not be truncated (other connections keep "
                    "reading); it is truncated at the next erasure or checkpoint", self.path)

    @contextmanager
    def transaction(self, user: str) -> Iterator[SqlTx]:
        with self._write() as con:
            con.execute("INSERT OR IGNORE INTO users(id, created_at) VALUES (?, ?)", (user, utcnow().isoformat()))
            tx = SqlTx(con, user, DIALECT, self.keys)
            yield tx
        if tx.erased:
            self._wipe_wal()

    # --- reads --------------------------------------------------------------------------
    _dialect = DIALECT

    def _ep_rows(self, sql: str, params: tuple) -> list:
        with self._use() as con:
            return con.execute(sql, params).fetchall()

    _ep_vector = staticmethod(decode_vector)

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
        blobs = [r[11] for r in rows]
        if len({len(b) for b in blobs}) > 1:  # several dimensions: stack names the problem
            return prefs, stack(user, [decode_vector(b) for b in blobs])
        return prefs, decode_vectors(blobs)

    def observations(self, user: str, prefix: Optional[str] = None) -> list[Observation]:
        with self._use() as con:
            rows = con.execute(f"SELECT {DIALECT.obs_cols} FROM observations WHERE user=? ORDER BY created_at, rowid",
                               (user,)).fetchall()
        return [o for o in map(row_to_obs, rows) if prefix is None or o.path.within(prefix)]

    def embedding_dim(self) -> Optional[int]:
        """The dimension of the store's embeddings (fixed by the first vector written), or None while empty.
        Once set it never changes, so it is read from the file only until it is."""
        if self._dim is None:
            with self._use() as con:
                r = con.execute("SELECT value FROM meta WHERE key='embedding_dim'").fetchone()
            self._dim = int(r[0]) if r else None
        return self._dim

    def schema_record(self) -> Optional[str]:
        with self._use() as con:
            r = con.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        return r[0] if r else None

    def record_schema(self, record: str, replace: bool = False) -> str:
        with self._write() as con:
            con.execute("INSERT INTO meta(key, value) VALUES ('schema', ?) ON CONFLICT(key) DO "
                        + ("UPDATE SET value=excluded.value" if replace else "NOTHING"), (record,))
            return con.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0]

    def search(self, user, query, k) -> list[tuple[Preference, float]]:
        q = unit(query)
        dim = self.embedding_dim()
        if dim is not None and dim != len(q):
            raise dim_mismatch(user, dim, len(q))
        prefs, mat = self.vectors(user)
        if not prefs or k <= 0:
            return []
        opted = self.opt_outs(user)
        keep = [i for i, p in enumerate(prefs) if blocking_rule(opted, p.path) is None]
        if not keep:
            return []
        if mat.shape[1] != len(q):
            raise dim_mismatch(user, mat.shape[1], len(q))
        scores = mat[keep] @ q
        order = np.argsort(-scores, kind="stable")[:k]
        return [(prefs[keep[i]], float(scores[i])) for i in order]

    def opt_outs(self, user: str) -> list[str]:
        with self._use() as con:
            return [r[0] for r in con.execute("SELECT prefix FROM opt_outs WHERE subject=? ORDER BY prefix",
                                              (self.keys.subject(user),))]

    def audit(self, user: str) -> list[AuditEntry]:
        with self._use() as con:
            rows = con.execute(f"SELECT {SQLITE_AUDIT_COLS} FROM audit WHERE subject=? ORDER BY useq",
                               (chain_subject(con, DIALECT, self.keys, user),)).fetchall()
        return [audit_entry(user, r, DIALECT.loads) for r in rows]

    def users(self) -> list[str]:
        with self._use() as con:
            return [r[0] for r in con.execute("SELECT id FROM users WHERE forgotten_at IS NULL ORDER BY id")]

    def has_user(self, user: str) -> bool:
        with self._use() as con:
            return con.execute("SELECT 1 FROM users WHERE id=? AND forgotten_at IS NULL", (user,)).fetchone() is not None

    def export(self, user: str) -> UserExport:
        with self._use() as con:
            con.execute("BEGIN")  # one consistent snapshot across the three reads
            try:
                return UserExport(user=user, exported_at=utcnow(), opt_outs=self.opt_outs(user),
                                  preferences=self.preferences(user), audit=self.audit(user),
                                  observations=self.observations(user), episodes=self.episodes(user),
                                  episode_opt_outs=self.episode_opt_outs(user))
            finally:
                con.execute("COMMIT")

    def verify_audit(self, user: Optional[str] = None) -> AuditCheck:
        users = [user] if user is not None else self.users()
        with self._use() as con:
            con.execute("BEGIN")  # one snapshot of the whole log
            try:
                return verify_log(con, DIALECT, self.keys, users, every=user is None)
            finally:
                con.execute("COMMIT")

    # --- writes outside ingest (delete, opt_out, opt_in: SingleWrites) ---------------------
    def forget(self, user: str, cause: str) -> int:
        with self._write() as con:
            n = SqlTx(con, user, DIALECT, self.keys).forget(cause)
        self._wipe_wal()
        return n

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

