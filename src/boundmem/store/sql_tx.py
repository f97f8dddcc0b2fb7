"""What the SQL stores share: the write half of a transaction and the row/vector helpers.

SQLite and PostgreSQL differ here only in dialect (placeholder, user column name, how a vector and a
timestamp are encoded, how a stored vector's dimension is read). The rules (opt-outs refused at write
time, one embedding dimension per user, every change audited with before/after images) live once, so
the two stores cannot drift apart; the same contract tests run against both.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import uuid
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Optional

import numpy as np

from ..errors import NotFoundError, StoreError
from ..models import AuditEntry, Observation, Polarity, Preference
from ..schema.model import CategoryPath
from .base import (AuditCheck, EmbeddingDimensionError, OptedOutError, blocking_rule, normalise_value, opt_out_prefix,
                   stack, unit)
from .sql_episodes import EpisodeTx, EpisodeWrites
from .sql_jobs import finish_job


def row_to_pref(r) -> Preference:
    return Preference(id=r[0], user=r[1], path=CategoryPath(main=r[2], sub=r[3], detail=r[4]), attribute=r[5],
                      sentence=r[6], conversation_id=r[7], created_at=r[8], updated_at=r[9], polarity=r[10])


OBS_COLS = "id, {user}, main, sub, detail, attribute, polarity, sentence, conversation_id, created_at"


def row_to_obs(r) -> Observation:
    return Observation(id=r[0], user=r[1], path=CategoryPath(main=r[2], sub=r[3], detail=r[4]), attribute=r[5],
                       polarity=r[6], sentence=r[7], conversation_id=r[8], created_at=r[9])


def public(p: Preference | Observation) -> dict:
    """The audit log's before/after image of a preference or an observation (JSON-safe)."""
    return p.model_dump(mode="json")


# A store written before polarity was a column: dislikes were stored as the string "not X". Run once, when the
# column is added (afterwards a value may really start with "Not": a song, a band).
POLARITY_MIGRATION = ("UPDATE preferences SET attribute=substr(attribute, 5), polarity='dislike' "
                      "WHERE lower(attribute) LIKE 'not %' AND length(trim(substr(attribute, 5))) > 0")


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


def dim_mismatch(user: str, stored: int, got: int) -> EmbeddingDimensionError:
    return EmbeddingDimensionError(stored, got, (
        f"embedding dimension mismatch for user {user!r}: the store holds {stored}-d embeddings but got a {got}-d "
        f"vector (stored {stored}, given {got}): the memory was filled with a different embedder; use the same "
        f"one (or start a new store)"))


# --- the audit log's keys: pseudonyms, salted content hashes, the hash chain ---------------------
GENESIS = "0" * 64
ERASED = "erased"


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8")


def ts(at: Any) -> str:
    """A timestamp as hashed: UTC ISO 8601, whether the driver gives a datetime (PostgreSQL) or text (SQLite)."""
    if isinstance(at, str):
        at = datetime.fromisoformat(at)
    return at.astimezone(timezone.utc).isoformat()


def new_salt() -> str:
    return secrets.token_hex(32)


@dataclass(frozen=True)
class AuditKeys:
    """The store's salt (random, created with the store, kept in its meta table) and what is derived from it."""

    salt: bytes

    def subject(self, user: str) -> str:
        """The pseudonym a user's audit entries and opt-outs are kept under (and the users row after forget).

        A keyed hash: whoever holds the store can check a guessed id against it, nobody can read an id out of it."""
        return "anon-" + hmac.new(self.salt, user.encode("utf-8"), hashlib.sha256).hexdigest()[:40]

    def head(self, subject: str, seq: int, h: str) -> str:
        """The seal of a chain's head record (its last seq and hash), keyed like the chain."""
        return hmac.new(self.salt, canonical({"head": subject, "seq": seq, "hash": h}), hashlib.sha256).hexdigest()

    def content(self, before: Any, after: Any, cause: str) -> str:
        return hashlib.sha256(self.salt + canonical({"before": before, "after": after, "cause": cause})).hexdigest()

    @staticmethod
    def entry(subject: str, seq: int, op: str, preference_id: Optional[str], category: Optional[str], why: str,
              at: Any, content_hash: str, prev_hash: str) -> str:
        """An entry's chain hash: its metadata and its content's hash, never the content itself, so that erasing
        the payload (before/after/cause) leaves the chain verifiable."""
        return hashlib.sha256(canonical({"subject": subject, "seq": seq, "op": op, "preference_id": preference_id,
                                         "category": category, "why": why, "at": ts(at),
                                         "content_hash": content_hash, "prev_hash": prev_hash})).hexdigest()


def _generation_key(keys: AuditKeys, user: str) -> str:
    return f"audit_generation:{keys.subject(user)}"


def chain_subjects(con: Any, d: "Dialect", keys: AuditKeys, user: str) -> list[str]:
    """The pseudonyms of every audit chain this user id has had, oldest first; the last is the current one.

    Each `forget` closes the user's chain and starts a new generation, so a later user with the same (recycled) id
    starts a fresh, empty chain and never sees the forgotten one's entries, which stay in the log under their own
    pseudonym (verified by `verify_audit`, asked by the id or for everyone). Generation 0 is the plain pseudonym
    (stores written before generations keep theirs); the counter is kept in `meta` under that stable pseudonym,
    never under the id."""
    r = con.execute(d.sql("SELECT value FROM meta WHERE key=?"), (_generation_key(keys, user),)).fetchone()
    return [keys.subject(user) if g == 0 else keys.subject(f"{user}\x00{g}") for g in range(int(r[0]) + 1 if r else 1)]


def chain_subject(con: Any, d: "Dialect", keys: AuditKeys, user: str) -> str:
    """The pseudonym of the user's current audit chain (see chain_subjects)."""
    return chain_subjects(con, d, keys, user)[-1]


def load_keys(con: Any, d: "Dialect") -> AuditKeys:
    """The store's salt, created on first use (concurrent creators agree: the first insert wins); a store written
    before head records has its chains sealed here, once (`seal_heads`)."""
    con.execute(d.sql("INSERT INTO meta(key, value) VALUES ('audit_salt', ?) ON CONFLICT DO NOTHING"), (new_salt(),))
    keys = AuditKeys(bytes.fromhex(con.execute("SELECT value FROM meta WHERE key='audit_salt'").fetchone()[0]))
    if con.execute("SELECT 1 FROM meta WHERE key='audit_sealed'").fetchone() is None:
        seal_heads(con, d, keys)
    return keys


# --- the sealed tail: a head record per chain (last seq and hash, keyed), kept in meta apart from the rows ----------
HEAD = "audit_head:"


def write_head(con: Any, d: "Dialect", keys: AuditKeys, subject: str, seq: int, h: str) -> None:
    con.execute(d.sql("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value=excluded.value"),
                (HEAD + subject, f"{seq}:{h}:{keys.head(subject, seq, h)}"))


def seal_heads(con: Any, d: "Dialect", keys: AuditKeys) -> None:
    """Write the head record of every chain as it stands (a store from before head records), and mark the store
    sealed: from now on a chain without its head, or shorter than it, is broken."""
    for subject, in con.execute("SELECT DISTINCT subject FROM audit").fetchall():
        r = con.execute(d.sql("SELECT useq, hash FROM audit WHERE subject=? ORDER BY useq DESC LIMIT 1"), (subject,)).fetchone()
        write_head(con, d, keys, subject, int(r[0]), hexed(r[1]))
    con.execute(d.sql("INSERT INTO meta(key, value) VALUES ('audit_sealed', '1') ON CONFLICT DO NOTHING"))


def heads(con: Any, d: "Dialect") -> dict[str, str]:
    rows = con.execute(d.sql("SELECT key, value FROM meta WHERE key LIKE ?"), (HEAD + "%",)).fetchall()
    return {k[len(HEAD):]: v for k, v in rows if k.startswith(HEAD)}


def check_head(keys: AuditKeys, subject: str, rows, head: Optional[str]) -> Optional[tuple[int, str]]:
    """Whether the chain ends where its head record says: (seq, reason) if not."""
    last = (int(rows[-1][0]), hexed(rows[-1][11])) if rows else (0, GENESIS)
    if head is None:
        return (last[0], "the chain has no head record (it was removed)") if rows else None
    seq, h, mac = head.split(":", 2)
    if mac != keys.head(subject, int(seq), h):
        return int(seq), "its head record was edited (the seal does not match)"
    if (int(seq), h) != last:
        return int(seq), (f"the chain's tail was cut: its head record says entry {seq}, the last entry is {last[0]}"
                          if int(seq) > last[0] else "the chain does not end at its head record")
    return None


AUDIT_COLS = "useq, op, preference_id, category, why, before, after, cause, at, content_hash, prev_hash, hash"
# SQLite hands TEXT back decoded, so a payload edited by hand into invalid UTF-8 would fail the read itself; reading
# the payloads as bytes lets verification name the edited entry instead.
SQLITE_AUDIT_COLS = AUDIT_COLS.replace("before, after", "CAST(before AS BLOB), CAST(after AS BLOB)")


def hexed(h: Any) -> str:
    """A stored hash as the hex text it is computed and shown as (SQLite keeps the 32 bytes; older files, text)."""
    return h.hex() if isinstance(h, (bytes, bytearray, memoryview)) and not isinstance(h, str) else h


def audit_entry(user: str, r, loads: Callable[[Any], Any]) -> AuditEntry:
    """An AuditEntry from a row of AUDIT_COLS."""
    return AuditEntry(seq=r[0], user=user, op=r[1], preference_id=r[2], category=r[3], why=r[4] or "",
                      before=loads(r[5]), after=loads(r[6]), cause=r[7], at=r[8], content_hash=hexed(r[9]),
                      prev_hash=hexed(r[10]), hash=hexed(r[11]))


def verify_chain(keys: AuditKeys, subject: str, rows, loads: Callable[[Any], Any]) -> Optional[tuple[int, str]]:
    """The first broken entry of one subject's chain (rows of AUDIT_COLS in seq order): (seq, reason), or None."""
    prev, expect = GENESIS, 1
    for r in rows:
        useq, op, pid, cat, why, before, after, cause, at, ch, prev_hash, h = r
        ch, prev_hash, h = hexed(ch), hexed(prev_hash), hexed(h)
        if useq != expect:
            return (expect if useq > expect else useq,
                    f"entry {expect} is missing" if useq > expect else f"entry {useq} is duplicated or out of order")
        if prev_hash != prev:
            return useq, "does not link to the previous entry (prev_hash differs: an entry before it was removed or rewritten)"
        if h != keys.entry(subject, useq, op, pid, cat, why or "", at, ch, prev_hash):
            return useq, "its hash does not match its contents (op, preference, category, why, time or content hash was edited)"
        erased = before is None and after is None and cause == ERASED
        if not erased:
            try:
                content = keys.content(loads(before), loads(after), cause)
            except (ValueError, zlib.error, StoreError):
                return useq, "its before/after payload cannot be read (the payload was edited)"
            if ch != content:
                return useq, "its before/after/cause do not match its content hash (the payload was edited)"
        prev, expect = h, useq + 1
    return None


def verify_log(con: Any, d: "Dialect", keys: AuditKeys, users: list[str], every: bool) -> AuditCheck:
    """Verify every chain of these users (by their pseudonyms: the current one and those closed by forget), or with
    `every` of every subject in the log (also forgotten users', named by pseudonym); the caller holds one snapshot.
    `users` of the result counts the users asked for, or with `every` the chains (a recycled id is a new user)."""
    names = {subject: u for u in users for subject in chain_subjects(con, d, keys, u)}
    sealed = heads(con, d)
    subjects = sorted({r[0] for r in con.execute("SELECT DISTINCT subject FROM audit").fetchall()} | set(sealed)) \
        if every else list(names)
    count = len(subjects) if every else len(users)
    entries = 0
    for subject in subjects:
        rows = con.execute(d.sql(f"SELECT {d.audit_cols} FROM audit WHERE subject=? ORDER BY useq"), (subject,)).fetchall()
        entries += len(rows)
        broken = verify_chain(keys, subject, rows, d.loads) or check_head(keys, subject, rows, sealed.get(subject))
        if broken:
            return AuditCheck(False, entries, count, names.get(subject, subject), *broken)
    return AuditCheck(True, entries, count)


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
    loads: Callable[[Any], Any]           # a stored JSON value (or NULL) back to Python
    next_key: Optional[Callable[[Any, str], int]] = None  # a row's clustered key (SQLite), from (connection, user)
    day: Callable[[Any], Any] = lambda d: d.isoformat()   # a calendar day as the driver stores it
    digest: Callable[[str], Any] = lambda h: h            # a hex hash as the driver stores it (read back by hexed)
    episode_order: str = "ORDER BY day, created_at, id"   # a stable ORDER BY for one user's episodes
    audit_cols: str = AUDIT_COLS                          # AUDIT_COLS as this driver reads them

    @property
    def cols(self) -> str:
        return (f"id, {self.user_col}, main, sub, detail, attribute, sentence, conversation_id, created_at, "
                "updated_at, polarity")

    @property
    def obs_cols(self) -> str:
        return OBS_COLS.format(user=self.user_col)

    def sql(self, statement: str) -> str:
        """Write statements with ? placeholders and {user}, {cols}, {obs}, {order}, {distinct} fields."""
        s = statement.format(user=self.user_col, cols=self.cols, obs=self.obs_cols, order=self.order,
                             distinct=self.distinct)
        return s.replace("?", self.param) if self.param != "?" else s


class SqlTx(EpisodeTx):
    """One user's writes inside an open transaction on a DB-API connection (`con.execute` returning a cursor).

    `erased` tells the store, after commit, that content was erased in this transaction (so it can wipe what
    the database keeps outside its live pages: SQLite's WAL, PostgreSQL's dead tuples)."""

    def __init__(self, con: Any, user: str, dialect: Dialect, keys: AuditKeys,
                 pin_in_tx: bool = True):
        self.con, self.user, self.d, self.keys = con, user, dialect, keys
        self._pin_in_tx = pin_in_tx
        self.new_dim: Optional[int] = None  # with pin_in_tx=False: the dimension the store records after commit
        self.subject = keys.subject(user)   # opt-outs and the forgotten users row: stable across forget
        self.chain = chain_subject(con, dialect, keys, user)   # the audit chain: a new one after each forget
        self._opt = [r[0] for r in self._q("SELECT prefix FROM opt_outs WHERE subject=?", (self.subject,))]
        self._dim: Optional[int] = None
        self._head: Optional[tuple[int, str]] = None
        self.erased = False

    def _q(self, statement: str, params: tuple = ()):
        return self.con.execute(self.d.sql(statement), params)

    def finish_job(self, job_id: str, owner: str, result: str, now: float) -> bool:
        return finish_job(self.con, self.d.param, job_id, owner, "done", result, None, now)

    def _audit(self, op: str, pref_id: Optional[str], before, after, cause: str, category: Optional[str], why: str,
               keep_payload: bool = True, at: Any = None) -> None:
        """Append an entry to the user's chain. With keep_payload=False only the content's salted hash is kept."""
        if self._head is None:
            r = self._q("SELECT useq, hash FROM audit WHERE subject=? ORDER BY useq DESC LIMIT 1", (self.chain,)).fetchone()
            self._head = (int(r[0]), hexed(r[1])) if r else (0, GENESIS)
        seq, prev = self._head[0] + 1, self._head[1]
        at = self.d.now() if at is None else at
        content = self.keys.content(before, after, cause)
        h = self.keys.entry(self.chain, seq, op, pref_id, category, why, at, content, prev)
        if not keep_payload:
            before, after, cause = None, None, ERASED
        j = self.d.json
        self._q("INSERT INTO audit(subject, useq, op, preference_id, category, why, before, after, cause, at, "
                "content_hash, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (self.chain, seq, op, pref_id, category, why, j(before) if before is not None else None,
                 j(after) if after is not None else None, cause, at, self.d.digest(content), self.d.digest(prev),
                 self.d.digest(h)))
        self._head = (seq, h)
        write_head(self.con, self.d, self.keys, self.chain, seq, h)

    def _erase(self, condition: str = "TRUE", params: tuple = ()) -> None:
        """Blank the payload (before/after/cause) of this user's audit entries that match; their hashes stay."""
        self._q(f"UPDATE audit SET before=NULL, after=NULL, cause='{ERASED}' WHERE subject=? AND {condition} "
                f"AND (before IS NOT NULL OR after IS NOT NULL OR cause <> '{ERASED}')", (self.chain, *params))
        self.erased = True

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

    def _vector(self, embedding: np.ndarray):
        """The vector as stored; its dimension must be the store's (fixed by the first vector ever written)."""
        v = prepare_embedding(embedding)
        if self._dim is None:
            r = self._q("SELECT value FROM meta WHERE key='embedding_dim'").fetchone()
            if r is None:  # a store written before the dimension was recorded: take it from a stored row
                r = self._q(f"SELECT {self.d.stored_dim} FROM preferences LIMIT 1").fetchone()
                dim = int(r[0]) if r else len(v)
                if self._pin_in_tx:
                    self._q("INSERT INTO meta(key, value) VALUES ('embedding_dim', ?) ON CONFLICT DO NOTHING", (str(dim),))
                else:  # recorded after commit: an uncommitted meta row would make other users' first writers wait
                    self.new_dim = dim
                r = self._q("SELECT value FROM meta WHERE key='embedding_dim'").fetchone()
            self._dim = int(r[0]) if r else self.new_dim
        if self._dim != len(v):
            raise dim_mismatch(self.user, self._dim, len(v))
        return self.d.vector(v)

    def insert(self, path, attribute, sentence, embedding, conversation_id, cause,
               polarity: Polarity = "like") -> Preference:
        self._check(path)
        vec = self._vector(embedding)
        now = self.d.now()
        pid = uuid.uuid4().hex
        row = (pid, self.user, path.main, path.sub, path.detail, attribute, sentence, conversation_id, now, now,
               polarity, vec)
        if self.d.next_key is not None:
            self._q("INSERT INTO preferences({cols}, embedding, key) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (*row, self.d.next_key(self.con, self.user)))
        else:
            self._q("INSERT INTO preferences({cols}, embedding) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", row)
        p = self._get(pid)
        self._audit("insert", pid, None, public(p), cause, str(path),
                    "learned from a conversation" if conversation_id else "stored on request")
        return p

    def replace(self, pref_id, attribute, sentence, embedding, conversation_id, cause,
                polarity: Polarity = "like", why: Optional[str] = None) -> Preference:
        before = self._get(pref_id)
        self._check(before.path)
        vec = self._vector(embedding)
        self._q("UPDATE preferences SET attribute=?, sentence=?, conversation_id=?, updated_at=?, polarity=?, embedding=? "
                "WHERE id=? AND {user}=?",
                (attribute, sentence, conversation_id, self.d.now(), polarity, vec, pref_id, self.user))
        after = self._get(pref_id)
        self._audit("update", pref_id, public(before), public(after), cause, str(before.path),
                    why or ("updated from a conversation" if conversation_id else "updated on request"))
        return after

    def delete(self, pref_id, cause, why: str = "deleted on request") -> Preference:
        """Delete a preference and erase it from the audit log too: every earlier entry about it keeps only its
        metadata and content hash, and the delete entry itself records no content."""
        before = self._get(pref_id)
        self._q("DELETE FROM preferences WHERE id=? AND {user}=?", (pref_id, self.user))
        self._erase("preference_id=?", (pref_id,))
        self._audit("delete", pref_id, public(before), None, cause, str(before.path), why, keep_payload=False)
        return before

    def note(self, op, cause, preference_id=None, detail=None) -> None:
        category = None
        if preference_id is not None:
            r = self._q("SELECT main, sub, detail FROM preferences WHERE id=? AND {user}=?",
                        (preference_id, self.user)).fetchone()
            category = "/".join(r) if r else None
        self._audit(op, preference_id, None, detail, cause, category,
                    {"pass": "seen again in a conversation", "promote": "promoted from observations"}.get(op, op))

    # --- observations: one-off choices, kept apart from preferences (never recalled, never embedded) -------------
    def observe(self, path: CategoryPath, attribute: str, polarity: Polarity, sentence: str,
                conversation_id: Optional[str], cause: str) -> Observation:
        """Record a one-off choice; refused under an opt-out exactly like a preference."""
        self._check(path)
        oid = uuid.uuid4().hex
        self._q("INSERT INTO observations({obs}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (oid, self.user, path.main, path.sub, path.detail, attribute, polarity, sentence, conversation_id,
                 self.d.now()))
        o = self.observation(oid)
        self._audit("observe", oid, None, public(o), cause, str(path),
                    "observed in a conversation" if conversation_id else "observed on request")
        return o

    def observations(self, path: Optional[CategoryPath] = None) -> list[Observation]:
        """The user's observations (of one detail category if given), oldest first."""
        if path is None:
            rows = self._q("SELECT {obs} FROM observations WHERE {user}=? ORDER BY created_at, id", (self.user,))
        else:
            rows = self._q("SELECT {obs} FROM observations WHERE {user}=? AND main=? AND sub=? AND detail=? "
                           "ORDER BY created_at, id", (self.user, path.main, path.sub, path.detail))
        return [row_to_obs(r) for r in rows]

    def observation(self, obs_id: str) -> Observation:
        r = self._q("SELECT {obs} FROM observations WHERE id=? AND {user}=?", (obs_id, self.user)).fetchone()
        if r is None:
            raise NotFoundError(f"no observation {obs_id!r} for user {self.user!r}")
        return row_to_obs(r)

    def matching_observations(self, path: CategoryPath, attribute: str, polarity: Polarity) -> list[Observation]:
        """Observations of the same category, value (normalised: case, spacing, punctuation) and polarity."""
        key = normalise_value(attribute)
        return [o for o in self.observations(path) if o.polarity == polarity and normalise_value(o.attribute) == key]

    def count_conversations(self, path: CategoryPath, attribute: str, polarity: Polarity) -> int:
        """In how many distinct conversations this (category, value, polarity) was observed."""
        return len({o.conversation_id for o in self.matching_observations(path, attribute, polarity)
                    if o.conversation_id})

    def remove_observation(self, obs_id: str, op: Optional[str], cause: str, why: str) -> Observation:
        """Delete an observation and erase it from the audit log (its entries keep metadata and content hash only);
        `op` ("dismiss") is recorded without content; None records nothing (a promotion records its own entry)."""
        before = self.observation(obs_id)
        self._q("DELETE FROM observations WHERE id=? AND {user}=?", (obs_id, self.user))
        self._erase("preference_id=?", (obs_id,))
        if op is not None:
            self._audit(op, obs_id, public(before), None, cause, str(before.path), why, keep_payload=False)
        return before

    def dismiss(self, obs_id: str, cause: str, why: str = "dismissed by the user") -> Observation:
        return self.remove_observation(obs_id, "dismiss", cause, why)

    def drop_observations(self, prefix: str, cause: str, why: str) -> list[Observation]:
        """Erase the observations under a category prefix (opt-out purge, deletion of a category)."""
        gone = [o for o in self.observations() if o.path.within(prefix)]
        for o in gone:
            self.remove_observation(o.id, "dismiss", cause, why)
        return gone

    def expire_observations(self, older_than: datetime, cause: str, why: str) -> list[Observation]:
        """Erase the observations made before `older_than` (the retention period ran out)."""
        gone = [o for o in self.observations() if o.created_at < older_than]
        for o in gone:
            self.remove_observation(o.id, "dismiss", cause, why)
        return gone

    def opt_outs(self) -> list[str]:
        return list(self._opt)

    def opt_out(self, prefix: str, cause: str, utterance: Optional[str] = None) -> list[Preference]:
        """Record the opt-out and purge what it covers; later writes in this transaction are refused too.

        The opt-out is kept under the user's pseudonym, so it outlives `forget`. `utterance` (consent by voice: what
        the user said) is kept in the opt-out's audit entry as its consent record."""
        prefix = opt_out_prefix(prefix)
        self._q("INSERT INTO opt_outs(subject, prefix, at) VALUES (?,?,?) ON CONFLICT DO NOTHING",
                (self.subject, prefix, self.d.now()))
        self._opt.append(prefix)
        after = {"prefix": prefix} if utterance is None else {"prefix": prefix, "utterance": utterance}
        self._audit("opt_out", None, None, after, cause, prefix,
                    "the user opted out" if utterance is None else "the user opted out by voice")
        purged = [p for p in self.preferences() if p.path.within(prefix)]
        for p in purged:
            self.delete(p.id, f"opt-out of {prefix}", why=f"purged by the opt-out of {prefix}")
        self.drop_observations(prefix, f"opt-out of {prefix}", why=f"purged by the opt-out of {prefix}")
        return purged

    def opt_in(self, prefix: str, cause: str) -> bool:
        prefix = opt_out_prefix(prefix)
        n = self._q("DELETE FROM opt_outs WHERE subject=? AND prefix=?", (self.subject, prefix)).rowcount
        if n:
            self._opt = [p for p in self._opt if p != prefix]
            self._audit("opt_in", None, None, {"prefix": prefix}, cause, prefix, "the user opted back in")
        return bool(n)

    def forget(self, cause: str) -> int:
        """Erase the user's preferences and audit payloads and replace the user id by its pseudonym
        (the caller holds the user's lock and has not registered the user in this transaction).

        Kept: the opt-outs (consent outlives forget), the audit entries' metadata and hashes (so the log stays
        verifiable), and a users row under the pseudonym saying when the user was forgotten. The chain ends with the
        forget entry; the next write for this id starts a new chain (see chain_subject)."""
        n = self._q("DELETE FROM preferences WHERE {user}=?", (self.user,)).rowcount
        self._q("DELETE FROM observations WHERE {user}=?", (self.user,))
        episodes = self.forget_episodes()
        self._erase()
        r = self._q("SELECT created_at FROM users WHERE id=?", (self.user,)).fetchone()
        if r is not None:
            self._q("DELETE FROM users WHERE id=?", (self.user,))
            self._q("INSERT INTO users(id, created_at, forgotten_at) VALUES (?,?,?) "
                    "ON CONFLICT (id) DO UPDATE SET forgotten_at=excluded.forgotten_at", (self.subject, r[0], self.d.now()))
        self._audit("forget", None, None, {"preferences_erased": n, "episodes_erased": episodes}, cause, None,
                    "erasure of the user's memory")
        key = _generation_key(self.keys, self.user)
        r = self._q("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        self._q("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value=excluded.value",
                (key, str(int(r[0]) + 1 if r else 1)))
        self.chain, self._head = chain_subject(self.con, self.d, self.keys, self.user), None
        self.erased = True
        return n


class SingleWrites(EpisodeWrites):
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

    def dismiss(self, user: str, obs_id: str, cause: str) -> Observation:
        with self.transaction(user) as tx:
            return tx.dismiss(obs_id, cause)


_WHY = {"insert": "learned from a conversation", "update": "updated from a conversation", "delete": "deleted on request",
        "pass": "seen again in a conversation", "opt_out": "the user opted out", "opt_in": "the user opted back in",
        "forget": "erasure of the user's memory", "observe": "observed in a conversation",
        "promote": "promoted from observations", "dismiss": "dismissed by the user"}


def migrate_legacy(con: Any, d: Dialect, keys: AuditKeys, user_col: str) -> None:
    """Copy the tables of a store written before the audit chain (audit_v1, opt_outs_v1, keyed by raw user ids)
    into the new ones, chaining each user's entries in their old order, then drop the old tables."""
    q = lambda statement, params=(): con.execute(d.sql(statement), params)  # noqa: E731
    for user, prefix, at in q(f"SELECT {user_col}, prefix, at FROM opt_outs_v1").fetchall():
        q("INSERT INTO opt_outs(subject, prefix, at) VALUES (?,?,?) ON CONFLICT DO NOTHING", (keys.subject(user), prefix, at))
    rows = q(f"SELECT {user_col}, op, preference_id, before, after, cause, at FROM audit_v1 ORDER BY seq").fetchall()
    txs: dict[str, SqlTx] = {}
    for user, op, pid, before, after, cause, at in rows:
        tx = txs.get(user) or txs.setdefault(user, SqlTx(con, user, d, keys))
        before, after = d.loads(before), d.loads(after)
        path = (before or after or {}).get("path")
        category = "/".join(path[k] for k in ("main", "sub", "detail")) if isinstance(path, dict) else None
        if op in ("opt_out", "opt_in") and after:
            category = after.get("prefix")
        tx._audit(op, pid, before, after, cause, category, _WHY.get(op, op), at=at)
    q("DROP TABLE audit_v1")
    q("DROP TABLE opt_outs_v1")
