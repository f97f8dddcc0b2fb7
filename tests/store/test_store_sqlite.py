"""SQLite-only behaviour: ":memory:" across threads, fork safety, the file's own guarantees."""
from __future__ import annotations

import os
import sqlite3
import threading

import numpy as np
import pytest

from boundmem.schema.model import CategoryPath
from boundmem.store.sqlite import SQLiteStore

PATH = CategoryPath(main="entertainment", sub="music", detail="genre")


def add(store, user, attribute):
    with store.transaction(user) as tx:
        return tx.insert(PATH, attribute, "", np.ones(4), None, "t")


def test_memory_database_is_shared_by_all_threads():
    """A thread pool (e.g. FastAPI's) must see one ":memory:" database, not one per thread."""
    s = SQLiteStore(":memory:")
    errors = []

    def work(n):
        try:
            for i in range(20):
                add(s, f"u{n % 2}", f"t{n}-{i}")
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(s.preferences("u0")) == 40 and len(s.preferences("u1")) == 40
    assert len(s.audit("u0")) == 40
    s.close()


def test_audit_delete_fails_even_with_raw_sql(tmp_path):
    s = SQLiteStore(tmp_path / "a.db")
    add(s, "u", "jazz")
    con = sqlite3.connect(tmp_path / "a.db")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        con.execute("DELETE FROM audit")
    con.close()
    assert len(s.audit("u")) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_opens_its_own_connection(tmp_path):
    """A connection inherited through fork() must never be used; the child reconnects transparently."""
    s = SQLiteStore(tmp_path / "f.db")
    add(s, "u", "parent-before")  # the parent now holds an open connection
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            add(s, "u", "child")
            code = 0 if len(s.preferences("u")) == 2 else 2
            s.close()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    add(s, "u", "parent-after")  # the parent's own connection still works
    assert [p.attribute for p in s.preferences("u")] == ["parent-before", "child", "parent-after"]
    assert sqlite3.connect(tmp_path / "f.db").execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    s.close()


def test_store_reopens_after_close(tmp_path):
    s = SQLiteStore(tmp_path / "r.db")
    p = add(s, "u", "jazz")
    s.close()
    assert s.preferences("u") == [p]  # a closed store reconnects lazily instead of failing
    s.close()


_V1_DDL = """
CREATE TABLE users (id TEXT PRIMARY KEY, created_at TEXT NOT NULL);
CREATE TABLE preferences (
  id TEXT PRIMARY KEY, user TEXT NOT NULL, main TEXT NOT NULL, sub TEXT NOT NULL, detail TEXT NOT NULL,
  attribute TEXT NOT NULL, sentence TEXT NOT NULL, conversation_id TEXT,
  created_at TEXT NOT NULL, updated_at TEXT NOT NULL, embedding BLOB NOT NULL);
CREATE INDEX preferences_user ON preferences(user, main, sub, detail);
CREATE TABLE opt_outs (user TEXT NOT NULL, prefix TEXT NOT NULL, at TEXT NOT NULL, PRIMARY KEY (user, prefix));
CREATE TABLE audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, user TEXT NOT NULL, op TEXT NOT NULL, preference_id TEXT,
  before TEXT, after TEXT, cause TEXT NOT NULL, at TEXT NOT NULL);
CREATE INDEX audit_user ON audit(user, seq);
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
"""


def test_a_file_from_before_the_audit_chain_is_migrated(tmp_path):
    """Audit rows keyed by raw user ids and a global sequence become per-user hash chains; opt-outs move to
    pseudonyms; nothing is lost."""
    import json

    db = tmp_path / "old.db"
    con = sqlite3.connect(db)
    con.executescript(_V1_DDL)
    at = "2026-01-01T10:00:00.000001+00:00"
    after = {"id": "p1", "user": "u", "path": {"main": "entertainment", "sub": "music", "detail": "genre"},
             "attribute": "jazz", "sentence": "I like jazz", "conversation_id": "c1", "created_at": at, "updated_at": at}
    con.execute("INSERT INTO users VALUES ('u', ?), ('v', ?)", (at, at))
    con.execute("INSERT INTO preferences VALUES ('p1','u','entertainment','music','genre','jazz','I like jazz','c1',?,?,?)",
                (at, at, np.ones(4, np.float32).tobytes()))
    con.execute("INSERT INTO opt_outs VALUES ('u', 'poi', ?)", (at,))
    con.execute("INSERT INTO audit(user, op, preference_id, before, after, cause, at) VALUES ('u','insert','p1',NULL,?,'c1',?)",
                (json.dumps(after), at))
    con.execute("INSERT INTO audit(user, op, preference_id, before, after, cause, at) VALUES ('v','opt_out',NULL,NULL,?,'x',?)",
                (json.dumps({"prefix": "poi"}), at))
    con.execute("INSERT INTO audit(user, op, preference_id, before, after, cause, at) VALUES ('u','opt_out',NULL,NULL,?,'x',?)",
                (json.dumps({"prefix": "poi"}), at))
    con.commit()
    con.close()

    s = SQLiteStore(db)
    assert s.opt_outs("u") == ["poi"] and s.opt_outs("v") == []
    log = s.audit("u")
    assert [(a.seq, a.op, a.category) for a in log] == [(1, "insert", "entertainment/music/genre"), (2, "opt_out", "poi")]
    assert log[0].after["sentence"] == "I like jazz" and s.audit("v")[0].seq == 1
    assert s.verify_audit().ok and s.verify_audit().entries == 3
    assert [p.attribute for p in s.preferences("u")] == ["jazz"] and s.embedding_dim() is None
    add(s, "u", "rock")  # writes go on, in the old rows' dimension
    assert s.embedding_dim() == 4 and s.audit("u")[-1].seq == 3 and s.verify_audit("u").ok
    assert s.forget("u", cause="x") == 2 and s.opt_outs("u") == ["poi"]
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        sqlite3.connect(db).execute("DELETE FROM audit")
    names = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")}
    assert not {"audit_v1", "opt_outs_v1", "audit_user"} & names
    s.close()


def test_a_file_from_before_the_clustered_layout_keeps_its_order_vectors_and_search(tmp_path):
    """A rowid table of float32 vectors (written by the release before) is rewritten on open: each user's rows in
    their old order (created_at, then insertion for same-microsecond rows), vectors as int8, search unchanged."""
    db = tmp_path / "rowid.db"
    SQLiteStore(db).close()
    con = sqlite3.connect(db)
    con.execute("DROP TABLE preferences")
    con.execute("""CREATE TABLE preferences (id TEXT PRIMARY KEY, user TEXT NOT NULL, main TEXT NOT NULL, sub TEXT NOT NULL,
      detail TEXT NOT NULL, attribute TEXT NOT NULL, sentence TEXT NOT NULL, conversation_id TEXT, created_at TEXT NOT NULL,
      updated_at TEXT NOT NULL, embedding BLOB NOT NULL, polarity TEXT NOT NULL DEFAULT 'like')""")
    rng = np.random.default_rng(3)
    vecs = {}
    same = "2026-01-01T10:00:00.000001+00:00"
    for i, (user, pid) in enumerate([("u", "z9"), ("v", "v1"), ("u", "a1"), ("u", "m5")]):  # ids out of order
        v = rng.normal(size=4).astype(np.float32)
        vecs[pid] = v / np.linalg.norm(v)
        con.execute("INSERT INTO preferences VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (pid, user, "entertainment", "music", "genre", f"g{pid}", "s", None, same, same,
                     vecs[pid].tobytes(), "like"))
    con.execute("INSERT INTO meta(key, value) VALUES ('embedding_dim', '4')")
    con.commit()
    con.close()

    s = SQLiteStore(db)
    assert [p.id for p in s.preferences("u")] == ["z9", "a1", "m5"] and [p.id for p in s.preferences("v")] == ["v1"]
    prefs, mat = s.vectors("u")
    for p, row in zip(prefs, mat):
        np.testing.assert_allclose(row, vecs[p.id], atol=np.abs(vecs[p.id]).max() / 200)
    assert s.search("u", vecs["a1"], 1)[0][0].id == "a1"
    add(s, "u", "rock")
    assert [p.attribute for p in s.preferences("u")][-1] == "rock"
    keys = [k for (k,) in sqlite3.connect(db).execute("SELECT key FROM preferences WHERE user='u' ORDER BY key")]
    assert keys == list(range(keys[0], keys[0] + 4))  # one user's rows side by side, in their order
    s.close()


def test_a_file_of_float16_vectors_is_converted_to_int8_on_open(tmp_path):
    """A file written while vectors were float16 (no 'vector_format' in meta) opens with every vector converted:
    rows a quarter of float32, search unchanged, the dimension still read from the stored bytes."""
    db = tmp_path / "f16.db"
    s = SQLiteStore(db)
    rng = np.random.default_rng(5)
    vecs = [v / np.linalg.norm(v) for v in rng.normal(size=(3, 16)).astype(np.float32)]
    with s.transaction("u") as tx:
        ids = [tx.insert(PATH, f"a{i}", "", v, None, "t").id for i, v in enumerate(vecs)]
    s.close()
    con = sqlite3.connect(db)
    for pid, v in zip(ids, vecs):
        con.execute("UPDATE preferences SET embedding=? WHERE id=?", (v.astype(np.float16).tobytes(), pid))
    con.execute("DELETE FROM meta WHERE key='vector_format'")
    con.commit()
    con.close()

    s = SQLiteStore(db)
    try:
        lengths = {n for (n,) in sqlite3.connect(db).execute("SELECT length(embedding) FROM preferences")}
        assert lengths == {16 + 4}
        _, mat = s.vectors("u")
        for row, v in zip(mat, vecs):
            np.testing.assert_allclose(row, v, atol=np.abs(v).max() / 100)
        assert [s.search("u", v, 1)[0][0].id for v in vecs] == ids
        with pytest.raises(Exception, match="dimension"):
            with s.transaction("u") as tx:
                tx.insert(PATH, "wrong", "", np.ones(8), None, "t")
    finally:
        s.close()
    s = SQLiteStore(db)  # opened again: converted once, not twice
    try:
        assert [s.search("u", v, 1)[0][0].id for v in vecs] == ids
    finally:
        s.close()
