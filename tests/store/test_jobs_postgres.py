"""The jobs queue on PostgreSQL: the same guarantees as on SQLite (tests/test_jobs.py), in the store's database."""
from __future__ import annotations

import threading

from boundmem import Candidate, CategoryPath, Conversation, Memory, Turn
from boundmem.extract.base import Extraction
from boundmem.jobs import JobQueue
from boundmem.maintain.rules import RuleMaintainer
from boundmem.embed import HashEmbedder

TEMP = CategoryPath(main="vehicle_settings_and_comfort", sub="climate_control", detail="preferred_temperature")


class Echo:
    def extract(self, conversation, schema):
        t = conversation.turns[0].text
        return Extraction(candidates=[Candidate(path=TEMP, attribute=t, sentence=f"{t} degrees, always")])


def memory(url, schema):
    from boundmem.store.postgres import PostgresStore

    return Memory(schema=schema, store=PostgresStore(url), extractor=Echo(), maintainer=RuleMaintainer(),
                  embedder=HashEmbedder())


def conv(cid, text):
    return Conversation(id=cid, turns=(Turn(role="user", text=text),))


def test_jobs_on_postgres_in_order_exactly_once(pg_url, schema):
    a, b = memory(pg_url, schema), memory(pg_url, schema)
    temps = [str(t) for t in range(15, 25)]
    ids = [a.jobs.submit("u", conv(f"c{i}", t)).id for i, t in enumerate(temps)]
    threads = [threading.Thread(target=m.jobs.drain, args=(m.add,)) for m in (a, b)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    a.jobs.drain(a.add)   # what one worker left while the other held the user's running job
    assert all(a.job(i).status == "done" for i in ids)
    assert [p.attribute for p in a.preferences("u")] == [temps[-1]]
    assert [e.op for e in a.store.audit("u")] == ["insert"] + ["update"] * (len(temps) - 1)
    for m in (a, b):
        m.jobs.close()
        m.store.close()


def test_a_lost_lease_rolls_back_on_postgres(pg_url, schema):
    a, b = memory(pg_url, schema), memory(pg_url, schema)
    slow = JobQueue(a.store, lease_seconds=0.0)
    job = slow.submit("u", conv("c1", "21"))
    claimed = slow.claim()
    assert b.jobs.run_one(b.add).status == "done"
    slow.apply(a.add, *claimed)
    assert [e.op for e in a.store.audit("u")] == ["insert"] and slow.get(job.id).status == "done"
    a.jobs.forget_user("u")
    assert a.jobs.pending() == 0
    for m in (a, b):
        m.jobs.close()
        m.store.close()


def test_the_worker_stops_when_its_store_is_closed(pg_url, schema, caplog):
    """a closed PostgreSQL store's job worker kept polling and logging a traceback every half second."""
    import logging

    m = memory(pg_url, schema)
    m.jobs.start(m.add, poll_seconds=0.01)
    worker = m.jobs._worker
    with caplog.at_level(logging.INFO, logger="boundmem.jobs"):
        m.store.close()
        worker.join(30)
    assert not worker.is_alive()
    assert [r.levelname for r in caplog.records if r.name == "boundmem.jobs"] == ["INFO"]


def test_a_libpq_connection_string_opens_postgresql_not_a_sqlite_file(pg_url, tmp_path, monkeypatch):
    """`--db "host=... dbname=..."` silently created a SQLite file named after the string."""
    import psycopg

    from boundmem.config import Settings
    from boundmem.store.postgres import PostgresStore
    from boundmem.store.registry import open_store

    conninfo = psycopg.conninfo.make_conninfo("", **psycopg.conninfo.conninfo_to_dict(pg_url))   # key=value form
    assert "://" not in conninfo and "dbname=" in conninfo
    monkeypatch.chdir(tmp_path)
    store = open_store(conninfo, Settings())
    try:
        assert isinstance(store, PostgresStore)
    finally:
        store.close()
    assert list(tmp_path.iterdir()) == []
