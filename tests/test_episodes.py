"""Episodic memory through `Memory` (episodes.py): opt-in, CAIM's post-thinking on ingest, sessions as days, dated
recall with CAIM's controller, the operator's ontology as the bound, the user's per-tag opt-outs, export and forget.
Model-free (keyword extractor, hash embedder: CAIM's lexicon tagger), on a real SQLite file."""
from __future__ import annotations

import asyncio
import sqlite3
import uuid
from datetime import date
from pathlib import Path

import pytest

from boundmem import Memory
from boundmem.async_memory import AsyncMemory
from boundmem.config import EpisodicSettings, Settings
from boundmem.episodes import EpisodicOff, UnknownTagError
from boundmem.errors import ConfigError, NotFoundError
from boundmem.extract.keyword import KeywordExtractor
from boundmem.maintain.rules import RuleMaintainer
from boundmem.store.sqlite import SQLiteStore

TUESDAY, THURSDAY, FRIDAY = date(2024, 5, 7), date(2024, 5, 9), date(2024, 5, 10)
DINNER = [{"role": "user", "content": "Can you suggest a restaurant for dinner tonight?"},
          {"role": "assistant", "content": "I recommend Green Leaf, a vegan place on Main Street with great curries."},
          {"role": "user", "content": "I went hiking at Blue Peak last weekend and loved the views."},
          {"role": "assistant", "content": "That sounds wonderful!"}]
JAZZ = [{"role": "user", "content": "Play some jazz for the drive please"},
        {"role": "assistant", "content": "Sure, I suggest the album Kind of Blue by Miles Davis."}]


def make(tmp_path, schema, hash_embedder, name="m.db", **episodic) -> Memory:
    settings = EpisodicSettings(**{"enabled": True, **episodic})
    return Memory(schema=schema, store=SQLiteStore(tmp_path / name), extractor=KeywordExtractor(),
                  maintainer=RuleMaintainer(), embedder=hash_embedder, episodic=settings)


@pytest.fixture()
def mem(tmp_path, schema, hash_embedder):
    m = make(tmp_path, schema, hash_embedder)
    yield m
    m.store.close()


def texts(mem, user, **kw):
    return [e.text for e in mem.episodes(user, **kw)]


def test_off_by_default_nothing_is_learned_and_the_episodic_calls_say_so(keyword_memory):
    assert Settings().episodic.enabled is False and keyword_memory.episodic.enabled is False
    r = keyword_memory.add(DINNER, "ann")
    assert r.episodes is None and keyword_memory.episodes("ann") == []
    with pytest.raises(EpisodicOff, match="BOUNDMEM_EPISODIC"):
        keyword_memory.remember_episode(DINNER, "ann")
    with pytest.raises(EpisodicOff):
        keyword_memory.recall_episodes("What did you suggest on Tuesday?", "ann")
    assert keyword_memory.episode_opt_outs("ann") == []   # seeing and controlling what is held always works


def test_the_settings_come_from_the_environment():
    s = Settings.from_env({"BOUNDMEM_EPISODIC": "on", "BOUNDMEM_EPISODIC_TENANTS": "acme, beta",
                           "BOUNDMEM_EPISODIC_ALLOW": "Recommendations,Activities/Trips"})
    assert s.episodic == EpisodicSettings(enabled=True, tenants=("acme", "beta"),
                                          allow=("Recommendations", "Activities/Trips"))
    assert Settings.from_env({"BOUNDMEM_EPISODIC": "0"}).episodic.enabled is False
    with pytest.raises(ConfigError, match="BOUNDMEM_EPISODIC='maybe'"):
        Settings.from_env({"BOUNDMEM_EPISODIC": "maybe"})


def test_an_allowed_tag_the_ontology_does_not_hold_is_a_config_error(tmp_path, schema, hash_embedder):
    m = make(tmp_path, schema, hash_embedder, allow=("Recommendations", "Gossip"))
    with pytest.raises(ConfigError, match="BOUNDMEM_EPISODIC_ALLOW.*'Gossip'"):
        m.remember_episode(DINNER, "ann")


def test_ingest_post_thinks_the_conversation_into_dated_tagged_short_term_episodes(mem):
    r = mem.add(DINNER, "ann", conversation_id="c1", day=TUESDAY)
    eps = mem.episodes("ann")
    assert r.episodes is not None and [e.id for e in r.episodes.stored] == [e.id for e in eps]
    assert "AI recommended Green Leaf, Main Street to user (a restaurant for dinner tonight)" in texts(mem, "ann")
    assert any("Blue Peak" in t for t in texts(mem, "ann"))
    for e in eps:
        assert e.day == TUESDAY and e.term == "short" and e.conversation_id == "c1" and e.tags
        assert all(t in mem.episodic_memory.ontology.tags for t in e.tags)
        assert set(e.source_turn_ids) <= {"c1#0", "c1#2"}   # the user turns the thought came from
    assert {a.op for a in mem.store.audit("ann")} >= {"episode"}
    assert not any("vegan place on Main Street with great curries" in t for t in texts(mem, "ann"))  # no verbatim turn


def test_the_operator_allows_tags_and_a_thought_with_none_is_not_kept(tmp_path, schema, hash_embedder):
    m = make(tmp_path, schema, hash_embedder, allow=("recommendations/places",))   # any spelling of the ontology's
    r = m.remember_episode(DINNER, "ann", day=TUESDAY)
    assert texts(m, "ann") == ["AI recommended Green Leaf, Main Street to user (a restaurant for dinner tonight)"]
    assert all(t.startswith("Recommendations/Places/") for e in m.episodes("ann") for t in e.tags)
    assert r.dropped >= 1 and r.blocked == 0   # the hike is under no allowed tag
    m.store.close()


def test_only_the_named_tenants_users_get_episodic_memory(tmp_path, schema, hash_embedder):
    m = make(tmp_path, schema, hash_embedder, tenants=("acme",))
    assert m.episodic_on("acme:ann") and not m.episodic_on("beta:ann") and not m.episodic_on("ann")
    assert m.add(DINNER, "beta:bob").episodes is None and m.episodes("beta:bob") == []
    assert m.add(DINNER, "acme:ann").episodes.stored
    with pytest.raises(EpisodicOff, match="tenant 'beta'"):
        m.remember_episode(DINNER, "beta:bob")
    m.store.close()


def test_a_session_is_a_day_repetitions_fold_and_a_later_day_moves_them_to_long_term(mem):
    first = mem.remember_episode(JAZZ, "ann", day=THURSDAY, conversation_id="j1")
    again = mem.remember_episode(JAZZ, "ann", day=THURSDAY, conversation_id="j2")
    assert again.merged == len(first.stored) and len(mem.episodes("ann")) == len(first.stored)
    rec = next(e for e in mem.episodes("ann") if "Kind of Blue" in e.text)
    assert rec.term == "short" and set(rec.source_turn_ids) == {"j1#0", "j2#0"}
    later = mem.remember_episode(DINNER, "ann", day=FRIDAY, conversation_id="d1")
    assert later.consolidated == len(first.stored)
    assert {e.term for e in mem.episodes("ann", until=THURSDAY)} == {"long"}
    assert {e.term for e in mem.episodes("ann", since=FRIDAY)} == {"short"}
    # the same recommendation a week later folds into the long-term episode, keeping its first day
    mem.remember_episode(JAZZ, "ann", day=date(2024, 5, 16), end_session=True, conversation_id="j3")
    rec = [e for e in mem.episodes("ann") if "Kind of Blue" in e.text]
    assert len(rec) == 1 and rec[0].day == THURSDAY and "j3#0" in rec[0].source_turn_ids and rec[0].term == "long"
    assert mem.end_episode_session("ann").consolidated == 0
    assert mem.store.verify_audit("ann").ok


def test_a_dated_question_finds_that_days_episode_first(mem):
    mem.remember_episode(DINNER, "ann", day=TUESDAY)
    mem.remember_episode(JAZZ, "ann", day=THURSDAY)
    hits = mem.recall_episodes("What was that restaurant you suggested on Tuesday?", "ann", today=FRIDAY)
    assert "Green Leaf" in hits[0].episode.text and hits[0].episode.day == TUESDAY
    assert "on 2024-05-07" in hits[0].why and "cosine" in hits[0].why
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))
    hits = mem.recall_episodes("What album did you recommend?", "ann", today=FRIDAY)
    assert "Kind of Blue" in hits[0].episode.text
    # since/until are a hard filter on the day
    assert all(h.episode.day == THURSDAY for h in
               mem.recall_episodes("What did you suggest?", "ann", since=THURSDAY, today=FRIDAY, gate=False))
    assert mem.recall_episodes("What did you suggest?", "ann", until=date(2024, 5, 1), today=FRIDAY) == []
    assert len(mem.recall_episodes("What did you suggest?", "ann", k=1, today=FRIDAY)) == 1


def test_a_dated_recall_question_gets_its_episode_under_the_cutoff_an_unrelated_request_none(mem):
    """The cutoff guards what the controller let through only because a stored episode was near (near=0: every
    request is near); a recall question says the answer is in memory, so it gets the best k however low the cosine:
    the same decision as `boundmem caim` (caim.controller.cutoff_applies)."""
    from boundmem.caim.retrieval import RetrievalParams
    from boundmem.episodes import EpisodicMemory

    mem._episodic_memory = EpisodicMemory(mem.store, mem.embedder, mem.episodic, params=RetrievalParams(
        pool=0, tag_bonus=0.0, date_bonus=0.0, cutoff=0.95, near=0.0))
    mem.remember_episode(DINNER, "ann", day=TUESDAY)
    mem.remember_episode(JAZZ, "ann", day=THURSDAY)
    asked = "What was that restaurant you suggested on Tuesday?"
    hits = mem.recall_episodes(asked, "ann", today=FRIDAY)
    assert hits and "Green Leaf" in hits[0].episode.text and all(h.score < 0.95 for h in hits)
    got = mem.recall_all(asked, "ann", today=FRIDAY)
    assert "Green Leaf" in got.episodes.hits[0].episode.text
    for unrelated in ("What's the weather like?", "Cinema popcorn prices"):
        r = mem.episodic_memory.search(unrelated, "ann", today=FRIDAY)
        assert r.retrieved and r.reason.startswith("close to a stored memory") and r.hits == []
        assert mem.recall_all(unrelated, "ann", today=FRIDAY).episodes.hits == []


@pytest.mark.parametrize("said", ["thanks, that's all", "hello there", "What's the weather like?"])
def test_the_controller_declines_requests_no_memory_should_shape(mem, said):
    mem.remember_episode(DINNER, "ann", day=TUESDAY)
    r = mem.episodic_memory.search(said, "ann", today=FRIDAY)
    assert r.retrieved is False and r.hits == [] and r.reason
    assert mem.recall_episodes(said, "ann", today=FRIDAY) == []


def test_a_per_tag_opt_out_purges_blocks_and_can_be_lifted(mem):
    mem.remember_episode(DINNER, "ann", day=TUESDAY)
    purged = mem.episode_opt_out("ann", "recommendations/places")
    assert [e.text for e in purged] == ["AI recommended Green Leaf, Main Street to user (a restaurant for dinner tonight)"]
    assert mem.episode_opt_outs("ann") == ["Recommendations/Places"]
    assert not any("Green Leaf" in t for t in texts(mem, "ann"))
    r = mem.remember_episode(DINNER, "ann", day=TUESDAY)
    assert r.blocked == 1 and not any("Green Leaf" in t for t in texts(mem, "ann"))
    assert all("Green Leaf" not in h.episode.text
               for h in mem.recall_episodes("What restaurant did you suggest on Tuesday?", "ann", today=FRIDAY))
    with pytest.raises(UnknownTagError):
        mem.episode_opt_out("ann", "Gossip")
    assert mem.episode_opt_in("ann", "Recommendations/Places") is True
    mem.remember_episode(DINNER, "ann", day=TUESDAY)
    assert any("Green Leaf" in t for t in texts(mem, "ann"))
    assert "the user opted out" in [a.why for a in mem.store.audit("ann") if a.op == "episode_opt_out"]


def test_delete_export_and_forget_cover_episodes(mem):
    mem.add(DINNER, "ann", day=TUESDAY)
    eps = mem.episodes("ann")
    gone = mem.delete_episode("ann", eps[0].id)
    assert gone == eps[0] and eps[0].id not in {e.id for e in mem.episodes("ann")}
    with pytest.raises(NotFoundError):
        mem.delete_episode("ann", eps[0].id)
    x = mem.export("ann")
    assert [e.id for e in x.episodes] == [e.id for e in eps[1:]]
    mem.episode_opt_out("ann", "Preferences/Music")
    mem.forget("ann")
    assert mem.episodes("ann") == [] and mem.episode_opt_outs("ann") == ["Preferences/Music"]


def test_async_memory_has_the_episodic_calls(mem):
    a = AsyncMemory(mem)

    async def go():
        await a.remember_episode(DINNER, "ann", day=TUESDAY)
        return await a.recall_episodes("What restaurant did you suggest on Tuesday?", "ann", today=FRIDAY)

    assert "Green Leaf" in asyncio.run(go())[0].episode.text


# --- erasure through the Memory API holds on disk ---------------------------------------------------
def raw(db: Path, needle: str) -> dict[str, int]:
    out = {}
    for suffix in ("", "-wal", "-shm"):
        f = Path(f"{db}{suffix}")
        if f.exists() and (n := f.read_bytes().count(needle.encode())):
            out[f.name] = n
    return out


@pytest.fixture()
def marked(tmp_path, schema, hash_embedder):
    marker = f"Zq{uuid.uuid4().hex[:10]}Mk"
    m = make(tmp_path, schema, hash_embedder, name="e.db")
    user = f"user-{uuid.uuid4().hex[:8]}"
    chat = [{"role": "user", "content": f"Can you suggest a restaurant near {marker} Square for dinner?"},
            {"role": "assistant", "content": f"I recommend {marker} Grill, a vegan place."},
            {"role": "user", "content": f"I went hiking at {marker} Peak last weekend and loved it."}]
    m.remember_episode(chat, user, day=TUESDAY, conversation_id="c1")
    m.remember_episode(JAZZ, user, day=THURSDAY)          # moves the first into long-term memory (a revision)
    m.remember_episode(DINNER, "someone-else", day=TUESDAY)
    idle = sqlite3.connect(tmp_path / "e.db")
    idle.execute("SELECT count(*) FROM episodes").fetchone()
    assert raw(tmp_path / "e.db", marker), "the marker must be on disk first, or the test proves nothing"
    yield m, tmp_path / "e.db", user, marker
    idle.close()
    m.store.close()


def test_forget_deleting_and_opting_out_leave_no_byte_of_an_episode(marked):
    m, db, user, marker = marked
    for e in [e for e in m.episodes(user) if "Peak" in e.text]:
        m.delete_episode(user, e.id)
    m.episode_opt_out(user, "Recommendations")
    m.episode_opt_out(user, "Preferences")
    assert all(marker not in e.text for e in m.episodes(user)) and marker not in m.export(user).model_dump_json()
    assert raw(db, marker) == {}
    m.forget(user)
    assert raw(db, marker) == {} and m.episodes("someone-else") and m.store.verify_audit().ok
    m.store.close()
    assert raw(db, marker) == {}


def test_a_consent_turn_is_not_post_thought(mem):
    r = mem.add([{"role": "user", "content": "Stop remembering my music preferences."},
                 {"role": "user", "content": "I went hiking at Blue Peak last weekend and loved the views."}], "ann",
                day=TUESDAY)
    assert [c.kind for c in r.consent] == ["opt_out"]
    assert not any("remembering" in t for t in texts(mem, "ann")) and any("Blue Peak" in t for t in texts(mem, "ann"))
