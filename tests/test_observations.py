"""Observations: one-off choices are kept apart from preferences, promoted when repeated in distinct
conversations or confirmed, erasable, blocked by opt-outs, expiring; the job queue behaves the same."""
from __future__ import annotations

from datetime import timedelta

import pytest

from boundmem import Candidate, CategoryPath, Conversation, Turn
from boundmem.errors import NotFoundError
from boundmem.models import utcnow
from test_memory import mem  # noqa: F401 - the same Memory fixture (scripted extractor, rule maintainer, SQLite)

GENRE = CategoryPath(main="entertainment_and_media", sub="music", detail="favorite_genres")
TEMP = CategoryPath(main="vehicle_settings_and_comfort", sub="climate_control", detail="preferred_temperature")


def conv(cid):
    return Conversation(id=cid, turns=(Turn(role="user", text="hi"),))


def chose(path, value, sentence=None, polarity="like"):
    return Candidate(path=path, attribute=value, sentence=sentence or f"play some {value}", polarity=polarity,
                     evidence="observed", span=value.lower())


def say(mem, cid, *cands, user="u"):
    mem.extractor.next = list(cands)
    return mem.add(conv(cid), user)


def test_the_same_choice_in_three_distinct_conversations_is_promoted_at_the_third(mem, schema):
    r1 = say(mem, "c1", chose(GENRE, "Jazz"))
    assert [o.attribute for o in r1.observed] == ["Jazz"] and r1.promoted == [] and r1.stored == []
    assert mem.preferences("u") == [] and mem.recall("play jazz", "u", gate=False) == []   # never recalled as a preference
    say(mem, "c1", chose(GENRE, "jazz"))   # the same conversation again does not count twice
    r2 = say(mem, "c2", chose(GENRE, "jazz"))
    assert r2.promoted == [] and len(mem.observations("u")) == 3
    r3 = say(mem, "c3", chose(GENRE, "Jazz", "put on some jazz"))
    assert [p.attribute for p in r3.promoted] == ["Jazz"] and r3.promoted[0].polarity == "like"
    assert r3.promoted == r3.stored and r3.observed == []
    assert [(p.attribute, p.polarity) for p in mem.preferences("u")] == [("Jazz", "like")]
    assert mem.observations("u") == []                                      # the promoted observations are removed
    assert [h.preference.attribute for h in mem.recall("play jazz", "u", gate=False)] == ["Jazz"]
    log = mem.store.audit("u")
    promote = [a for a in log if a.op == "promote"]
    assert len(promote) == 1 and promote[0].after["conversations"] == ["c1", "c2", "c3"]
    assert promote[0].preference_id == r3.promoted[0].id and "c1, c2, c3" in promote[0].cause
    insert = next(a for a in log if a.op == "insert")
    assert "3 distinct conversations" in insert.cause and "value from 'Jazz'" in insert.cause
    assert mem.store.verify_audit("u").ok


def test_mixed_choices_never_promote(mem):
    for cid, value in [("c1", "Jazz"), ("c2", "Rock"), ("c3", "Pop"), ("c4", "Jazz"), ("c5", "Rock")]:
        assert say(mem, cid, chose(GENRE, value)).promoted == []
    assert mem.preferences("u") == [] and len(mem.observations("u")) == 5


def test_a_choice_and_its_opposite_are_counted_apart(mem):
    say(mem, "c1", chose(GENRE, "Jazz"))
    say(mem, "c2", chose(GENRE, "Jazz", "not jazz now", polarity="dislike"))
    assert say(mem, "c3", chose(GENRE, "Jazz")).promoted == []
    assert [p.polarity for p in say(mem, "c4", chose(GENRE, "Jazz")).promoted] == ["like"]


def test_an_opted_out_category_stores_no_observation(mem):
    mem.opt_out("u", "Music")
    r = say(mem, "c1", chose(GENRE, "Jazz"))
    assert r.observed == [] and [c.attribute for c in r.blocked] == ["Jazz"]
    assert mem.observations("u") == [] and "Jazz" not in mem.export("u").model_dump_json()


def test_a_stated_preference_of_the_same_value_makes_the_observation_redundant(mem):
    say(mem, "c1", Candidate(path=GENRE, attribute="Jazz", sentence="I always listen to jazz"))
    assert say(mem, "c2", chose(GENRE, "jazz")).observed == [] and mem.observations("u") == []
    # the opposite polarity is new information: observed
    assert len(say(mem, "c3", chose(GENRE, "Jazz", polarity="dislike")).observed) == 1


def test_a_promotion_goes_through_maintenance_single_preference_update(mem):
    say(mem, "c0", Candidate(path=TEMP, attribute="21", sentence="21 degrees always"))
    for cid in ("c1", "c2", "c3"):
        r = say(mem, cid, chose(TEMP, "22", "make it 22 degrees"))
    assert [p.attribute for p in r.promoted] == ["22"]
    assert [p.attribute for p in mem.preferences("u")] == ["22"]   # the single-preference rule: updated, not added
    assert [d for d in mem.store.audit("u") if d.op == "update"]


def test_confirm_promotes_at_once_and_dismiss_erases(mem):
    o = say(mem, "c1", chose(GENRE, "Jazz")).observed[0]
    other = say(mem, "c2", chose(GENRE, "Rock")).observed[0]
    p = mem.confirm("u", o.id)
    assert (p.attribute, p.polarity, p.path) == ("Jazz", "like", GENRE) and mem.preferences("u") == [p]
    assert [x.id for x in mem.observations("u")] == [other.id]
    promote = [a for a in mem.store.audit("u") if a.op == "promote"]
    assert len(promote) == 1 and "confirmed by the user" in promote[0].cause
    with pytest.raises(NotFoundError):
        mem.confirm("u", o.id)
    with pytest.raises(NotFoundError):
        mem.confirm("someone-else", other.id)   # one user's observation is not another's
    mem.dismiss("u", other.id)
    assert mem.observations("u") == [] and "Rock" not in mem.export("u").model_dump_json()
    assert [a.op for a in mem.store.audit("u")][-1] == "dismiss"
    with pytest.raises(NotFoundError):
        mem.dismiss("u", other.id)
    assert mem.store.verify_audit("u").ok


def test_observations_expire_explicitly_and_on_the_next_write(mem):
    say(mem, "c1", chose(GENRE, "Jazz"))
    assert mem.expire_observations() == 0 and len(mem.observations("u")) == 1
    assert mem.expire_observations(now=utcnow() + timedelta(days=91)) == 1 and mem.observations("u") == []
    say(mem, "c2", chose(GENRE, "Rock"))
    mem.observation_days = 1e-9   # anything older than this is expired by the next write of the user's memory
    say(mem, "c3", chose(GENRE, "Pop"))
    assert [o.attribute for o in mem.observations("u")] == ["Pop"]
    assert "Rock" not in mem.export("u").model_dump_json()


def test_forget_and_voice_deletion_erase_observations(mem):
    from boundmem.consent.local import ConsentRequest

    say(mem, "c1", chose(GENRE, "Jazz"))
    say(mem, "c2", chose(TEMP, "22"))
    said = "forget my music preferences, the jazz too"
    r = mem.apply([], "u", "c3", consent=[ConsentRequest(kind="delete", prefix=str(GENRE), utterance=said, turn=0)])
    assert r.consent[0].kind == "delete"
    assert [o.attribute for o in mem.observations("u")] == ["22"]
    dumped = mem.export("u").model_dump_json()
    assert "Jazz" not in dumped and "jazz" not in dumped      # the kept utterance is redacted too
    mem.forget("u")
    assert mem.observations("u") == []


def test_the_job_queue_promotes_the_same_way(mem):
    mem.extractor.next = [chose(GENRE, "Jazz")]
    for cid in ("c1", "c2", "c3"):
        job = mem.submit(conv(cid), "u")
        assert mem.wait(job.id).status == "done"
    mem.jobs.close()
    assert [(p.attribute, p.polarity) for p in mem.preferences("u")] == [("Jazz", "like")]
    assert mem.observations("u") == []


def test_build_memory_passes_the_settings(tmp_path):
    from boundmem.config import Settings
    from boundmem.memory import build_memory

    m = build_memory(Settings(promote_after=2, observation_days=7), db=tmp_path / "b.db", extractor="keyword",
                     maintainer="rules", embedder="hash")
    assert (m.promote_after, m.observation_days) == (2, 7)
    m.store.close()


def test_the_audit_cause_of_an_insert_names_the_cue_and_the_span(mem):
    SHOP = CategoryPath(main="points_of_interest", sub="grocery_shopping", detail="preferred_supermarket_chains")
    say(mem, "c1", Candidate(path=SHOP, attribute="Aldi", sentence="I always shop at Aldi", cue="always", span="Aldi"))
    insert = next(a for a in mem.store.audit("u") if a.op == "insert")
    assert insert.cause.endswith("(lasting: 'always'; value from 'Aldi')")


def test_a_finished_job_says_what_was_observed_and_promoted_without_content(mem):
    mem.extractor.next = [chose(GENRE, "Jazz")]
    job = mem.submit(conv("c1"), "u")
    done = mem.wait(job.id)
    mem.jobs.close()
    assert [o["path"] for o in done.result["observed"]] == [str(GENRE)] and "Jazz" not in str(done.result)
