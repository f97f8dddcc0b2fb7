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
        con.execute("DELETE FROM audit WHERE user='u'")
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
