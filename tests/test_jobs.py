"""Asynchronous ingestion (jobs.py): durable, exactly once, ordered per user, failures contained, forget drops jobs."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from boundmem import Candidate, CategoryPath, Conversation, Memory, Turn
from boundmem.extract.base import Extraction, ExtractionError
from boundmem.jobs import JobNotFound, JobQueue
from boundmem.maintain.rules import RuleMaintainer
from boundmem.store.base import StoreBusy
from boundmem.store.sqlite import SQLiteStore

CUISINE = CategoryPath(main="points_of_interest", sub="restaurant", detail="favorite_cuisine")
TEMP = CategoryPath(main="vehicle_settings_and_comfort", sub="climate_control", detail="preferred_temperature")


class EchoExtractor:
    """One candidate per conversation: the first user turn's text as the attribute (in `path`)."""

    def __init__(self, path=CUISINE, delay: float = 0.0):
        self.path, self.delay, self.fail_on, self.busy_once = path, delay, set(), set()

    def extract(self, conversation, schema):
        if self.delay:
            time.sleep(self.delay)
        text = conversation.turns[0].text
        if text in self.fail_on:
            raise ExtractionError(f"cannot read {text!r}")
        if text in self.busy_once:
            self.busy_once.discard(text)
            raise StoreBusy("test: busy once", retry_after=0.01)
        if not schema.allows(self.path):
            return Extraction()
        return Extraction(candidates=[Candidate(path=self.path, attribute=text, sentence=f"I like {text}")])


class Clock:
    """The queue's clock, moved by the test (past a backoff or a dead worker's lease) instead of slept through."""

    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def conv(cid: str, text: str) -> Conversation:
    return Conversation(id=cid, turns=(Turn(role="user", text=text),))


@pytest.fixture()
def mem(tmp_path, schema, hash_embedder):
    m = Memory(schema=schema, store=SQLiteStore(tmp_path / "jobs.db"), extractor=EchoExtractor(),
               maintainer=RuleMaintainer(), embedder=hash_embedder)
    yield m
    m.close_jobs()
    m.store.close()


def test_submit_returns_at_once_and_the_worker_applies_it(mem):
    job = mem.submit(conv("c1", "Italian"), "alice")
    assert job.status == "pending"
    done = mem.wait(job.id, timeout=None)
    assert done.status == "done" and done.attempts == 1 and done.finished_at is not None
    assert [p.attribute for p in mem.preferences("alice")] == ["Italian"]
    assert done.result["decisions"][0]["action"] == "insert"
    assert done.result["decisions"][0]["path"] == str(CUISINE)
    # the finished job keeps no words of the user: no payload, no sentence in the result
    row = sqlite3.connect(mem.store.path).execute("SELECT payload, result FROM jobs WHERE id=?", (job.id,)).fetchone()
    assert row[0] is None and "Italian" not in row[1]


def test_a_job_queued_with_the_old_conversation_shape_still_applies(mem):
    """Conversations used to carry an (unread) "at"; a job queued before it went must not fail after an upgrade."""
    job = mem.submit(conv("c1", "Italian"), "alice", start_worker=False)
    con = sqlite3.connect(mem.store.path)
    with con:
        con.execute("UPDATE jobs SET payload=? WHERE id=?",
                    ('{"id": "c1", "turns": [{"role": "user", "text": "Italian"}], "at": null}', job.id))
    con.close()
    assert mem.jobs.drain(mem.add) == 1 and mem.job(job.id).status == "done"
    assert [p.attribute for p in mem.preferences("alice")] == ["Italian"]


def test_threads_submitting_at_once_share_one_queue(tmp_path, schema, hash_embedder):
    """`Memory.jobs` is created on first use while request threads submit: all of them must get the same queue (two
    queues would mean two workers and two sets of connections on one table)."""
    m = Memory(schema=schema, store=SQLiteStore(tmp_path / "once.db"), extractor=EchoExtractor(),
               maintainer=RuleMaintainer(), embedder=hash_embedder)
    n = 16
    start, seen = threading.Barrier(n), []

    def submit(i: int) -> None:
        start.wait()   # all first uses at the same moment
        seen.append(m.jobs)
        m.submit(conv(f"c{i}", f"dish{i}"), f"u{i}", start_worker=False)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    try:
        assert len({id(q) for q in seen}) == 1 and seen[0] is m.jobs
        assert m.jobs.pending() == n and m.jobs.drain(m.add) == n
    finally:
        m.close_jobs()
        m.store.close()


def test_a_job_is_visible_only_to_its_user(mem):
    job = mem.submit(conv("c1", "Thai"), "alice", start_worker=False)
    assert mem.job(job.id, "alice").status == "pending"
    with pytest.raises(JobNotFound):
        mem.job(job.id, "bob")
    with pytest.raises(JobNotFound):
        mem.job("nope")


def test_jobs_of_one_user_apply_in_order_even_with_two_workers(tmp_path, schema, hash_embedder):
    db = tmp_path / "order.db"
    mems = [Memory(schema=schema, store=SQLiteStore(db), extractor=EchoExtractor(TEMP, delay=0.01),
                   maintainer=RuleMaintainer(), embedder=hash_embedder) for _ in range(2)]
    temps = [str(t) for t in range(15, 27)]
    for i, t in enumerate(temps):          # single-preference category: each one replaces the last
        mems[0].jobs.submit("u", conv(f"c{i}", t))
        mems[0].jobs.submit(f"other{i}", conv(f"o{i}", t))
    threads = [threading.Thread(target=m.jobs.drain, args=(m.add,)) for m in mems]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for m in mems:   # what one worker left while the other held the user's running job
        m.jobs.drain(m.add)
    assert mems[0].jobs.pending() == 0
    assert [p.attribute for p in mems[0].preferences("u")] == [temps[-1]]
    applied = [a.cause.split()[3].rstrip(":") for a in mems[0].store.audit("u") if a.op in ("insert", "update")]
    assert applied == [f"c{i}" for i in range(len(temps))]   # in submission order
    for m in mems:
        m.jobs.close()
        m.store.close()


def test_a_worker_that_lost_its_lease_writes_nothing(tmp_path, schema, hash_embedder):
    db = tmp_path / "lease.db"
    a = Memory(schema=schema, store=SQLiteStore(db), extractor=EchoExtractor(), maintainer=RuleMaintainer(),
               embedder=hash_embedder)
    slow = JobQueue(a.store, lease_seconds=0.0)      # its lease is over at once
    job = slow.submit("u", conv("c1", "Greek"))
    claimed = slow.claim()
    assert claimed is not None
    b = Memory(schema=schema, store=SQLiteStore(db), extractor=EchoExtractor(), maintainer=RuleMaintainer(),
               embedder=hash_embedder)
    assert b.jobs.run_one(b.add).status == "done"         # another worker takes the job over and applies it
    slow.apply(a.add, *claimed)                           # the first one finishes late: rolled back
    assert [p.attribute for p in a.preferences("u")] == ["Greek"]
    assert [e.op for e in a.store.audit("u")] == ["insert"]   # applied exactly once (no second insert or pass)
    assert slow.get(job.id).status == "done"
    for m in (a, b):
        m.jobs.close()
        m.store.close()


def test_a_failing_job_is_recorded_and_the_users_next_job_runs(mem):
    mem.extractor.fail_on = {"garbage"}
    bad = mem.jobs.submit("u", conv("c1", "garbage"))
    good = mem.jobs.submit("u", conv("c2", "Sushi"))
    assert mem.jobs.drain(mem.add) == 2
    b = mem.job(bad.id)
    assert b.status == "failed" and b.error.startswith("ExtractionError")
    assert mem.job(good.id).status == "done"
    assert [p.attribute for p in mem.preferences("u")] == ["Sushi"]
    row = sqlite3.connect(mem.store.path).execute("SELECT payload FROM jobs WHERE id=?", (bad.id,)).fetchone()
    assert row[0] is None


def test_a_busy_store_is_retried_later_and_keeps_the_order(mem):
    clock = Clock()
    mem.jobs.clock, mem.jobs.backoff = clock, 1.0
    mem.extractor.busy_once = {"Pho"}
    first = mem.jobs.submit("u", conv("c1", "Pho"))
    second = mem.jobs.submit("u", conv("c2", "Ramen"))
    assert mem.jobs.drain(mem.add) == 1                       # Pho: busy, put back for later; Ramen waits behind it
    assert mem.job(first.id).status == "pending" and mem.job(second.id).status == "pending"
    assert mem.jobs.drain(mem.add) == 0                       # not before its backoff is over
    clock.now += 1.0
    assert mem.jobs.drain(mem.add) == 2
    assert mem.job(first.id).status == "done" and mem.job(first.id).attempts == 2
    assert mem.job(second.id).finished_at >= mem.job(first.id).finished_at
    assert [p.attribute for p in mem.preferences("u")] == ["Pho", "Ramen"]


def test_opt_outs_hold_for_queued_jobs(mem):
    mem.opt_out("u", "Restaurant")
    job = mem.jobs.submit("u", conv("c1", "Italian"))
    mem.jobs.drain(mem.add)
    assert mem.job(job.id).status == "done" and mem.preferences("u") == []


def test_forget_drops_the_users_queued_jobs(mem):
    mem.add(conv("c0", "Tapas"), "u")
    job = mem.submit(conv("c1", "Marker-Queued-Text"), "u", start_worker=False)
    mem.forget("u")
    with pytest.raises(JobNotFound):
        mem.job(job.id)
    assert mem.jobs.drain(mem.add) == 0 and mem.preferences("u") == []


def test_forget_drops_jobs_another_memory_queued_and_their_text_leaves_the_disk(tmp_path, schema, hash_embedder):
    """The queue lives in the store's database: a Memory that never touched it (another process, a restart) must
    still drop the user's queued conversations on forget, or their text stays on disk and a worker brings the
    preferences back."""
    db = tmp_path / "q.db"
    first = Memory(schema=schema, store=SQLiteStore(db), extractor=EchoExtractor(), maintainer=RuleMaintainer(),
                   embedder=hash_embedder)
    first.add(conv("c0", "Tapas"), "u")
    job = first.submit(conv("c1", "Marker-Queued-Text"), "u", start_worker=False)
    first.jobs.close()
    first.store.close()
    second = Memory(schema=schema, store=SQLiteStore(db), extractor=EchoExtractor(), maintainer=RuleMaintainer(),
                    embedder=hash_embedder)
    try:
        second.forget("u")
        with pytest.raises(JobNotFound):
            second.job(job.id)
    finally:
        second.jobs.close()
        second.store.close()
    for f in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        assert not f.exists() or b"Marker-Queued-Text" not in f.read_bytes(), f


def test_cli_prefs_forget_drops_the_users_queued_jobs(tmp_path, schema, hash_embedder):
    from typer.testing import CliRunner

    from boundmem.cli import app

    db = tmp_path / "q.db"
    m = Memory(schema=schema, store=SQLiteStore(db), extractor=EchoExtractor(), maintainer=RuleMaintainer(),
               embedder=hash_embedder)
    m.add(conv("c0", "Tapas"), "u")
    m.submit(conv("c1", "Marker-Queued-Text"), "u", start_worker=False)
    m.jobs.close()
    m.store.close()
    r = CliRunner().invoke(app, ["prefs", "forget", "-u", "u", "--db", str(db), "--yes"])
    assert r.exit_code == 0, r.output
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 0
    for f in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        assert not f.exists() or b"Marker-Queued-Text" not in f.read_bytes(), f


CHILD = r"""
import sys, time
from boundmem import Candidate, CategoryPath, Conversation, Memory, Turn
from boundmem.extract.base import Extraction
from boundmem.maintain.rules import RuleMaintainer
from boundmem.embed import HashEmbedder
from boundmem.schema import builtin_schema
from boundmem.store.sqlite import SQLiteStore
from boundmem.jobs import JobQueue

P = CategoryPath(main="points_of_interest", sub="restaurant", detail="favorite_cuisine")
class Slow:
    def extract(self, conversation, schema):
        time.sleep(0.05)
        t = conversation.turns[0].text
        return Extraction(candidates=[Candidate(path=P, attribute=t, sentence="I like " + t)])

m = Memory(schema=builtin_schema(), store=SQLiteStore(sys.argv[1]), extractor=Slow(), maintainer=RuleMaintainer(),
           embedder=HashEmbedder())
q = JobQueue(m.store, lease_seconds=0.5)
for i in range(int(sys.argv[2])):
    q.submit("u", Conversation(id=f"c{i}", turns=(Turn(role="user", text=f"dish{i}"),)))
q.start(m.add)
print("submitted", flush=True)
time.sleep(60)
"""


def test_kill_9_with_jobs_pending_loses_none(tmp_path, schema, hash_embedder):
    db, n = tmp_path / "killed.db", 30
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(db), str(n)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "submitted", child.stderr.read()
        time.sleep(0.4)                                  # let its worker apply a few, then kill it mid-queue
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    m = Memory(schema=schema, store=SQLiteStore(db), extractor=EchoExtractor(), maintainer=RuleMaintainer(),
               embedder=hash_embedder)
    before = m.jobs.pending()
    assert 0 < before <= n
    m.jobs.clock = Clock(time.time() + 3600)             # an hour on: the killed worker's lease is long over
    assert m.jobs.drain(m.add) == before                     # the job it held comes back, and every pending one runs
    assert m.jobs.pending() == 0
    assert sorted(p.attribute for p in m.preferences("u")) == sorted(f"dish{i}" for i in range(n))
    ops = [e.op for e in m.store.audit("u")]
    assert ops == ["insert"] * n                          # each job applied exactly once
    m.jobs.close()
    m.store.close()
