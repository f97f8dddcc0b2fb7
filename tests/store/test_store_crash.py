"""Kill -9 of a writer process leaves a consistent SQLite store.

Every committed ingest is complete (all its preferences and audit rows), an interrupted one
left nothing behind, PRAGMA integrity_check passes, and the file accepts writes again at once.
"""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import numpy as np

from boundmem.schema.model import CategoryPath
from boundmem.store.sqlite import SQLiteStore

ROWS = 12  # preferences per conversation: a long transaction, so a kill often lands inside one
PATH = CategoryPath(main="stress", sub="crash", detail="row")

# The child ingests conversations c<n>, n = 0, 1, 2, ... forever, one transaction each:
# ROWS inserts (each audited) and one "pass" note. It resumes after the last committed one.
CHILD = r"""
import sys, numpy as np
from boundmem.schema.model import CategoryPath
from boundmem.store.sqlite import SQLiteStore
db, rows, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
store = SQLiteStore(db)
path = CategoryPath(main="stress", sub="crash", detail="row")
n = len({p.conversation_id for p in store.preferences("u")})
rng = np.random.default_rng(n)
while True:
    with store.transaction("u") as tx:
        for j in range(rows):
            tx.insert(path, f"c{n}-a{j}", f"sentence {j} of c{n}", rng.standard_normal(32), f"c{n}", f"ingest c{n}")
            if mode == "hang" and j == rows // 2:
                print("inside", flush=True)  # the parent kills us here, mid-transaction
                import time; time.sleep(120)
        tx.note("pass", f"ingest c{n}: done")
    n += 1
"""


def start_child(db, mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, str(db), str(ROWS), mode],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def committed(db) -> int:
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute("SELECT count(DISTINCT conversation_id) FROM preferences").fetchone()[0]
    except sqlite3.OperationalError:  # the child has not created the schema yet
        return 0
    finally:
        con.close()


def kill9(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()


def assert_consistent(db) -> int:
    """Every conversation present is complete, conversations form 0..m-1, the file is sound. Returns m."""
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    store = SQLiteStore(db, timeout=5)  # a stale lock would show up as a timeout below
    prefs = store.preferences("u")
    per_conv = Counter(p.conversation_id for p in prefs)
    m = len(per_conv)
    assert set(per_conv) == {f"c{n}" for n in range(m)}, "a gap: an earlier committed conversation is missing"
    assert all(v == ROWS for v in per_conv.values()), f"a partial conversation: {per_conv}"
    for n in range(m):
        assert {p.attribute for p in prefs if p.conversation_id == f"c{n}"} == {f"c{n}-a{j}" for j in range(ROWS)}
    audit = [a for a in store.audit("u") if a.cause.startswith("ingest")]  # not our own probes below
    inserts = Counter(a.cause for a in audit if a.op == "insert")
    assert inserts == {f"ingest c{n}": ROWS for n in range(m)}
    assert Counter(a.cause for a in audit if a.op == "pass") == {f"ingest c{n}: done": 1 for n in range(m)}
    assert {a.preference_id for a in audit if a.op == "insert"} == {p.id for p in prefs}
    # the file takes writes again immediately
    with store.transaction("u") as tx:
        tx.insert(PATH, "after-crash", "", np.ones(32), "probe", "probe")
    with store.transaction("u") as tx:
        tx.delete(tx.preferences(PATH)[-1].id, "probe")
    store.close()
    return m


def test_kill_during_a_long_ingest_loop_leaves_only_complete_conversations(tmp_path):
    db = tmp_path / "crash.db"
    total = 0
    for round_ in range(2):  # kill, restart (resuming), kill again: each at an arbitrary moment
        child = start_child(db, "loop")
        deadline = time.time() + 60
        while committed(db) < total + 5 and time.time() < deadline:
            time.sleep(0.02)
        time.sleep(0.013 * (round_ + 1))
        kill9(child)
        m = assert_consistent(db)
        assert m >= total + 5
        total = m


def test_kill_inside_a_transaction_leaves_nothing_of_it(tmp_path):
    db = tmp_path / "hang.db"
    s = SQLiteStore(db)
    with s.transaction("u") as tx:  # c0, committed before the crash
        for j in range(ROWS):
            tx.insert(PATH, f"c0-a{j}", f"sentence {j} of c0", np.ones(32), "c0", "ingest c0")
        tx.note("pass", "ingest c0: done")
    s.close()
    child = start_child(db, "hang")  # resumes at c1 and stops halfway through it
    line = child.stdout.readline()
    assert line.strip() == "inside", child.stderr.read()
    kill9(child)
    assert assert_consistent(db) == 1
    assert not any(p.conversation_id == "c1" for p in SQLiteStore(db).preferences("u"))
