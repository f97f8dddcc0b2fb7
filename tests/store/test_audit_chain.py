"""The audit log is tamper-evident: per-user sequence numbers, each entry chained to the previous one's
hash over its metadata and its content's salted hash, so erasing payloads keeps the chain verifiable while an
edited, removed or reordered row in the raw database is found and named. Runs on SQLite and PostgreSQL.
"""
from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from boundmem.schema.model import CategoryPath

MUSIC = CategoryPath(main="entertainment", sub="music", detail="genre")
FOOD = CategoryPath(main="poi", sub="restaurant", detail="cuisine")


def e(i: int) -> np.ndarray:
    v = np.zeros(8, np.float32)
    v[i] = 1.0
    return v


def history(store, user="u"):
    """insert, update, pass, opt-out (+ its purge), insert, delete: every kind of entry (7 entries)."""
    with store.transaction(user) as tx:
        p = tx.insert(MUSIC, "jazz", "I like jazz.", e(0), "c1", "insert from c1")
        tx.replace(p.id, "rock", "Rock now.", e(1), "c2", "update from c2")
        tx.note("pass", "pass from c3", p.id, {"attribute": "rock", "sentence": "rock again"})
    store.opt_out(user, "entertainment", cause="user opted out of entertainment")
    with store.transaction(user) as tx:
        q = tx.insert(FOOD, "pizza", "Pizza!", e(2), "c4", "insert from c4")
    store.delete(user, q.id, cause="deleted by user")


def raw(store_factory, store):
    """Run SQL on the raw database with the append-only trigger switched off, as an attacker with file or
    superuser access would."""
    if store_factory.kind == "sqlite":
        con = sqlite3.connect(store.path, isolation_level=None)
        con.execute("DROP TRIGGER audit_erase_only")
        con.execute("DROP TRIGGER audit_no_delete")
        return con
    import psycopg

    con = psycopg.connect(store.url, autocommit=True)
    con.execute("ALTER TABLE audit DISABLE TRIGGER audit_append_only")
    return con


def test_chain_verifies_after_inserts_updates_deletes_opt_outs_and_forget(store):
    assert store.verify_audit().ok and store.verify_audit().entries == 0
    history(store, "u")
    history(store, "v")
    check = store.verify_audit()
    assert check.ok and check.users == 2 and check.entries == 2 * 7
    log = store.audit("u")
    assert [a.seq for a in log] == list(range(1, 8))
    assert log[0].prev_hash == "0" * 64 and all(b.prev_hash == a.hash for a, b in zip(log, log[1:]))
    store.forget("u", cause="user asked to be forgotten")
    assert store.verify_audit("u").ok and store.verify_audit().ok and store.verify_audit("u").entries == 8
    with store.transaction("u") as tx:  # after forget the id starts a new chain; the closed one still verifies
        tx.insert(FOOD, "sushi", "Sushi.", e(3), "c9", "insert from c9")
    assert [a.seq for a in store.audit("u")] == [1] and store.audit("u")[0].prev_hash == "0" * 64
    assert store.verify_audit("u").ok and store.verify_audit("u").entries == 9
    check = store.verify_audit()
    assert check.ok and check.users == 3 and check.entries == 2 * 7 + 2   # u's two chains and v's


def test_sequence_numbers_are_per_user(store):
    """An export must not reveal how many writes other users (or tenants) made."""
    with store.transaction("acme:alice") as tx:
        tx.insert(MUSIC, "jazz", "", e(0), None, "x")
    for i in range(5):
        with store.transaction("globex:bob") as tx:
            tx.insert(FOOD, f"dish{i}", "", e(1), None, "x")
    with store.transaction("acme:alice") as tx:
        tx.insert(FOOD, "pizza", "", e(2), None, "x")
    assert [a.seq for a in store.export("acme:alice").audit] == [1, 2]
    assert [a.seq for a in store.audit("globex:bob")] == [1, 2, 3, 4, 5]


def test_erasing_a_payload_keeps_the_chain_but_editing_one_breaks_it(store_factory):
    store = store_factory()
    history(store, "u")
    history(store, "v")
    ok = store.verify_audit()
    assert ok.ok
    subject = store.keys.subject("u")
    con = raw(store_factory, store)
    p = "?" if store_factory.kind == "sqlite" else "%s"
    # a legitimate-looking erasure (what forget does) of one entry: still verifies
    con.execute(f"UPDATE audit SET before=NULL, after=NULL, cause='erased' WHERE subject={p} AND useq=1", (subject,))
    assert store.verify_audit().ok
    # rewrite the content of entry 2 (the update's after image)
    after = '{"attribute": "blues"}'
    con.execute(f"UPDATE audit SET after={p} WHERE subject={p} AND useq=2", (after, subject))
    check = store.verify_audit()
    assert (check.ok, check.user, check.seq) == (False, "u", 2) and "payload" in check.reason
    assert store.verify_audit("v").ok  # the other user's chain is untouched
    # even after erasing that payload again, its metadata is what the chain covers: edit entry 3's category
    con.execute(f"UPDATE audit SET before=NULL, after=NULL, cause='erased' WHERE subject={p} AND useq=2", (subject,))
    assert store.verify_audit("u").ok
    con.execute(f"UPDATE audit SET category='poi' WHERE subject={p} AND useq=3", (subject,))
    check = store.verify_audit("u")
    assert (check.ok, check.seq) == (False, 3) and "hash does not match" in check.reason
    con.execute(f"UPDATE audit SET category={p} WHERE subject={p} AND useq=3", (str(MUSIC), subject))
    assert store.verify_audit("u").ok
    # remove an entry: the next one no longer links
    con.execute(f"DELETE FROM audit WHERE subject={p} AND useq=5", (subject,))
    check = store.verify_audit("u")
    assert (check.ok, check.seq) == (False, 5) and "missing" in check.reason
    con.close()


def test_forgotten_users_broken_chain_is_named_by_pseudonym(store_factory):
    store = store_factory()
    history(store, "u")
    store.forget("u", cause="x")
    con = raw(store_factory, store)
    subject = store.keys.subject("u")
    p = "?" if store_factory.kind == "sqlite" else "%s"
    con.execute(f"UPDATE audit SET op='insert' WHERE subject={p} AND useq=7", (subject,))
    con.close()
    check = store.verify_audit()
    assert not check.ok and check.user == subject and check.user.startswith("anon-") and check.seq == 7
    assert store.verify_audit("u").seq == 7  # asked by the id, its closed chain is checked by the id's pseudonym
    assert store.verify_audit("u").user == "u"
