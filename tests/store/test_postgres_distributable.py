"""The PostgreSQL schema is distributable by user: every key of a table with user data includes its user key
(what Citus's create_distributed_table demands), and a database made with the older keys is rewritten on open."""
import numpy as np
import psycopg
import pytest

pytest.importorskip("pgvector")
from boundmem.schema.model import CategoryPath  # noqa: E402
from boundmem.store.postgres import DISTRIBUTION_KEYS, PostgresStore, key_constraints  # noqa: E402

PATH = CategoryPath(main="entertainment", sub="music", detail="genre")


def _vec(i: int) -> np.ndarray:
    v = np.zeros(8, np.float32)
    v[i % 8] = 1
    return v


def _keys(url: str) -> dict[str, list[tuple[str, str, list[str]]]]:
    with psycopg.connect(url) as con:
        return {t: key_constraints(con, t) for t in DISTRIBUTION_KEYS}


def _assert_distributable(url: str) -> None:
    for table, found in _keys(url).items():
        assert any(t == "p" for _, t, _ in found), f"{table} has no primary key"
        for name, _, cols in found:
            assert DISTRIBUTION_KEYS[table] in cols, f"{table}.{name} {cols} lacks {DISTRIBUTION_KEYS[table]}"


def test_every_key_includes_the_user_key(pg_url):
    PostgresStore(pg_url).close()
    _assert_distributable(pg_url)


def test_a_database_with_the_older_keys_is_rewritten_on_open_and_keeps_its_rows(pg_url):
    s = PostgresStore(pg_url)
    with s.transaction("alice") as tx:
        kept = tx.insert(PATH, "Jazz", "I love jazz.", _vec(1), "c1", "test")
    s.close()
    with psycopg.connect(pg_url, autocommit=True) as con:   # the keys as they were before
        con.execute("ALTER TABLE preferences DROP CONSTRAINT preferences_pkey, ADD PRIMARY KEY (id), "
                    "ADD UNIQUE (seq)")
        con.execute("ALTER TABLE audit DROP CONSTRAINT audit_pkey, ADD PRIMARY KEY (seq), ADD UNIQUE (subject, useq)")
    assert any(cols == ["seq"] for _, _, cols in _keys(pg_url)["preferences"])
    s = PostgresStore(pg_url)
    _assert_distributable(pg_url)
    assert [p.id for p in s.preferences("alice")] == [kept.id]
    assert s.verify_audit("alice").ok
    with s.transaction("alice") as tx:
        tx.insert(PATH, "Blues", "Blues too.", _vec(2), "c2", "test")
    assert [h[0].attribute for h in s.search("alice", _vec(2), 1)] == ["Blues"]
    s.close()
