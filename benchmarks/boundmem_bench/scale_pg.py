"""`bench scale` on PostgreSQL: the bulk fill in the store's layout, and a server restart with its files' cache dropped.

The fill writes `preferences` by binary COPY in rounds (round j gives every user their j-th preference, so one
user's rows land far apart, as in a fleet) and then has the store's own `rebuild_blocks` write the users' blocks,
twice (half-way and at the end, each time in a shuffled user order, with a VACUUM between as autovacuum would run):
the second pass reuses the space the first one freed, the fragmentation a fleet's rewrites leave. No CLUSTER.
"""
from __future__ import annotations

import random
import uuid
from datetime import datetime
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from .scale import DIM, NOW, drop_file_cache, paths, run_tiers, unit_vectors


def fill_postgres(url: str, users_from: int, users_to: int, per_user: int, rng: np.random.Generator,
                  batch: int = 50_000, block_batch: int = 2_000) -> None:
    """Rows in the PostgreSQL store's layout by binary COPY (vectors in pgvector's binary form), then the blocks."""
    import psycopg
    from pgvector.psycopg import register_vector

    from boundmem.store.postgres_blocks import rebuild_blocks

    kinds = paths()
    shuffle = random.Random(users_from)
    with psycopg.connect(url, autocommit=True) as con:
        register_vector(con)
        con.execute("INSERT INTO meta(key, value) VALUES ('embedding_dim', %s) ON CONFLICT DO NOTHING", (str(DIM),))
        with con.cursor().copy("COPY users(id, created_at) FROM STDIN") as cp:
            for u in range(users_from, users_to):
                cp.write_row((f"user-{u}", NOW))
        types = ["text"] * 8 + ["timestamptz", "timestamptz", "vector", "text"]
        now = datetime.fromisoformat(NOW)
        for j in range(per_user):
            for lo in range(users_from, users_to, batch):
                hi = min(users_to, lo + batch)
                vecs = unit_vectors(rng, hi - lo)
                with con.cursor().copy("COPY preferences(id, user_id, main, sub, detail, attribute, sentence, "
                                       "conversation_id, created_at, updated_at, embedding, polarity) "
                                       "FROM STDIN (FORMAT BINARY)") as cp:
                    cp.set_types(types)
                    for u in range(lo, hi):
                        cp.write_row((uuid.uuid4().hex, f"user-{u}", *kinds[(u + j) % len(kinds)], f"attribute {j}",
                                      f"I always want attribute {j} on my drives, user {u}", f"conv-{u}-{j}", now,
                                      now, vecs[u - lo], "like"))
            if j in {max(0, per_user // 2 - 1), per_user - 1}:
                users = [f"user-{u}" for u in range(users_from, users_to)]
                shuffle.shuffle(users)
                for lo in range(0, len(users), block_batch):
                    with con.transaction():
                        rebuild_blocks(con, users[lo: lo + block_batch])
                con.execute("VACUUM ANALYZE preferences, preference_blocks")


class PgServer:
    """A pgserver PostgreSQL in a folder of its own, which can be restarted with a cold cache."""

    def __init__(self, folder: Path):
        import pgserver

        self.data = folder / "pg"
        self.server = pgserver.get_server(self.data, cleanup_mode="stop")
        self.url = self.server.get_uri()

    def restart_cold(self) -> None:
        """Stop the server (its shared buffers go), drop the OS's cache of its files, start it again."""
        from pgserver._commands import pg_ctl

        pg_ctl(["-w", "stop"], pgdata=self.data, user=self.server.system_user)
        drop_file_cache(p for p in self.data.rglob("*") if p.is_file())
        self.server.ensure_postgres_running()
        self.url = self.server.get_uri()

    def close(self) -> None:
        self.server.cleanup()


def run_postgres(url: str, work: Path, tiers: list[int], per_user: int, queries: int, rounds: int,
                 progress: Optional[Callable[[dict], None]] = None) -> list[dict]:
    """Every tier as filled and after a cold restart (pgserver only: an outside server cannot be restarted from
    here), each interleaved with the reference (the first tier, in a database of its own on the same server)."""
    import psycopg

    from boundmem.store.postgres import PostgresStore

    server = PgServer(work) if url == "pgserver" else None
    url = server.url if server else url
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("DROP DATABASE IF EXISTS boundmem_scale_ref")
        con.execute("CREATE DATABASE boundmem_scale_ref")
    ref_url = psycopg.conninfo.make_conninfo(url, dbname="boundmem_scale_ref")
    PostgresStore(url).close()
    PostgresStore(ref_url).close()
    fill_postgres(ref_url, 0, tiers[0], per_user, np.random.default_rng(1))
    rng = np.random.default_rng(0)

    def size() -> int:
        with psycopg.connect(url) as con:
            return con.execute("SELECT pg_total_relation_size('preferences') + pg_total_relation_size('users') + "
                               "pg_total_relation_size('preference_blocks')").fetchone()[0]

    phases: list[tuple[str, Callable[[], None]]] = [("as filled", lambda: None)]
    if server is not None:
        phases.append(("cold restart", server.restart_cold))
    try:
        return run_tiers(lambda: PostgresStore(url), lambda a, b: fill_postgres(url, a, b, per_user, rng), size,
                         tiers, per_user, queries, progress=progress, open_ref=lambda: PostgresStore(ref_url),
                         phases=phases, rounds=rounds)
    finally:
        if server is not None:
            server.close()
