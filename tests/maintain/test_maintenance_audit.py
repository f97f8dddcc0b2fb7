"""Every maintenance decision lands in the audit log when applied through the Memory facade."""
from __future__ import annotations

import pytest

from boundmem.extract.base import Extraction
from boundmem.maintain.rules import LocalMaintainer
from boundmem.memory import Memory
from boundmem.models import Candidate
from boundmem.schema.load import builtin_schema

SCHEMA = builtin_schema()
CUISINE = SCHEMA.resolve("Favorite Cuisine").path
PRICE = SCHEMA.resolve("Desired Price Range").path


class NoExtractor:
    def extract(self, conversation, schema):
        return Extraction()


@pytest.fixture()
def mem(sqlite_store, hash_embedder):
    return Memory(schema=SCHEMA, store=sqlite_store, extractor=NoExtractor(),
                  maintainer=LocalMaintainer(hash_embedder), embedder=hash_embedder)


def c(path, attribute, sentence, polarity="like"):
    return Candidate(path=path, attribute=attribute, sentence=sentence, polarity=polarity)


def test_insert_pass_append_update_are_all_audited(mem):
    first = mem.apply([c(CUISINE, "Italian", "I love Italian food")], "u", "c1").decisions[0]
    assert first.action == "insert"
    assert mem.apply([c(CUISINE, "italian", "Find an Italian place, my favourite")], "u", "c2").decisions[0].action == "pass"
    assert mem.apply([c(CUISINE, "Mexican", "Mexican too from now on")], "u", "c3").decisions[0].action == "append"
    mem.apply([c(PRICE, "cheap", "cheap places please")], "u", "c4")
    d = mem.apply([c(PRICE, "expensive", "I like fancy places now")], "u", "c5").decisions[0]
    assert d.action == "update"
    neg = mem.apply([c(CUISINE, "Italian", "I'm over Italian food, skip that cuisine", "dislike")], "u", "c6").decisions[0]
    assert (neg.action, neg.target) == ("update", first.target)

    log = mem.store.audit("u")
    assert [e.op for e in log] == ["insert", "pass", "insert", "insert", "update", "update"]
    assert log[1].preference_id == first.target and log[1].after["sentence"].startswith("Find an Italian")
    assert (log[4].before["attribute"], log[4].after["attribute"]) == ("cheap", "expensive")
    assert log[5].preference_id == first.target
    assert log[5].before["sentence"] == "I love Italian food"
    assert log[5].after["sentence"] == "I'm over Italian food, skip that cuisine"


def test_a_contradiction_turns_the_stored_like_into_a_dislike(mem):
    first = mem.apply([c(CUISINE, "Jazz", "I love jazz")], "u", "c1").decisions[0]
    mem.apply([c(CUISINE, "jazz", "I'm over jazz, I can't stand it anymore", "dislike")], "u", "c2")
    p = mem.store.get("u", first.target)
    assert (p.attribute, p.polarity) == ("Jazz", "dislike") and len(mem.preferences("u")) == 1
    last = mem.store.audit("u")[-1]
    assert (last.op, last.before["polarity"], last.after["polarity"], last.after["attribute"]) == \
        ("update", "like", "dislike", "Jazz")
    hit = mem.recall("what music do I dislike", "u", k=1, gate=False)[0]
    assert hit.preference.polarity == "dislike"   # recall returns the polarity with the value
