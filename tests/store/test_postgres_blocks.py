"""PostgreSQL recall reads one block per user: the block always agrees with the user's rows, a database made before
the blocks gets them on open, and a search touches the blocks, never the scattered rows of `preferences`."""
from __future__ import annotations

import numpy as np
import pytest

psycopg = pytest.importorskip("psycopg")
pytest.importorskip("pgvector")
from boundmem.schema.model import CategoryPath  # noqa: E402
from boundmem.store.postgres import PostgresStore  # noqa: E402

MUSIC = CategoryPath(main="entertainment", sub="music", detail="genre")
FOOD = CategoryPath(main="poi", sub="restaurant", detail="cuisine")


def _vec(i: int) -> np.ndarray:
    v = np.zeros(8, np.float32)
    v[i % 8] = 1
    return v


def _block(url: str, user: str):
    with psycopg.connect(url) as con:
        return con.execute("SELECT attributes FROM preference_blocks WHERE user_id=%s", (user,)).fetchone()


def test_every_write_rewrites_the_users_block(pg_url):
    s = PostgresStore(pg_url)
    with s.transaction("u") as tx:
        jazz = tx.insert(MUSIC, "jazz", "I love jazz", _vec(1), "c1", "t")
        tx.insert(FOOD, "Thai", "Thai food", _vec(2), "c1", "t")
    assert _block(pg_url, "u") == (["jazz", "Thai"],)
    with s.transaction("u") as tx:
        tx.replace(jazz.id, "blues", "blues now", _vec(3), "c2", "update")
    assert [p.attribute for p, _ in s.search("u", _vec(3), 1)] == ["blues"]
    s.opt_out("u", "poi", cause="opted out")
    assert _block(pg_url, "u") == (["blues"],) and [p.attribute for p, _ in s.search("u", _vec(2), 5)] == ["blues"]
    with pytest.raises(RuntimeError):
        with s.transaction("u") as tx:   # a failed transaction leaves the block as it was
            tx.insert(MUSIC, "rock", "rock", _vec(4), "c3", "t")
            raise RuntimeError("boom")
    assert _block(pg_url, "u") == (["blues"],)
    s.forget("u", cause="forget")
    assert _block(pg_url, "u") is None and s.search("u", _vec(3), 5) == []
    s.close()


def test_a_database_without_blocks_gets_them_on_open(pg_url):
    s = PostgresStore(pg_url)
    for user, i in (("a", 1), ("b", 2)):
        with s.transaction(user) as tx:
            tx.insert(MUSIC, f"genre {i}", "", _vec(i), None, "t")
    s.close()
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("DROP TABLE preference_blocks")
    s = PostgresStore(pg_url)
    assert [p.attribute for p, _ in s.search("b", _vec(2), 5)] == ["genre 2"] and _block(pg_url, "a") == (["genre 1"],)
    s.close()


def test_a_search_reads_the_block_not_the_rows(pg_url):
    s = PostgresStore(pg_url)
    with s.transaction("u") as tx:
        tx.insert(MUSIC, "jazz", "", _vec(1), None, "t")
    s.close()
    from boundmem.store.postgres_blocks import SEARCH_FROM

    with psycopg.connect(pg_url) as con:
        plan = "\n".join(r[0] for r in con.execute(f"EXPLAIN {SEARCH_FROM} WHERE b.user_id=%s ORDER BY d LIMIT 5",
                                                   ("[1,0,0,0,0,0,0,0]", "u")))
    assert "preference_blocks" in plan and " preferences" not in plan, plan
