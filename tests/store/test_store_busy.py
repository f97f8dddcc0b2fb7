"""A write lock held by someone else is answered within seconds with StoreBusy (and a retry-after hint), not by a
60 s wait and a bare error."""
from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from boundmem.schema.model import CategoryPath
from boundmem.errors import StoreError
from boundmem.store.base import StoreBusy
from boundmem.store.sqlite import SQLiteStore

PATH = CategoryPath(main="entertainment", sub="music", detail="genre")

HOLDER = r"""
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN IMMEDIATE")
print("holding", flush=True)
sys.stdin.readline()
con.execute("ROLLBACK")
"""


def add(store, user="u", attribute="jazz"):
    with store.transaction(user) as tx:
        return tx.insert(PATH, attribute, "", np.ones(4), None, "t")


def test_sqlite_write_lock_held_by_another_process_is_store_busy_within_seconds(tmp_path):
    db = tmp_path / "b.db"
    store = SQLiteStore(db)
    add(store)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        for write in (lambda: add(store, attribute="rock"), lambda: store.forget("u", cause="x"),
                      lambda: store.opt_out("u", "entertainment", cause="x")):
            t0 = time.monotonic()
            with pytest.raises(StoreBusy, match="busy") as err:
                write()
            assert time.monotonic() - t0 < 8  # the default wait is 5 s, not 60
            assert isinstance(err.value, StoreError) and err.value.retry_after > 0
            assert "retry in" in str(err.value)
        assert [p.attribute for p in store.preferences("u")] == ["jazz"]  # reads go on meanwhile
    finally:
        holder.communicate("\n", timeout=10)
    add(store, attribute="rock")  # and the store works again once the lock is free
    assert [p.attribute for p in store.preferences("u")] == ["jazz", "rock"]
    store.close()


def test_postgres_user_lock_held_elsewhere_is_store_busy(pg_url):
    import psycopg

    from boundmem.store.postgres import _LOCK_NS, PostgresStore

    store = PostgresStore(pg_url, lock_timeout=1.0)
    add(store)
    other = psycopg.connect(pg_url)
    other.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_NS, "u"))  # inside an open transaction
    try:
        t0 = time.monotonic()
        with pytest.raises(StoreBusy) as err:
            add(store, attribute="rock")
        assert time.monotonic() - t0 < 5 and err.value.retry_after > 0
        add(store, user="v")  # other users do not wait
    finally:
        other.rollback()
        other.close()
    add(store, attribute="rock")
    assert [p.attribute for p in store.preferences("u")] == ["jazz", "rock"]
    store.close()
