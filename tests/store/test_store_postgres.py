"""PostgreSQL-only behaviour: per-user (not global) locking, concurrent schema creation, the
factory's URL handling, recovery from a dropped connection."""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest

pytest.importorskip("psycopg")
pytest.importorskip("pgvector")

from boundmem.schema.model import CategoryPath  # noqa: E402
from boundmem.store.postgres import PostgresStore  # noqa: E402

PATH = CategoryPath(main="entertainment", sub="music", detail="genre")


def add(store, user, attribute, dim=4):
    with store.transaction(user) as tx:
        return tx.insert(PATH, attribute, "", np.ones(dim), None, "t")


def test_different_users_do_not_wait_for_each_other(pg_url):
    s = PostgresStore(pg_url)
    holding, release, other_done = threading.Event(), threading.Event(), threading.Event()

    def hold_a():
        with s.transaction("a") as tx:
            tx.insert(PATH, "jazz", "", np.ones(4), None, "t")
            holding.set()
            release.wait(10)

    t = threading.Thread(target=hold_a)
    t.start()
    try:
        assert holding.wait(10)
        b = threading.Thread(target=lambda: (add(s, "b", "rock"), other_done.set()))
        b.start()
        assert other_done.wait(10), "user b's transaction waited for user a's"
        b.join()
        assert s.preferences("a") == []  # a's transaction is still open: not visible yet
    finally:
        release.set()
        t.join(10)
    assert [p.attribute for p in s.preferences("a")] == ["jazz"]
    s.close()


def test_schema_creation_is_idempotent_and_safe_when_processes_start_together(pg_url):
    errors: list[str] = []
    stores: list[PostgresStore] = []

    def make():
        try:
            stores.append(PostgresStore(pg_url))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=make) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(stores) == 4
    p = add(stores[0], "u", "jazz")
    again = PostgresStore(pg_url)  # re-running the DDL on a live schema keeps the data and the trigger
    assert again.preferences("u") == [p]
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as con:
        with pytest.raises(psycopg.Error, match="append-only"):
            con.execute("DELETE FROM audit")
        n_triggers = con.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass('audit') "
                                 "AND NOT tgisinternal").fetchone()[0]
    assert n_triggers == 2
    for st in stores + [again]:
        st.close()


def test_factory_builds_a_postgres_store_from_a_url_with_its_own_schema(pg_admin_url):
    """`open_store("postgresql://...")` is how the CLI and the service get a PostgresStore; a schema
    of its own comes through the URL's options (search_path), as the module docstring advises."""
    import psycopg

    from boundmem.config import Settings
    from boundmem.store.registry import open_store

    if not pg_admin_url.startswith("postgresql://"):
        pytest.skip("needs a URL-form connection string")
    with psycopg.connect(pg_admin_url, autocommit=True) as con:
        con.execute("CREATE SCHEMA IF NOT EXISTS factory_test")
    sep = "&" if "?" in pg_admin_url else "?"
    s = open_store(f"{pg_admin_url}{sep}options=-csearch_path%3Dfactory_test,public", Settings())
    try:
        assert isinstance(s, PostgresStore)
        p = add(s, "u", "jazz")
        assert s.get("u", p.id) == p
        with psycopg.connect(pg_admin_url, autocommit=True) as con:
            n = con.execute("SELECT count(*) FROM factory_test.preferences").fetchone()[0]
        assert n == 1
    finally:
        s.close()
        with psycopg.connect(pg_admin_url, autocommit=True) as con:
            con.execute("DROP SCHEMA factory_test CASCADE")


def test_a_dropped_connection_is_replaced_transparently(pg_url):
    """After a server restart or an idle timeout, reads and new transactions run on a fresh connection."""
    import psycopg

    s = PostgresStore(pg_url)
    p = add(s, "u", "jazz")

    def kill_my_backend():
        with s._conn() as con:   # the pool's idle connection (min_size 1): the one the next operation gets
            pid = con.info.backend_pid
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    kill_my_backend()
    assert s.preferences("u") == [p]
    kill_my_backend()
    add(s, "u", "rock")
    assert [x.attribute for x in s.preferences("u")] == ["jazz", "rock"]
    kill_my_backend()
    assert [a.op for a in s.export("u").audit] == ["insert", "insert"]
    s.close()


def test_embedding_column_takes_any_dimension_per_store(pg_url, pg_admin_url):
    """No fixed column dimension: each database (here: schema) takes its embedder's; within one, a second
    embedder is refused at its first write, naming both dimensions."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    from boundmem.store.base import EmbeddingDimensionError

    s = PostgresStore(pg_url)
    add(s, "minilm-user", "jazz", dim=384)
    with pytest.raises(EmbeddingDimensionError, match="stored 384, given 256"):
        add(s, "hash-user", "jazz", dim=256)
    assert s.vectors("minilm-user")[1].shape == (1, 384) and s.embedding_dim() == 384
    s.close()
    with psycopg.connect(pg_admin_url, autocommit=True) as con:
        con.execute(f'CREATE SCHEMA "{os.getpid()}_hash"')
    t = PostgresStore(make_conninfo(pg_admin_url, options=f"-csearch_path={os.getpid()}_hash,public"))
    try:
        add(t, "hash-user", "jazz", dim=256)
        hits = t.search("hash-user", np.ones(256), k=1)
        assert hits[0][1] == pytest.approx(1.0, abs=1e-5)
    finally:
        t.close()
        with psycopg.connect(pg_admin_url, autocommit=True) as con:
            con.execute(f'DROP SCHEMA "{os.getpid()}_hash" CASCADE')


def test_connections_are_bounded_by_the_pool(pg_url, pg_admin_url):
    """16 threads writing at once share max_connections server connections; none is lost or fails.
    Counted on the server (pg_stat_activity), so a connection opened outside the pool would show."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    tag = f"pooltest{os.getpid()}"
    s = PostgresStore(make_conninfo(pg_url, application_name=tag), max_connections=3)
    errors: list[BaseException] = []
    admin = psycopg.connect(pg_admin_url, autocommit=True)

    def backends() -> int:
        return admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (tag,)).fetchone()[0]

    def work(n: int) -> None:
        try:
            for i in range(5):
                add(s, f"pool-{n}", f"genre {i}")
        except BaseException as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
    peak = 0
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        peak = max(peak, backends())
        threads[0].join(0.01)
    for t in threads:
        t.join()
    assert errors == []
    assert 1 <= peak <= 3
    assert backends() <= 3 and s.connections() <= 3
    assert all(len(s.preferences(f"pool-{n}")) == 5 for n in range(16))
    s.close()
    assert s.connections() == 0
    for _ in range(50):   # the server notices closed sockets asynchronously
        if backends() == 0:
            break
        threading.Event().wait(0.05)
    assert backends() == 0
    admin.close()
    with pytest.raises(Exception, match="closed"):
        s.preferences("pool-0")


def test_max_connections_must_be_positive(pg_url):
    with pytest.raises(ValueError, match="max_connections"):
        PostgresStore(pg_url, max_connections=0)


def test_tables_from_before_the_audit_chain_are_migrated(pg_url):
    """The DDL of the previous release, a few rows in it, then the current store opened on it."""
    import json

    import psycopg
    from psycopg.types.json import Jsonb

    old = [
        "CREATE TABLE users (id text PRIMARY KEY, created_at timestamptz NOT NULL)",
        """CREATE TABLE preferences (seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
          id text PRIMARY KEY, user_id text NOT NULL, main text NOT NULL, sub text NOT NULL, detail text NOT NULL,
          attribute text NOT NULL, sentence text NOT NULL, conversation_id text,
          created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL, embedding vector NOT NULL)""",
        "CREATE TABLE opt_outs (user_id text NOT NULL, prefix text NOT NULL, at timestamptz NOT NULL, PRIMARY KEY (user_id, prefix))",
        """CREATE TABLE audit (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, user_id text NOT NULL, op text NOT NULL,
          preference_id text, before jsonb, after jsonb, cause text NOT NULL, at timestamptz NOT NULL)""",
        "CREATE INDEX audit_user ON audit(user_id, seq)",
        """CREATE FUNCTION boundmem_audit_guard() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'audit log is append-only'; END $$""",
        "CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit FOR EACH ROW EXECUTE FUNCTION boundmem_audit_guard()",
    ]
    with psycopg.connect(pg_url, autocommit=True) as con:
        for stmt in old:
            con.execute(stmt)
        con.execute("INSERT INTO users VALUES ('u', now())")
        con.execute("INSERT INTO opt_outs VALUES ('u', 'poi', now())")
        after = {"id": "p1", "path": {"main": "entertainment", "sub": "music", "detail": "genre"}, "attribute": "jazz"}
        con.execute("INSERT INTO audit(user_id, op, preference_id, after, cause, at) VALUES ('u','insert','p1',%s,'c1',now())",
                    (Jsonb(after),))
        con.execute("INSERT INTO audit(user_id, op, after, cause, at) VALUES ('u','opt_out',%s,'x',now())",
                    (Jsonb({"prefix": "poi"}),))
    s = PostgresStore(pg_url)
    try:
        assert s.opt_outs("u") == ["poi"]
        assert [(a.seq, a.op, a.category) for a in s.audit("u")] == [(1, "insert", "entertainment/music/genre"),
                                                                    (2, "opt_out", "poi")]
        assert s.audit("u")[0].after == json.loads(json.dumps(after)) and s.verify_audit().ok
        add(s, "u", "rock")
        assert s.audit("u")[-1].seq == 3 and s.verify_audit("u").ok
        with psycopg.connect(pg_url, autocommit=True) as con:
            with pytest.raises(psycopg.Error, match="append-only"):
                con.execute("DELETE FROM audit")
            assert con.execute("SELECT to_regclass('audit_v1'), to_regclass('opt_outs_v1')").fetchone() == (None, None)
    finally:
        s.close()
