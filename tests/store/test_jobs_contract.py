"""The job queue's table behind the store contract (store/base.JobTable): the same tests on SQLite and PostgreSQL
(store_factory is parametrised over both), for the rows the queue's guarantees rest on: leases, order per user,
a 'done' that commits with the ingest's writes or not at all, and no conversation text kept after a job finishes."""
from __future__ import annotations

import numpy as np
import pytest

from boundmem.schema.model import CategoryPath
from boundmem.store.base import JobTable

PATH = CategoryPath(main="entertainment", sub="music", detail="genre")


def _vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
    return v / np.linalg.norm(v)


def _payload(store, kind: str, job_id: str):
    """The row's stored text, read past the contract (it offers no way to read a finished job's text)."""
    if kind == "sqlite":
        import sqlite3

        con = sqlite3.connect(store.path)
        try:
            return con.execute("SELECT payload FROM jobs WHERE id=?", (job_id,)).fetchone()[0]
        finally:
            con.close()
    import psycopg

    with psycopg.connect(store.url) as con:
        return con.execute("SELECT payload FROM jobs WHERE id=%s", (job_id,)).fetchone()[0]


def test_the_store_is_a_job_table(store):
    assert isinstance(store, JobTable)


def test_a_job_is_added_read_and_counted(store):
    store.add_job("j1", "alice", '{"x": 1}', now=100.0)
    job = store.job("j1")
    assert (job.id, job.user, job.status, job.kind, job.attempts) == ("j1", "alice", "pending", "conversation", 0)
    assert job.created_at.timestamp() == 100.0 and job.result is None and not job.finished
    assert store.job("nope") is None
    store.add_job("j2", "bob", "{}", now=101.0)
    assert store.open_jobs() == 2 and store.open_jobs("alice") == 1 and store.open_jobs("carol") == 0
    assert [j.id for j in store.user_jobs("alice")] == ["j1"] and store.user_jobs("carol") == []


def test_claim_leases_the_oldest_ready_job_and_keeps_one_users_order(store):
    for i, user in enumerate(["alice", "alice", "bob"]):
        store.add_job(f"j{i}", user, f"payload {i}", now=float(i))
    job, payload = store.claim_job("w1", now=10.0, lease_seconds=5.0)
    assert (job.id, job.status, job.attempts, payload) == ("j0", "running", 1, "payload 0")
    job, _ = store.claim_job("w2", now=10.0, lease_seconds=5.0)
    assert job.id == "j2"   # alice's second job waits for her first; bob's does not
    assert store.claim_job("w3", now=10.0, lease_seconds=5.0) is None


def test_an_expired_lease_is_taken_over_and_the_old_owner_can_no_longer_finish(store):
    store.add_job("j", "alice", "text", now=0.0)
    store.claim_job("w1", now=1.0, lease_seconds=5.0)
    assert store.claim_job("w2", now=3.0, lease_seconds=5.0) is None   # w1's lease holds until 6
    job, _ = store.claim_job("w2", now=7.0, lease_seconds=5.0)
    assert job.attempts == 2
    assert not store.finish_job("j", "w1", "done", "{}", None, now=8.0)
    assert store.finish_job("j", "w2", "done", '{"ok": true}', None, now=8.0)
    job = store.job("j")
    assert job.status == "done" and job.result == {"ok": True} and job.finished_at.timestamp() == 8.0
    assert store.open_jobs() == 0 and store.claim_job("w3", now=100.0, lease_seconds=5.0) is None


def test_a_released_job_waits_for_its_backoff(store):
    store.add_job("j", "alice", "text", now=0.0)
    store.claim_job("w1", now=1.0, lease_seconds=60.0)
    assert not store.release_job("j", "someone else", not_before=5.0)
    assert store.release_job("j", "w1", not_before=5.0)
    assert store.job("j").status == "pending"
    assert store.claim_job("w1", now=4.0, lease_seconds=60.0) is None
    job, payload = store.claim_job("w1", now=5.0, lease_seconds=60.0)
    assert job.attempts == 2 and payload == "text"


def test_a_failed_job_keeps_its_error_and_not_its_text(store_factory):
    store = store_factory()
    store.add_job("j", "alice", "I love jazz", now=0.0)
    store.claim_job("w", now=1.0, lease_seconds=60.0)
    assert store.finish_job("j", "w", "failed", None, "ValueError: bad", now=2.0)
    job = store.job("j")
    assert job.status == "failed" and job.error == "ValueError: bad" and job.result is None
    assert _payload(store, store_factory.kind, "j") is None
    store.release_job("j", "w", not_before=0.0)   # no owner any more: nothing to release
    assert store.claim_job("w", now=3.0, lease_seconds=60.0) is None


def test_done_in_the_ingest_transaction_commits_with_its_writes_or_not_at_all(store):
    store.add_job("j", "alice", "I love jazz", now=0.0)
    store.claim_job("w", now=1.0, lease_seconds=60.0)
    with pytest.raises(RuntimeError):
        with store.transaction("alice") as tx:
            tx.insert(PATH, "jazz", "I love jazz", _vec(1), "c1", "test")
            assert tx.finish_job("j", "w", '{"n": 1}', now=2.0)
            raise RuntimeError("the ingest failed after marking")
    assert store.job("j").status == "running" and store.preferences("alice") == []
    with store.transaction("alice") as tx:
        assert not tx.finish_job("j", "another worker", "{}", now=2.0)
        tx.insert(PATH, "jazz", "I love jazz", _vec(1), "c1", "test")
        assert tx.finish_job("j", "w", '{"n": 1}', now=2.0)
    assert store.job("j").status == "done" and [p.attribute for p in store.preferences("alice")] == ["jazz"]


def test_a_done_job_keeps_no_text(store_factory):
    store = store_factory()
    store.add_job("j", "alice", "I love jazz", now=0.0)
    assert _payload(store, store_factory.kind, "j") == "I love jazz"
    store.claim_job("w", now=1.0, lease_seconds=60.0)
    with store.transaction("alice") as tx:
        tx.finish_job("j", "w", "{}", now=2.0)
    assert _payload(store, store_factory.kind, "j") is None


def test_forget_jobs_drops_one_users_jobs_only(store):
    store.add_job("a1", "alice", "one", now=0.0)
    store.add_job("a2", "alice", "two", now=1.0)
    store.add_job("b1", "bob", "three", now=2.0)
    assert store.forget_jobs("alice") == 2 and store.forget_jobs("alice") == 0
    assert store.user_jobs("alice") == [] and [j.id for j in store.user_jobs("bob")] == ["b1"]


def test_two_store_objects_on_one_database_see_one_queue(store_factory):
    a, b = store_factory(), store_factory()
    a.add_job("j", "alice", "text", now=0.0)
    job, _ = b.claim_job("wb", now=1.0, lease_seconds=60.0)
    assert job.id == "j" and a.claim_job("wa", now=1.0, lease_seconds=60.0) is None
    assert b.finish_job("j", "wb", "done", "{}", None, now=2.0) and a.job("j").status == "done"
