"""The stores by URL scheme: `postgresql://...` (or `postgres://`) and SQLite (a path, or `sqlite:///path`)."""
from __future__ import annotations

from ..config import Settings
from ..registry import Registry
from .base import Store

STORES: Registry[Store] = Registry("store", "--db or BOUNDMEM_DB")


def open_store(url: str, settings: Settings) -> Store:
    """The store a `--db` value names; anything that is not a PostgreSQL URL is a SQLite file."""
    s = str(url)
    scheme = s.split("://", 1)[0] if "://" in s else "sqlite"
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
