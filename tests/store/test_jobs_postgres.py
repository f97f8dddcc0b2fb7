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
    threads = [threading.Thread(target=m.jobs.drain, args=(m,), kwargs={"timeout": 60}) for m in (a, b)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    a.jobs.drain(a, timeout=30)
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
    assert b.jobs.run_one(b).status == "done"
    slow.apply(a, *claimed)
    assert [e.op for e in a.store.audit("u")] == ["insert"] and slow.get(job.id).status == "done"
    a.jobs.forget_user("u")
    assert a.jobs.pending() == 0
    for m in (a, b):
        m.jobs.close()
        m.store.close()
