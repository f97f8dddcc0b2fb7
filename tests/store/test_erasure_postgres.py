"""What PostgreSQL can be made to promise about erasure (the README says what it cannot): no row of any
boundmem table holds erased content or a forgotten user's id, the touched tables are VACUUMed right after, and with
vacuum="full" no live table or index file holds an erased byte."""
from __future__ import annotations

import time
import uuid
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from boundmem.schema.model import CategoryPath

psycopg = pytest.importorskip("psycopg")
from boundmem.store.postgres import PostgresStore  # noqa: E402

CUISINE = CategoryPath(main="poi", sub="restaurant", detail="cuisine")
MUSIC = CategoryPath(main="entertainment", sub="music", detail="genre")
FOOD_TAG, TRIP_TAG = "Preferences/Food/restaurant", "Activities/Travel/trip"
TABLES = ("users", "preferences", "observations", "opt_outs", "audit", "meta", "episodes", "episode_opt_outs",
          "preference_blocks")   # recall's per-user block holds the sentences too


def rows_with(url: str, needle: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as con:
        return {t: n for t in TABLES
                if (n := con.execute(f"SELECT count(*) FROM {t} r WHERE r::text LIKE %s", (f"%{needle}%",)).fetchone()[0])}


def fill(store, user, marker):
    with store.transaction(user) as tx:
        p = tx.insert(CUISINE, f"{marker}-food", f"I love {marker}-food", np.ones(8), f"conv-{marker}", f"insert {marker}")
        ep = tx.add_episode(f"AI recommended {marker} Grill.", (FOOD_TAG,), date(2024, 5, 7), np.ones(8),
                            f"post-thinking of conv-{marker}", conversation_id=f"conv-{marker}")
        tx.revise_episode(ep.id, "session ended", "moved into long-term memory", term="long")
        tx.note("pass", f"pass {marker}", p.id, {"sentence": f"{marker}-food again"})
        tx.replace(p.id, f"{marker}-dish", f"{marker}-dish now", np.ones(8), "c2", "update")
        tx.insert(MUSIC, "jazz", "jazz please", np.ones(8), "c3", "insert")
    with store.transaction("someone-else") as tx:
        tx.insert(CUISINE, "Thai", "Thai food", np.ones(8), "c9", "insert")
    return p


@pytest.fixture()
def marker():
    return f"Zq{uuid.uuid4().hex[:12]}Mk"


def test_forget_leaves_no_row_with_content_or_user_id_and_vacuums(pg_url, marker):
    s = PostgresStore(pg_url)
    user = f"user-{marker}"
    fill(s, user, marker)
    s.opt_out(user, "entertainment", cause="user opted out")
    assert rows_with(pg_url, marker)
    assert s.forget(user, cause="forget") == 1
    assert rows_with(pg_url, marker) == {}  # neither the content nor the user id (it contains the marker)
    assert s.opt_outs(user) == ["entertainment"] and s.verify_audit().ok
    with psycopg.connect(pg_url, autocommit=True) as con:
        for _ in range(50):  # statistics are reported asynchronously
            con.execute("SELECT pg_stat_clear_snapshot()")
            done = con.execute("SELECT count(*) FROM pg_stat_user_tables WHERE schemaname = current_schema() "
                               "AND relname IN ('preferences', 'audit', 'users') AND last_vacuum IS NOT NULL").fetchone()[0]
            if done == 3:
                break
            time.sleep(0.1)
    assert done == 3 and s.last_vacuum_error is None
    s.close()


def test_delete_and_opt_out_purge_leave_no_row_with_the_content(pg_url, marker):
    s = PostgresStore(pg_url)
    p = fill(s, "u", marker)
    s.delete("u", p.id, cause="deleted by user")
    assert rows_with(pg_url, marker)   # the episode still says it
    (ep,) = s.episodes("u")
    s.delete_episode("u", ep.id, cause="deleted by user")
    assert rows_with(pg_url, marker) == {}
    with s.transaction("u") as tx:
        tx.insert(MUSIC, f"{marker}-band", f"{marker}-band rocks", np.ones(8), "c4", "insert")
    assert rows_with(pg_url, marker)
    assert len(s.opt_out("u", "entertainment", cause="opt-out")) == 2
    assert rows_with(pg_url, marker) == {} and s.verify_audit().ok
    s.close()


def observe(store, user, marker):
    with store.transaction(user) as tx:
        a = tx.observe(MUSIC, f"{marker} jazz", "like", f"play some {marker} jazz", f"conv-{marker}", f"observed {marker}")
        b = tx.observe(CUISINE, "Thai", "like", f"Thai for {marker}", "c5", "observed")
    return a, b


def test_dismiss_expiry_and_opt_out_purge_leave_no_row_with_an_observation(pg_url, marker):
    from datetime import timedelta

    from boundmem.models import utcnow

    s = PostgresStore(pg_url)
    fill(s, "someone-else", "other")
    a, b = observe(s, "u", marker)
    assert rows_with(pg_url, marker)
    s.dismiss("u", a.id, cause="dismissed")
    s.opt_out("u", "poi", cause="opt-out")
    assert rows_with(pg_url, marker) == {} and s.observations("u") == []
    observe(s, "u2", marker)
    with s.transaction("u2") as tx:
        tx.expire_observations(utcnow() + timedelta(seconds=1), "expiry", "expired")
    assert rows_with(pg_url, marker) == {} and s.verify_audit().ok
    observe(s, f"user-{marker}", marker)
    s.forget(f"user-{marker}", cause="forget")
    assert rows_with(pg_url, marker) == {} and s.verify_audit().ok
    s.close()


def test_vacuum_full_leaves_no_erased_byte_in_the_table_files(pg_url, marker):
    s = PostgresStore(pg_url, vacuum="full")
    user = f"user-{marker}"
    fill(s, user, marker)
    with psycopg.connect(pg_url, autocommit=True) as con:
        try:
            data = Path(con.execute("SHOW data_directory").fetchone()[0])
        except psycopg.Error:
            pytest.skip("the server does not show its data directory to this role")
        if not data.is_dir():
            pytest.skip("the server's data directory is not on this machine")

        def raw_hits() -> int:
            con.execute("CHECKPOINT")
            files = [con.execute("SELECT pg_relation_filepath(%s)", (r,)).fetchone()[0] for (r,) in
                     con.execute("SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                                 "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i', 't')").fetchall()]
            toast = [con.execute("SELECT pg_relation_filepath(reltoastrelid) FROM pg_class WHERE oid = %s::regclass",
                                 (t,)).fetchone()[0] for t in TABLES]
            return sum((data / f).read_bytes().count(marker.encode()) for f in files + toast
                       if f and (data / f).exists())

        assert raw_hits() > 0
        s.forget(user, cause="forget")
        assert raw_hits() == 0
    s.close()


def test_vacuum_full_after_forget_leaves_no_byte_of_a_queued_or_finished_job(pg_url, marker):
    """an async job's conversation survived forget + VACUUM FULL in the jobs table's file (the jobs table
    was not vacuumed). Memory.forget drops the user's jobs, the store's erasure then vacuums the queue too."""
    from boundmem.jobs import JobQueue
    from boundmem.models import Conversation, Turn

    s = PostgresStore(pg_url, vacuum="full")
    user = f"user-{marker}"
    fill(s, user, marker)
    q = JobQueue(s)
    done = q.submit(user, Conversation(id="j1", turns=(Turn(role="user", text=f"I love {marker}-soup."),)))
    q.claim()
    q._finish(q.get(done.id), "done", "{}", None)   # finished: its text NULLed, the old row version a dead tuple
    q.submit(user, Conversation(id="j2", turns=(Turn(role="user", text=f"Play {marker}-wave " * 300),)))   # TOASTed
    with psycopg.connect(pg_url, autocommit=True) as con:
        try:
            data = Path(con.execute("SHOW data_directory").fetchone()[0])
        except psycopg.Error:
            pytest.skip("the server does not show its data directory to this role")
        if not data.is_dir():
            pytest.skip("the server's data directory is not on this machine")

        def raw_hits() -> dict[str, int]:
            con.execute("CHECKPOINT")
            rels = con.execute("SELECT c.oid::regclass::text, pg_relation_filepath(c.oid), "
                               "pg_relation_filepath(NULLIF(c.reltoastrelid, 0)) FROM pg_class c "
                               "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() "
                               "AND c.relkind IN ('r', 'i')").fetchall()
            hits = {}
            for name, *files in rels:
                n = sum((data / f).read_bytes().count(marker.encode()) for f in files if f and (data / f).exists())
                if n:
                    hits[name] = n
            return hits

        assert "jobs" in raw_hits()
        q.forget_user(user)   # what Memory.forget does first
        s.forget(user, cause="forget")
        assert raw_hits() == {} and s.last_vacuum_error is None
    q.close()
    s.close()


def test_deleting_and_opting_out_of_episodes_leave_no_row_with_their_content(pg_url, marker):
    s = PostgresStore(pg_url)
    fill(s, "someone-else", "other")
    with s.transaction("u") as tx:
        a = tx.add_episode(f"User hiked {marker} Peak.", (TRIP_TAG,), date(2024, 5, 8), np.ones(8), "post-thinking",
                           conversation_id=f"conv-{marker}")
        tx.add_episode(f"AI suggested {marker} Grill.", (FOOD_TAG,), date(2024, 5, 8), np.ones(8), "post-thinking")
    assert rows_with(pg_url, marker)
    s.delete_episode("u", a.id, cause="deleted by user")
    assert rows_with(pg_url, marker)   # the other one is still held
    assert len(s.episode_opt_out("u", "Preferences", cause="opt-out")) == 1
    assert rows_with(pg_url, marker) == {} and s.episodes("u") == [] and s.verify_audit().ok
    assert [e.text for e in s.episodes("someone-else")] == ["AI recommended other Grill."]
    s.close()


def test_erasure_through_the_api_leaves_no_row_on_postgres(pg_url, schema, cue_extractor):
    """episodes erased through the HTTP API (an opt-out purge, then forget) leave no row holding them."""
    from fastapi.testclient import TestClient

    from boundmem.service.app import create_app
    from service.conftest import KEY_A, KEYS, auth
    from service.test_episodes_surfaces import DINNER, _marked_chat, episodic_memory

    A = auth(KEY_A)
    marker = f"Zq{uuid.uuid4().hex[:10]}Mk"
    mem = episodic_memory(PostgresStore(pg_url), schema, cue_extractor)

    def rows() -> dict[str, int]:
        with psycopg.connect(pg_url, autocommit=True) as con:
            return {t: n for t in ("episodes", "audit", "users", "preferences", "episode_opt_outs")
                    if (n := con.execute(f"SELECT count(*) FROM {t} r WHERE r::text LIKE %s",
                                         (f"%{marker}%",)).fetchone()[0])}

    try:
        with TestClient(create_app(mem, KEYS)) as http:
            http.post("/v1/users/bob/episodes", headers=A, json={"turns": DINNER})
            assert http.post("/v1/users/alice/episodes", headers=A, json={"turns": _marked_chat(marker)}).status_code == 200
            http.post("/v1/users/alice/episodes/end-session", headers=A)
            assert rows().get("episodes")
            http.put("/v1/users/alice/episode-opt-outs/Recommendations", headers=A)
            assert http.delete("/v1/users/alice", headers=A).status_code == 200
            assert rows() == {} and mem.store.verify_audit().ok
            assert http.get("/v1/users/bob/episodes", headers=A).json()["episodes"]
    finally:
        mem.store.close()
