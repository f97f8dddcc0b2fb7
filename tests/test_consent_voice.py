"""Consent by voice end to end: `Memory.add` with the default local stack (MiniLM, the local extractor and
maintainer) on a real SQLite file. "Stop remembering ..." opts out (purge + never again), "forget ..." deletes
(storing later is allowed); the utterance is the consent record, is never stored as a preference, and shows in the
export; ordinary sentences trigger nothing."""
from __future__ import annotations

import pytest

from boundmem.models import Conversation, Turn

RESTAURANT = "points_of_interest/restaurant"
MUSIC = "entertainment_and_media/music"


@pytest.fixture(scope="module")
def mem(tmp_path_factory):
    from boundmem import Memory

    m = Memory.local(tmp_path_factory.mktemp("voice") / "memory.db")
    yield m
    m.store.close()


_n = iter(range(10_000))


def say(mem, user, *texts):
    turns = tuple(Turn(role="user", text=t) for t in texts)
    return mem.add(Conversation(id=f"c{next(_n)}", turns=turns), user=user)


def held(mem, user):
    return sorted((str(p.path).rsplit("/", 1)[0], p.attribute) for p in mem.preferences(user))


def test_voice_opt_out_purges_the_category_and_blocks_later_ingests(mem):
    say(mem, "u1", "I always go for Italian food.", "I love jazz music.")
    assert held(mem, "u1") == [(MUSIC, "Jazz"), (RESTAURANT, "Italian")]
    r = say(mem, "u1", "Hey car, stop remembering where I like to eat.")
    assert [(c.kind, c.prefix, c.removed) for c in r.consent] == [("opt_out", RESTAURANT, 1)]
    assert r.decisions == []
    assert mem.store.opt_outs("u1") == [RESTAURANT]
    assert held(mem, "u1") == [(MUSIC, "Jazz")]
    # never stored again, in a later conversation or later in the same one
    r = say(mem, "u1", "I always go for Mexican food.")
    assert r.decisions == [] and held(mem, "u1") == [(MUSIC, "Jazz")]
    r = say(mem, "u1", "Don't keep track of my music.", "I love rock music.")
    assert [(c.kind, c.prefix, c.removed) for c in r.consent] == [("opt_out", MUSIC, 1)]
    assert r.decisions == [] and held(mem, "u1") == []
    # saying it again changes nothing and is reported as such
    r = say(mem, "u1", "Please stop remembering where I like to eat.")
    assert r.consent[0].note.startswith("already opted out")
    assert mem.store.opt_outs("u1") == [MUSIC, RESTAURANT]


def test_forget_deletes_what_is_stored_but_later_preferences_are_stored_again(mem):
    say(mem, "u2", "I love jazz music.", "I always go for Italian food.")
    r = say(mem, "u2", "Forget my music preferences.")
    assert [(c.kind, c.prefix, c.removed) for c in r.consent] == [("delete", MUSIC, 1)]
    assert held(mem, "u2") == [(RESTAURANT, "Italian")]
    assert mem.store.opt_outs("u2") == []
    r = say(mem, "u2", "I love rock music.")
    assert [d.action for d in r.decisions] == ["insert"]
    assert held(mem, "u2") == [(MUSIC, "Rock"), (RESTAURANT, "Italian")]
    # the deletion request is in the audit log with the utterance; the deleted preference's content is not
    audit = mem.export("u2").audit
    notes = [a for a in audit if a.op == "delete" and a.preference_id is None]
    assert notes and notes[0].after["utterance"] == "Forget my music preferences."
    assert not any("Jazz" in str(a.before) + str(a.after) + a.cause for a in audit)


def test_the_consent_utterance_is_never_stored_as_a_preference(mem):
    for text in ("Stop remembering where I like to eat, I love Italian food.", "Forget that I like jazz.",
                 "Delete what you know about my parking, I always park in garages."):
        say(mem, "u3", text)
    sentences = [p.sentence for p in mem.preferences("u3")]
    assert sentences == [], sentences
    assert all(a.op != "insert" for a in mem.export("u3").audit)


def test_the_opt_out_consent_record_is_in_the_export(mem):
    say(mem, "u4", "I love jazz music.")
    say(mem, "u4", "Don't keep track of my music.")
    e = mem.export("u4")
    assert [(c.prefix, c.utterance) for c in e.consents] == [(MUSIC, "Don't keep track of my music.")]
    assert e.consents[0].at is not None
    entry = next(a for a in e.audit if a.op == "opt_out")
    assert entry.after == {"prefix": MUSIC, "utterance": "Don't keep track of my music."}
    assert entry.why == "the user opted out by voice"
    # an opt-out by button/API has a record without an utterance
    mem.opt_out("u4", "Parking")
    recs = {c.prefix: c for c in mem.consents("u4")}
    assert recs["navigation_and_routing/parking"].utterance is None and recs[MUSIC].utterance
    # the chain still verifies, and forget keeps the opt-out (its utterance is erased with the rest)
    assert mem.store.verify_audit("u4").ok
    mem.forget("u4")
    assert mem.store.opt_outs("u4") == ["entertainment_and_media/music", "navigation_and_routing/parking"]
    assert all(c.utterance is None for c in mem.consents("u4"))


def test_non_consent_sentences_trigger_nothing(mem):
    say(mem, "u5", "I love jazz music.", "I always go for Italian food.")
    before = held(mem, "u5")
    for text in ("I like to eat Italian", "do you remember my music?", "stop the music",
                 "do you remember where I like to eat?", "don't forget my music preferences", "I always forget my keys."):
        r = say(mem, "u5", text)
        assert r.consent == [], text
    assert mem.store.opt_outs("u5") == []
    assert set(before) <= set(held(mem, "u5"))


def test_what_a_voice_request_erases_is_not_kept_in_its_consent_record_nor_on_disk(tmp_path):
    """"Forget that I like jazz": the record keeps the request, not the erased value, and no byte of the .db, -wal or
    -shm file holds it afterwards (the erasure guarantee of the other erasure routes)."""
    from boundmem import Memory

    db = tmp_path / "voice-erase.db"
    m = Memory.local(db)
    try:
        say(m, "v1", "I love jazz music.", "I always go for Italian food.")
        assert ("entertainment_and_media/music", "Jazz") in held(m, "v1")
        r = say(m, "v1", "Forget that I like jazz.")
        assert [(c.kind, c.removed) for c in r.consent] == [("delete", 1)]
        say(m, "v1", "Stop remembering that I like Italian food.")
        e = m.export("v1")
        notes = [a.after["utterance"] for a in e.audit if a.op in ("delete", "opt_out") and a.after]
        assert notes == ["Forget that I like [erased].", "Stop remembering that I like [erased] food."]
        assert e.consents[0].utterance == "Stop remembering that I like [erased] food."
        for f in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
            if f.exists():
                data = f.read_bytes().lower()
                assert b"jazz" not in data and b"italian" not in data, f
    finally:
        m.store.close()
