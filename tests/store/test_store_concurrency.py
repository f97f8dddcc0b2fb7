"""Many concurrent writers lose nothing and duplicate nothing (threads and processes).

Small runs (8 x 300 and less) to keep the suite fast; the 8 x 10 000 version is
`boundmem bench perf`, which calls the same `boundmem_bench.stress.hammer`.
Expected counts are derived here from the workload's definition, then compared with what
the store holds, independently of the report's own bookkeeping.
"""
from __future__ import annotations

from collections import Counter
from functools import partial

import pytest

from boundmem.store.sqlite import SQLiteStore
from boundmem_bench.stress import STORE_SHARED, STORE_UNIQUE, hammer, memory_paths

USERS, SHARED = 4, 16


def check_exact(store, report, writers, ops, shared_path, unique_path):
    """What the store holds == exactly what the writers were told to write."""
    run = report.user_ids[0].split("-")[1]
    users = [f"stress-{run}-u{n}" for n in range(USERS)]
    assert report.user_ids == users
    want_unique = {(f"stress-{run}-u{i % USERS}", f"w{w}-op{i}") for w in range(writers) for i in range(ops)}
    want_shared = {(f"stress-{run}-u{i % USERS}", f"shared-{i % SHARED}") for i in range(ops)}
    got = Counter()
    audit = Counter()
    for u in users:
        for p in store.preferences(u):
            got[(p.path, u, p.attribute)] += 1
        audit.update(a.op for a in store.audit(u))
    assert max(got.values()) == 1, "a preference was stored twice"
    assert {(u, a) for (path, u, a) in got if path == unique_path} == want_unique
    assert {(u, a) for (path, u, a) in got if path == shared_path} == want_shared
    assert sum(got.values()) == len(want_unique) + len(want_shared)
    assert audit == {"insert": writers * ops + len(want_shared), "pass": writers * ops - len(want_shared)}
    # and the report agrees with the independent count
    assert report.ok, report
    assert report.committed == writers * ops and report.errors == []


def test_sqlite_eight_threads_through_store_transactions(tmp_path):
    path = tmp_path / "s.db"
    r = hammer(partial(SQLiteStore, path), writers=8, ops=300, users=USERS, shared_keys=SHARED)
    s = SQLiteStore(path)
    check_exact(s, r, 8, 300, STORE_SHARED, STORE_UNIQUE)
    assert s._con().execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    s.close()


def test_sqlite_eight_threads_through_memory_apply(tmp_path):
    """The real ingest path (Memory.apply: embed, maintain, write) under concurrency."""
    path = tmp_path / "m.db"
    r = hammer(partial(SQLiteStore, path), writers=8, ops=25, via="memory", users=USERS, shared_keys=SHARED)
    s = SQLiteStore(path)
    check_exact(s, r, 8, 25, *memory_paths())
    s.close()


def test_sqlite_four_processes(tmp_path):
    path = tmp_path / "p.db"
    SQLiteStore(path).close()  # schema created once, as a deployment would
    r = hammer(partial(SQLiteStore, path), writers=4, ops=100, mode="processes", users=USERS, shared_keys=SHARED)
    s = SQLiteStore(path)
    check_exact(s, r, 4, 100, STORE_SHARED, STORE_UNIQUE)
    s.close()


def test_postgres_eight_threads(pg_url):
    from boundmem.store.postgres import PostgresStore

    r = hammer(partial(PostgresStore, pg_url), writers=8, ops=100, users=USERS, shared_keys=SHARED)
    s = PostgresStore(pg_url)
    check_exact(s, r, 8, 100, STORE_SHARED, STORE_UNIQUE)
    s.close()


def test_hammer_rejects_nonsense(tmp_path):
    with pytest.raises(ValueError, match="writers and ops"):
        hammer(partial(SQLiteStore, tmp_path / "x.db"), writers=0, ops=10)
    with pytest.raises(ValueError, match="unknown mode"):
        hammer(partial(SQLiteStore, tmp_path / "x.db"), writers=1, ops=1, mode="fibers")
