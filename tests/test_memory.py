"""The Memory facade: one transaction per ingest, maintenance applied, opt-outs enforced at storage, isolation."""
from __future__ import annotations

import pytest

from boundmem import Candidate, CategoryPath, Conversation, Memory, Turn
from boundmem.extract.base import Extraction
from boundmem.maintain.rules import RuleMaintainer
from boundmem.store.sqlite import SQLiteStore

CUISINE = CategoryPath(main="points_of_interest", sub="restaurant", detail="favorite_cuisine")
TEMP = CategoryPath(main="vehicle_settings_and_comfort", sub="climate_control", detail="preferred_temperature")


class ScriptedExtractor:
    """Returns whatever the test says, ignoring the schema: so the facade's own guards are what is tested."""

    def __init__(self):
        self.next: list[Candidate] = []
        self.seen_schemas = []

    def extract(self, conversation, schema):
        self.seen_schemas.append(schema)
        return Extraction(candidates=list(self.next))


class ExplodingMaintainer(RuleMaintainer):
    def __init__(self, after: int):
        self.after, self.calls = after, 0

    def decide(self, candidate, existing, detail):
        self.calls += 1
        if self.calls > self.after:
            raise RuntimeError("maintainer crashed")
        return super().decide(candidate, existing, detail)


def conv(cid="c1", text="hello"):
    return Conversation(id=cid, turns=(Turn(role="user", text=text),))


@pytest.fixture()
def mem(tmp_path, schema, hash_embedder):
    m = Memory(schema=schema, store=SQLiteStore(tmp_path / "m.db"), extractor=ScriptedExtractor(),
               maintainer=RuleMaintainer(), embedder=hash_embedder)
    yield m
    m.store.close()


def test_insert_pass_append_update(mem):
    mem.extractor.next = [Candidate(path=CUISINE, attribute="Italian", sentence="I love Italian food")]
    assert [d.action for d in mem.add(conv("c1"), "u").decisions] == ["insert"]
    assert [d.action for d in mem.add(conv("c2"), "u").decisions] == ["pass"]
    mem.extractor.next = [Candidate(path=CUISINE, attribute="Mexican", sentence="Mexican is great too")]
    assert [d.action for d in mem.add(conv("c3"), "u").decisions] == ["append"]  # multi-preference category
    assert sorted(p.attribute for p in mem.preferences("u")) == ["Italian", "Mexican"]
    mem.extractor.next = [Candidate(path=TEMP, attribute="21", sentence="21 degrees please, always")]
    mem.add(conv("c4"), "u")
    mem.extractor.next = [Candidate(path=TEMP, attribute="19", sentence="Make it 19 from now on")]
    assert [d.action for d in mem.add(conv("c5"), "u").decisions] == ["update"]  # single-preference: never append
    temps = mem.preferences("u", "Climate Control")
    assert [(p.attribute, p.conversation_id) for p in temps] == [("19", "c5")]
    ops = [(a.op, a.cause.split(" ")[0]) for a in mem.store.audit("u")]
    assert ops == [("insert", "insert"), ("pass", "pass"), ("insert", "append"), ("insert", "insert"), ("update", "update")]
    upd = mem.store.audit("u")[-1]
    assert upd.before["attribute"] == "21" and upd.after["attribute"] == "19"


def test_ingest_result_carries_the_stored_preferences_in_their_final_state(mem):
    """Inserted, appended and updated preferences come back as stored; a pass stores nothing; an insert that a later
    candidate of the same ingest updates is listed once, as it ended up."""
    mem.extractor.next = [Candidate(path=CUISINE, attribute="Italian", sentence="I love Italian food"),
                          Candidate(path=TEMP, attribute="21", sentence="21 degrees please, always"),
                          Candidate(path=TEMP, attribute="19", sentence="Make it 19 from now on")]
    r = mem.add(conv("c1"), "u")
    assert [d.action for d in r.decisions] == ["insert", "insert", "update"]
    assert r.stored == mem.preferences("u") and [p.attribute for p in r.stored] == ["Italian", "19"]
    mem.extractor.next = [Candidate(path=CUISINE, attribute="Italian", sentence="Italian again"),
                          Candidate(path=CUISINE, attribute="Mexican", sentence="Mexican is great too")]
    r = mem.add(conv("c2"), "u")
    assert [d.action for d in r.decisions] == ["pass", "append"]
    assert r.stored == [p for p in mem.preferences("u") if p.attribute == "Mexican"]


def test_opted_out_category_is_pruned_for_extractor_and_blocked_at_storage(mem):
    mem.extractor.next = [Candidate(path=CUISINE, attribute="Italian", sentence="I love Italian food")]
    mem.add(conv("c1"), "u")
    purged = mem.opt_out("u", "Restaurant")
    assert [p.attribute for p in purged] == ["Italian"] and mem.preferences("u") == []
    # a leaky extractor still cannot get the category stored
    r = mem.add(conv("c2"), "u")
    assert r.decisions == [] and [c.attribute for c in r.blocked] == ["Italian"]
    assert not mem.extractor.seen_schemas[-1].allows(CUISINE)
    assert mem.preferences("u") == [] and mem.recall("italian food", "u", gate=False) == []
    assert mem.store.opt_outs("u") == ["points_of_interest/restaurant"]
    # another user is unaffected
    mem.add(conv("c3"), "v")
    assert [p.attribute for p in mem.preferences("v")] == ["Italian"]


def test_failed_ingest_stores_nothing(tmp_path, schema, hash_embedder):
    m = Memory(schema=schema, store=SQLiteStore(tmp_path / "m.db"), extractor=ScriptedExtractor(),
               maintainer=ExplodingMaintainer(after=1), embedder=hash_embedder)
    m.extractor.next = [Candidate(path=CUISINE, attribute="Italian", sentence="Italian"),
                        Candidate(path=TEMP, attribute="21", sentence="21 degrees")]
    from boundmem.memory import IngestFailed

    with pytest.raises(IngestFailed) as e:   # a clear error, the crash as its cause
        m.add(conv(), "u")
    assert isinstance(e.value.__cause__, RuntimeError)
    assert m.preferences("u") == [] and m.store.audit("u") == []


def test_recall_sees_only_own_user(mem):
    mem.extractor.next = [Candidate(path=CUISINE, attribute="Italian", sentence="I love Italian food")]
    mem.add(conv("c1"), "alice")
    mem.extractor.next = [Candidate(path=TEMP, attribute="21", sentence="I like 21 degrees")]
    mem.add(conv("c2"), "bob")
    assert {h.preference.user for h in mem.recall("italian food and 21 degrees", "bob", k=10, gate=False)} == {"bob"}
    assert mem.recall("anything", "carol") == []


def test_forget_and_export(mem):
    mem.extractor.next = [Candidate(path=CUISINE, attribute="Italian", sentence="I love Italian food")]
    mem.add(conv("c1"), "u")
    exp = mem.export("u")
    assert [p.attribute for p in exp.preferences] == ["Italian"] and exp.audit[0].op == "insert"
    assert mem.forget("u") == 1
    exp = mem.export("u")
    assert exp.preferences == [] and "Italian" not in exp.model_dump_json()
    assert exp.audit == [] and mem.store.verify_audit("u").entries == 2   # the closed chain ends with the forget


def test_delete_other_users_preference_fails(mem):
    from boundmem.errors import NotFoundError

    mem.extractor.next = [Candidate(path=CUISINE, attribute="Italian", sentence="I love Italian food")]
    mem.add(conv("c1"), "alice")
    pid = mem.preferences("alice")[0].id
    with pytest.raises(NotFoundError):
        mem.delete("bob", pid)
    assert len(mem.preferences("alice")) == 1


class LockProbingMaintainer(RuleMaintainer):
    """Records whether the store's write lock was free while deciding (a slow LLM must not hold it)."""

    def __init__(self, db):
        self.db, self.lock_free = db, []

    def decide(self, candidate, existing, detail):
        import sqlite3

        con = sqlite3.connect(self.db, timeout=0, isolation_level=None)
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute("ROLLBACK")
            self.lock_free.append(True)
        except sqlite3.OperationalError:
            self.lock_free.append(False)
        finally:
            con.close()
        return super().decide(candidate, existing, detail)


def test_maintainer_decides_outside_the_write_lock(tmp_path, schema, hash_embedder):
    db = tmp_path / "m.db"
    probe = LockProbingMaintainer(db)
    m = Memory(schema=schema, store=SQLiteStore(db), extractor=ScriptedExtractor(), maintainer=probe, embedder=hash_embedder)
    m.extractor.next = [Candidate(path=CUISINE, attribute="Italian", sentence="Italian"),
                        Candidate(path=CUISINE, attribute="Italian", sentence="Italian again")]
    r = m.add(conv(), "u")
    # the second candidate saw the first one's pending insert: one row, then a pass on it
    assert [d.action for d in r.decisions] == ["insert", "pass"] and r.decisions[1].target == r.decisions[0].target
    assert probe.lock_free == [True, True] and len(m.preferences("u")) == 1


class InterferingMaintainer(RuleMaintainer):
    """While the first decision is being made, another writer stores the same preference."""

    def __init__(self, other: Memory):
        self.other, self.calls = other, 0

    def decide(self, candidate, existing, detail):
        self.calls += 1
        if self.calls == 1:
            self.other.apply([candidate], "u", "concurrent")
        return super().decide(candidate, existing, detail)


def test_concurrent_write_between_decision_and_commit_is_seen(tmp_path, schema, hash_embedder):
    db = tmp_path / "m.db"
    other = Memory(schema=schema, store=SQLiteStore(db), extractor=ScriptedExtractor(), maintainer=RuleMaintainer(),
                   embedder=hash_embedder)
    m = Memory(schema=schema, store=SQLiteStore(db), extractor=ScriptedExtractor(), maintainer=InterferingMaintainer(other),
               embedder=hash_embedder)
    m.extractor.next = [Candidate(path=CUISINE, attribute="Italian", sentence="I love Italian")]
    r = m.add(conv(), "u")
    assert [d.action for d in r.decisions] == ["pass"]  # re-decided under the lock: no duplicate
    assert [p.conversation_id for p in m.preferences("u")] == ["concurrent"]


# --- consent outlives forget; the embedder's dimension is checked at write time --------------------
def test_an_opt_out_survives_forget_and_only_opt_in_lifts_it(mem):
    mem.extractor.next = [Candidate(path=CUISINE, attribute="Italian", sentence="I love Italian food")]
    mem.add(conv("c1"), "u")
    mem.opt_out("u", "Restaurant")
    assert mem.forget("u") == 0  # the opt-out had purged the only preference
    assert mem.store.opt_outs("u") == ["points_of_interest/restaurant"]
    r = mem.add(conv("c2"), "u")  # a conversation in that category after forget: nothing stored
    assert r.decisions == [] and [c.attribute for c in r.blocked] == ["Italian"]
    assert mem.preferences("u") == [] and not mem.extractor.seen_schemas[-1].allows(CUISINE)
    assert mem.opt_in("u", "Restaurant") is True
    assert [d.action for d in mem.add(conv("c3"), "u").decisions] == ["insert"]


def test_another_embedders_dimension_is_refused_at_write_time_naming_both(tmp_path, schema, hash_embedder):
    from boundmem.embed import HashEmbedder
    from boundmem.store.base import EmbeddingDimensionError

    store = SQLiteStore(tmp_path / "m.db")
    first = Memory(schema=schema, store=store, extractor=ScriptedExtractor(), maintainer=RuleMaintainer(),
                   embedder=hash_embedder)
    first.extractor.next = [Candidate(path=CUISINE, attribute="Italian", sentence="I love Italian food")]
    first.add(conv("c1"), "alice")
    other = Memory(schema=schema, store=store, extractor=ScriptedExtractor(), maintainer=RuleMaintainer(),
                   embedder=HashEmbedder(dim=64))
    other.extractor.next = [Candidate(path=TEMP, attribute="21", sentence="21 degrees please")]
    with pytest.raises(EmbeddingDimensionError, match="stored 256, given 64"):
        other.add(conv("c2"), "bob")  # a new user too: the store's dimension, not the user's
    assert other.preferences("bob") == [] and store.audit("bob") == []
    with pytest.raises(EmbeddingDimensionError, match="stored 256, given 64"):
        other.recall("Italian food", "alice", gate=False)
    assert [h.preference.attribute for h in first.recall("Italian food", "alice", gate=False)] == ["Italian"]
    store.close()
