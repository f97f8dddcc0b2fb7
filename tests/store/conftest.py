"""Store fixtures: every contract test runs against SQLite and against a real PostgreSQL.

PostgreSQL comes from `pgserver` (PostgreSQL 16 + pgvector in a wheel): one server for the
whole session, a fresh database per test. As root, pgserver runs the server as a system user
`pgserver` that it creates with `useradd` and makes the data directory's parents traversable;
nothing else is needed, except that the data directory must not live under pytest's
/tmp/pytest-of-root: every pytest process (and several run at once here) resets that directory
to mode 0700, which locks the `pgserver` user out of its own data mid-start ("pg_ctl: could not
access directory ... Permission denied"). So the server lives in its own tempfile.mkdtemp().
Set BOUNDMEM_TEST_PG_URL to use an existing server instead (the role
needs CREATE DATABASE, and pgvector must be installed there).
"""
from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import pytest

from boundmem.store.sqlite import SQLiteStore

_SCHEMA_NUMBERS = itertools.count()


@pytest.fixture(scope="session")
def pg_admin_url():
    url = os.environ.get("BOUNDMEM_TEST_PG_URL")
    if url:
        yield url
        return
    with warnings.catch_warnings():  # platformdirs warns that XDG_RUNTIME_DIR is unset; harmless here
        warnings.simplefilter("ignore")
        pgserver = pytest.importorskip("pgserver", reason="pgserver is not installed (pip install pgserver)")
        root = Path(tempfile.mkdtemp(prefix="boundmem-pg-"))
        server = pgserver.get_server(root / "data", cleanup_mode="delete")
    url = server.get_uri()
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        # a throwaway test server: skip disk flushes (durability is not what these tests measure)
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            con.execute(f"ALTER SYSTEM SET {setting} = off")
        con.execute("SELECT pg_reload_conf()")
        con.execute("CREATE EXTENSION IF NOT EXISTS vector")
    try:
        yield url
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def pg_url(pg_admin_url):
    """Connection string whose tables land in a new, empty schema of the session's database.

    A schema per test (via search_path in the URL) instead of a database per test: CREATE/DROP
    DATABASE costs ~0.7 s each on a loaded 2-core box, a schema nothing. It also exercises the
    documented way of giving boundmem its own schema in a shared database.
    """
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"bm_test_{os.getpid()}_{next(_SCHEMA_NUMBERS)}"
    with psycopg.connect(pg_admin_url, autocommit=True) as con:
        con.execute(f'CREATE SCHEMA "{name}"')
    yield make_conninfo(pg_admin_url, options=f"-csearch_path={name},public")
    with psycopg.connect(pg_admin_url, autocommit=True) as con:
        con.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture(params=["sqlite", "postgres"])
def store_factory(request, tmp_path):
    """A function making Store objects on one fresh database (several objects = several "processes")."""
    if request.param == "sqlite":
        path = tmp_path / "store.db"

        def make():
            return SQLiteStore(path)
    else:
        from boundmem.store.postgres import PostgresStore

        url = request.getfixturevalue("pg_url")

        def make():
            return PostgresStore(url)
    made = []

    def factory():
        s = make()
        made.append(s)
        return s

    factory.kind = request.param
    yield factory
    for s in made:
        s.close()


@pytest.fixture()
def store(store_factory):
    return store_factory()
