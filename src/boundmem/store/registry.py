"""The stores by URL scheme: `postgresql://...` (or `postgres://`, or a libpq "host=... dbname=..." string) and
SQLite (a path, or `sqlite:///path`)."""
from __future__ import annotations

import re

from ..config import Settings
from ..registry import Registry
from .base import Store

STORES: Registry[Store] = Registry("store", "--db or BOUNDMEM_DB")


# a libpq key/value connection string starts with one of its keywords and "=" (never a file name one would choose)
_CONNINFO = re.compile(r"\s*(host|hostaddr|port|dbname|user|password|passfile|service|sslmode|application_name|"
                       r"connect_timeout|options|target_session_attrs)\s*=")


def open_store(url: str, settings: Settings) -> Store:
    """The store a `--db` value names: a PostgreSQL URL or libpq connection string, else a SQLite file (so
    `--db "host=db dbname=mem"` reaches PostgreSQL instead of creating a file of that name)."""
    s = str(url)
    scheme = s.split("://", 1)[0] if "://" in s else "postgresql" if _CONNINFO.match(s) else "sqlite"
    return STORES.load(scheme, s, settings)


@STORES.register("postgresql", "PostgreSQL + pgvector (the `postgres` extra)")
def _postgres(url: str, settings: Settings) -> Store:
    from .postgres import PostgresStore

    return PostgresStore(url, vacuum=settings.pg_vacuum)


STORES.register("postgres", "the same")(_postgres)


@STORES.register("sqlite", "a SQLite file")
def _sqlite(url: str, settings: Settings) -> Store:
    from .sqlite import SQLiteStore

    return SQLiteStore(url.removeprefix("sqlite:///"))
