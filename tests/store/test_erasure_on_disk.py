"""Erasure holds on disk: for every erasure route, a unique marker written into the memory is found in
the raw bytes of the SQLite files beforehand and nowhere (.db, -wal, -shm) afterwards; after forget, neither is the
user id. Another connection stays open meanwhile (as an API server's worker threads would), so a clean close does
not delete the WAL for us: what is checked is what the store itself leaves behind.
"""
from __future__ import annotations

import sqlite3
import uuid
from datetime import date
from pathlib import Path

import pytest
from typer.testing import CliRunner

from boundmem import Candidate, CategoryPath, Conversation, Memory, Turn
from boundmem.extract.base import Extraction
from boundmem.maintain.rules import RuleMaintainer
from boundmem.store.sqlite import SQLiteStore

CUISINE = CategoryPath(main="points_of_interest", sub="restaurant", detail="favorite_cuisine")
TEMP = CategoryPath(main="vehicle_settings_and_comfort", sub="climate_control", detail="preferred_temperature")
SUFFIXES = ("", "-wal", "-shm")


class ScriptedExtractor:
    def __init__(self):
        self.next: list[Candidate] = []

    def extract(self, conversation, schema):
        return Extraction(candidates=list(self.next))


def raw_hits(db: Path, *needles: str) -> dict[str, int]:
    """How often each needle occurs in the raw bytes of the database file, its WAL and its shared-memory file."""
    out = {}
    for suffix in SUFFIXES:
        f = Path(f"{db}{suffix}")
        data = f.read_bytes() if f.exists() else b""
        for n in needles:
            out[f"{n} in {f.name}"] = data.count(n.encode()) + data.count(n.lower().encode())
    return out


def found(hits: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in hits.items() if v}


@pytest.fixture()
def marker():
    return f"Zq{uuid.uuid4().hex[:12]}Mk"


@pytest.fixture()
def setup(tmp_path, schema, hash_embedder, marker):
    """A memory on a file, holding the marker for a user of a unique id (attribute, sentence, conversation id, a
    pass note and an update), one opt-out, and another user's data; plus an idle second connection."""
    db = tmp_path / "m.db"
    mem = Memory(schema=schema, store=SQLiteStore(db), extractor=ScriptedExtractor(), maintainer=RuleMaintainer(),
                 embedder=hash_embedder)
    user = f"user-{uuid.uuid4().hex[:12]}"  # not the marker: delete and opt-out keep the user (only forget erases the id)
    say = lambda cid, *cands: (setattr(mem.extractor, "next", list(cands)),  # noqa: E731
                               mem.add(Conversation(id=cid, turns=(Turn(role="user", text="x"),)), user))
    say(f"conv-{marker}", Candidate(path=CUISINE, attribute=f"{marker}-food", sentence=f"I love {marker}-food"))
    say("c2", Candidate(path=CUISINE, attribute=f"{marker}-food", sentence=f"{marker}-food again please"))  # a pass
    say("c3", Candidate(path=TEMP, attribute="21", sentence=f"21 degrees in the {marker} car"))
    say("c4", Candidate(path=TEMP, attribute="19", sentence=f"19 degrees from now on, {marker}"))  # an update
    mem.opt_out(user, "Music")
    mem.extractor.next = [Candidate(path=CUISINE, attribute="Thai", sentence="Thai food is great")]
    mem.add(Conversation(id="other", turns=(Turn(role="user", text="x"),)), "someone-else")
    idle = sqlite3.connect(db)
    idle.execute("SELECT count(*) FROM preferences").fetchone()
    assert found(raw_hits(db, marker)) and found(raw_hits(db, user)), "the marker must be on disk before the erasure, or the test proves nothing"
    yield db, mem, user
    idle.close()
    mem.store.close()


def assert_gone(db: Path, mem: Memory, *needles: str) -> None:
    assert found(raw_hits(db, *needles)) == {}, "erased content still on disk (store open)"
    mem.store.close()
    assert found(raw_hits(db, *needles)) == {}, "erased content still on disk (store closed)"


def test_memory_forget_leaves_no_trace_of_content_or_user_id(setup, marker):
    db, mem, user = setup
    assert mem.forget(user) == 2
    assert_gone(db, mem, marker, user)
    s = SQLiteStore(db)
    assert s.preferences("someone-else")[0].attribute == "Thai" and s.users() == ["someone-else"]
    assert s.opt_outs(user) == ["entertainment_and_media/music"]  # consent outlives forget (under a pseudonym)
    assert s.verify_audit().ok
    s.close()


def test_memory_delete_of_one_preference_leaves_no_trace_of_it(setup, marker):
    db, mem, user = setup
    cuisine = [p for p in mem.preferences(user) if p.path == CUISINE]
    temp = [p for p in mem.preferences(user) if p.path == TEMP][0]
    assert len(cuisine) == 1
    mem.delete(user, cuisine[0].id)
    mem.delete(user, temp.id)
    exported = mem.export(user).model_dump_json()
    assert marker not in exported and marker.lower() not in exported
    assert_gone(db, mem, marker)


def test_opt_out_purge_leaves_no_trace_of_what_it_purged(setup, marker):
    db, mem, user = setup
    purged = mem.opt_out(user, "Points of Interest") + mem.opt_out(user, "Vehicle Settings and Comfort")
    assert len(purged) == 2
    assert marker not in mem.export(user).model_dump_json()
    assert_gone(db, mem, marker)


def test_cli_prefs_forget_leaves_no_trace(setup, marker):
    from boundmem.cli import app

    db, mem, user = setup
    r = CliRunner().invoke(app, ["prefs", "forget", "-u", user, "--db", str(db), "--yes"])
    assert r.exit_code == 0, r.output
    assert "2 preference(s) erased" in r.output
    assert_gone(db, mem, marker, user)


def test_cli_prefs_forget_of_an_api_user_leaves_no_trace(tmp_path, schema, hash_embedder, marker):
    """A user created through the API is stored as "tenant:user"; the CLI reaches it with --tenant."""
    from boundmem.cli import app

    db = tmp_path / "api.db"
    mem = Memory(schema=schema, store=SQLiteStore(db), extractor=ScriptedExtractor(), maintainer=RuleMaintainer(),
                 embedder=hash_embedder)
    mem.extractor.next = [Candidate(path=CUISINE, attribute=f"{marker}-food", sentence=f"I love {marker}-food")]
    mem.add(Conversation(id="c1", turns=(Turn(role="user", text="x"),)), f"acme:u{marker}")
    assert found(raw_hits(db, marker))
    r = CliRunner().invoke(app, ["prefs", "forget", "-u", f"u{marker}", "--tenant", "acme", "--db", str(db), "--yes"])
    assert r.exit_code == 0, r.output
    assert "1 preference(s) erased" in r.output
    assert_gone(db, mem, marker)


def test_caim_forget_leaves_no_trace(tmp_path, marker):
    from boundmem.caim.base import DialogueTurn
    from boundmem.cli.caim import app as caim_app
    from boundmem.caim.models import ThoughtDraft
    from boundmem.caim.store import CAIMStore

    db = tmp_path / "caim.db"
    user = f"user-{marker}"
    store = CAIMStore(db)
    with store.tx(user) as tx:
        tx.insert(ThoughtDraft(text=f"The user went hiking at {marker} peak.", tags=("activity",),
                               timestamp=date(2023, 5, 4), source_turn_ids=("2023-05-04#0",)))
        tx.push(date(2023, 5, 5), DialogueTurn(id="2023-05-05#0", query=f"Back to {marker} peak?", response="Sure."))
    with store.tx("someone-else") as tx:
        tx.insert(ThoughtDraft(text="The user likes tea.", timestamp=date(2023, 5, 4)))
    idle = sqlite3.connect(db)
    idle.execute("SELECT count(*) FROM caim_thoughts").fetchone()
    assert found(raw_hits(db, marker, user))
    r = CliRunner().invoke(caim_app, ["forget", "-u", user, "--db", str(db), "--yes"])
    assert r.exit_code == 0, r.output
    assert found(raw_hits(db, marker, user)) == {}
    store.close()
    assert found(raw_hits(db, marker, user)) == {}
    assert [t.text for t in CAIMStore(db).thoughts("someone-else")] == ["The user likes tea."]
    idle.close()


def test_the_store_sets_secure_delete_itself(tmp_path, monkeypatch):
    """Zeroing freed space must not depend on how this SQLite was compiled: connections start with it off here."""
    real = sqlite3.connect

    def connect_without_secure_delete(*a, **kw):
        con = real(*a, **kw)
        con.execute("PRAGMA secure_delete=OFF")
        return con

    monkeypatch.setattr(sqlite3, "connect", connect_without_secure_delete)
    s = SQLiteStore(tmp_path / "s.db")
    with s._use() as con:
        assert con.execute("PRAGMA secure_delete").fetchone()[0] == 1
    s.close()
    from boundmem.caim.store import CAIMStore

    c = CAIMStore(tmp_path / "c.db")
    assert c._con.execute("PRAGMA secure_delete").fetchone()[0] == 1
    c.close()


CRASH_AFTER_COMMIT = r"""
import os, sys, numpy as np
from boundmem.schema.model import CategoryPath
from boundmem.store.sqlite import SQLiteStore
db, marker = sys.argv[1], sys.argv[2]
s = SQLiteStore(db)
with s.transaction("u") as tx:
    tx.insert(CategoryPath(main="a", sub="b", detail="c"), marker, f"I like {marker}", np.ones(4), "c1", "x")
s._wipe_wal = lambda: None  # the process dies after the erasure's commit, before its WAL wipe
s.forget("u", cause="x")
os.kill(os.getpid(), 9)
"""


def test_a_crash_between_the_erasure_and_the_wal_wipe_is_repaired_when_the_store_is_opened(tmp_path, marker):
    import subprocess
    import sys

    db = tmp_path / "crash.db"
    p = subprocess.run([sys.executable, "-c", CRASH_AFTER_COMMIT, str(db), marker], capture_output=True, timeout=60)
    assert p.returncode == -9, p.stderr.decode()
    assert found(raw_hits(db, marker)), "the killed process should have left the marker in its WAL"
    s = SQLiteStore(db)
    assert found(raw_hits(db, marker)) == {}
    assert s.preferences("u") == [] and s.verify_audit().ok
    s.close()


# --- observations: every erasure route covers them too ----------------------------
GENRE = CategoryPath(main="entertainment_and_media", sub="music", detail="favorite_genres")


@pytest.fixture()
def observed(tmp_path, schema, hash_embedder, marker):
    """A memory whose only copies of the marker are observations (value, sentence, conversation id, the observe
    audit entries) in two categories, beside a preference and another user's observation; plus an idle connection."""
    db = tmp_path / "o.db"
    mem = Memory(schema=schema, store=SQLiteStore(db), extractor=ScriptedExtractor(), maintainer=RuleMaintainer(),
                 embedder=hash_embedder)
    user = f"user-{uuid.uuid4().hex[:12]}"
    chose = lambda path, value, sentence: Candidate(path=path, attribute=value, sentence=sentence,  # noqa: E731
                                                    evidence="observed")
    say = lambda cid, u, *cands: (setattr(mem.extractor, "next", list(cands)),  # noqa: E731
                                  mem.add(Conversation(id=cid, turns=(Turn(role="user", text="x"),)), u))[1]
    say("c1", user, Candidate(path=CUISINE, attribute="Thai", sentence="I always eat Thai"))
    r = say(f"conv-{marker}", user, chose(GENRE, f"{marker} jazz", f"play some {marker} jazz"),
            chose(TEMP, "22", f"22 degrees for {marker} please"))
    assert len(r.observed) == 2 and r.promoted == []
    say("c9", "someone-else", chose(GENRE, "Rock", "play some rock"))
    idle = sqlite3.connect(db)
    idle.execute("SELECT count(*) FROM observations").fetchone()
    assert found(raw_hits(db, marker)), "the marker must be on disk before the erasure, or the test proves nothing"
    yield db, mem, user
    idle.close()
    mem.store.close()


def assert_only_observations_went(db: Path, mem: Memory, user: str, marker: str) -> None:
    assert mem.observations(user) == [] and [o.attribute for o in mem.observations("someone-else")] == ["Rock"]
    assert marker not in mem.export(user).model_dump_json()
    assert mem.store.verify_audit().ok
    assert_gone(db, mem, marker)


def test_dismissing_observations_leaves_no_trace_of_them(observed, marker):
    db, mem, user = observed
    for o in mem.observations(user):
        mem.dismiss(user, o.id)
    assert [p.attribute for p in mem.preferences(user)] == ["Thai"]
    assert_only_observations_went(db, mem, user, marker)


def test_deleting_a_category_by_voice_leaves_no_trace_of_its_observations(observed, marker):
    from boundmem.consent.local import ConsentRequest

    db, mem, user = observed
    mem.apply([], user, "c5", consent=[ConsentRequest(kind="delete", prefix=str(p), utterance="forget my music", turn=0)
                                       for p in (GENRE, TEMP)])
    assert_only_observations_went(db, mem, user, marker)


def test_an_opt_out_purge_leaves_no_trace_of_the_observations_it_purged(observed, marker):
    db, mem, user = observed
    mem.opt_out(user, "Music")
    mem.opt_out(user, "Vehicle Settings and Comfort")
    assert_only_observations_went(db, mem, user, marker)


def test_expired_observations_leave_no_trace(observed, marker):
    from datetime import timedelta

    from boundmem.models import utcnow

    db, mem, user = observed
    assert mem.expire_observations(user, now=utcnow() + timedelta(days=mem.observation_days + 1)) == 2
    mem.store.observations("someone-else")  # the other user's is older too, but only `user` was asked for
    assert_only_observations_went(db, mem, user, marker)


def test_forget_leaves_no_trace_of_observations_or_the_user_id(observed, marker):
    db, mem, user = observed
    mem.forget(user)
    assert mem.observations(user) == []
    assert_gone(db, mem, marker, user)


# --- episodic memory: every erasure route covers episodes too ------------------------------
FOOD_TAG, TRIP_TAG = "Preferences/Food/restaurant", "Activities/Travel/trip"


@pytest.fixture()
def episodic(tmp_path, marker):
    """A store whose only copies of the marker are episodes (text, conversation id, their audit entries, a revision),
    beside a preference and another user's episode; plus an idle connection."""
    import numpy as np

    db = tmp_path / "e.db"
    s = SQLiteStore(db)
    user = f"user-{uuid.uuid4().hex[:12]}"
    with s.transaction(user) as tx:
        tx.insert(CUISINE, "Thai", "I always eat Thai", np.ones(8), "c1", "insert")
        a = tx.add_episode(f"AI recommended the restaurant {marker} Grill to the user.", (FOOD_TAG,), date(2024, 5, 7),
                           np.ones(8), f"post-thinking of conv-{marker}", conversation_id=f"conv-{marker}")
        tx.revise_episode(a.id, "session ended", "moved into long-term memory", term="long")
        tx.add_episode(f"User hiked {marker} Peak on the trip.", (TRIP_TAG, FOOD_TAG), date(2024, 5, 8), np.ones(8),
                       "post-thinking", conversation_id="c2")
    with s.transaction("someone-else") as tx:
        tx.add_episode("User likes tea.", (FOOD_TAG,), date(2024, 5, 7), np.ones(8), "post-thinking")
    idle = sqlite3.connect(db)
    idle.execute("SELECT count(*) FROM episodes").fetchone()
    assert found(raw_hits(db, marker)), "the marker must be on disk before the erasure, or the test proves nothing"
    yield db, s, user
    idle.close()
    s.close()


def assert_store_clean(db: Path, s: SQLiteStore, user: str, *needles: str) -> None:
    assert s.episodes(user) == [] and [e.text for e in s.episodes("someone-else")] == ["User likes tea."]
    assert needles[0] not in s.export(user).model_dump_json()   # the marker (the export names the user it is for)
    assert s.verify_audit().ok
    assert found(raw_hits(db, *needles)) == {}, "erased content still on disk (store open)"
    s.close()
    assert found(raw_hits(db, *needles)) == {}, "erased content still on disk (store closed)"


def test_deleting_episodes_leaves_no_trace_of_them(episodic, marker):
    db, s, user = episodic
    for e in s.episodes(user):
        s.delete_episode(user, e.id, cause="deleted by user")
    assert [p.attribute for p in s.preferences(user)] == ["Thai"]
    assert_store_clean(db, s, user, marker)


def test_an_episodic_opt_out_purge_leaves_no_trace_of_what_it_purged(episodic, marker):
    db, s, user = episodic
    assert len(s.episode_opt_out(user, "Preferences/Food", cause="user opted out")) == 2
    assert_store_clean(db, s, user, marker)


def test_forget_leaves_no_trace_of_episodes_or_the_user_id(episodic, marker):
    db, s, user = episodic
    s.forget(user, cause="forget")
    assert_store_clean(db, s, user, marker, user)
