"""`bench scale`: per-user recall on the store as the number of users grows, to a million.

Filling a million users through the store's transactions (audit chain, one commit per user) would take hours, so
the fill is bulk SQL into the store's own tables (`users`, `preferences`), in rounds the way real users arrive:
round j gives every user their j-th preference, so one user's rows are written far apart in time, as in a fleet.
No audit rows are written by the fill (the search path never reads them); `bytes_per_preference` is measured
separately by `bytes_per_preference` through the real API, audit included. Queries then go through the store's
public `search`, the call `Memory.recall` makes.
"""
from __future__ import annotations

import os
import random
import sqlite3
import statistics
import time
import uuid
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import typer

from boundmem.schema.load import builtin_schema

DIM = 384
_NOW = "2026-12-04T00:00:00+00:00"


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def _paths() -> list[tuple[str, str, str]]:
    return [(d.path.main, d.path.sub, d.path.detail) for d in builtin_schema().details()]


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def fill_sqlite(path: Path, users_from: int, users_to: int, per_user: int, rng: np.random.Generator,
                batch: int = 50_000) -> None:
    """Bulk rows in the SQLite store's layout (the store must have created the file: its DDL, its vector type; each
    user's block of keys as `next_key` would give it)."""
    from boundmem.store.sqlite import BLOCK, VECTOR

    paths = _paths()
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=OFF")
    con.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('embedding_dim', ?)", (str(DIM),))
    con.execute("BEGIN")
    con.executemany("INSERT INTO users(id, created_at) VALUES (?, ?)",
                    ((f"user-{u}", _NOW) for u in range(users_from, users_to)))
    for j in range(per_user):
        for lo in range(users_from, users_to, batch):
            hi = min(users_to, lo + batch)
            vecs = _unit(rng, hi - lo).astype(VECTOR)
            con.executemany(
                "INSERT INTO preferences(user, key, id, main, sub, detail, attribute, sentence, conversation_id, "
                "created_at, updated_at, embedding, polarity) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                ((f"user-{u}", (u + 1) * BLOCK + j, uuid.uuid4().hex, *paths[(u + j) % len(paths)], f"attribute {j}",
                  f"I always want attribute {j} on my drives, user {u}", f"conv-{u}-{j}", _NOW, _NOW,
                  vecs[u - lo].tobytes(), "like") for u in range(lo, hi)))
            con.execute("COMMIT")
            con.execute("BEGIN")
    con.execute("COMMIT")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


def fill_postgres(url: str, users_from: int, users_to: int, per_user: int, rng: np.random.Generator,
                  batch: int = 50_000) -> None:
    """Bulk rows in the PostgreSQL store's layout by COPY (the store must have created its tables)."""
    import psycopg

    paths = _paths()
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("INSERT INTO meta(key, value) VALUES ('embedding_dim', %s) ON CONFLICT DO NOTHING", (str(DIM),))
        with con.cursor().copy("COPY users(id, created_at) FROM STDIN") as cp:
            for u in range(users_from, users_to):
                cp.write_row((f"user-{u}", _NOW))
        for j in range(per_user):
            for lo in range(users_from, users_to, batch):
                hi = min(users_to, lo + batch)
                vecs = _unit(rng, hi - lo)
                with con.cursor().copy("COPY preferences(id, user_id, main, sub, detail, attribute, sentence, "
                                       "conversation_id, created_at, updated_at, embedding, polarity) FROM STDIN") as cp:
                    for u in range(lo, hi):
                        vec = "[" + ",".join(f"{x:.6g}" for x in vecs[u - lo]) + "]"
                        cp.write_row((uuid.uuid4().hex, f"user-{u}", *paths[(u + j) % len(paths)], f"attribute {j}",
                                      f"I always want attribute {j} on my drives, user {u}", f"conv-{u}-{j}", _NOW,
                                      _NOW, vec, "like"))
        con.execute("ANALYZE preferences")


def measure(store, tier: int, queries: int, rng: np.random.Generator, k: int = 5) -> dict:
    """Per-user search latency over users drawn at random from the `tier` users filled."""
    pick = random.Random(int(rng.integers(1 << 31)))
    lat = []
    for _ in range(queries):
        u = f"user-{pick.randrange(tier)}"
        q = _unit(rng, 1)[0]
        t = time.perf_counter()
        hits = store.search(u, q, k)
        lat.append((time.perf_counter() - t) * 1000)
        assert hits and all(p.user == u for p, _ in hits), u
    return {"p50_ms": _pct(lat, 50), "p95_ms": _pct(lat, 95), "p99_ms": _pct(lat, 99), "mean_ms": statistics.fmean(lat)}


def run_tiers(open_store: Callable[[], object], fill: Callable[[int, int], None], size: Callable[[], int],
              tiers: list[int], per_user: int, queries: int, seed: int = 0,
              progress: Optional[Callable[[dict], None]] = None) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows, filled = [], 0
    for tier in tiers:
        t0 = time.perf_counter()
        fill(filled, tier)
        fill_s = time.perf_counter() - t0
        filled = tier
        store = open_store()
        try:
            store.search("user-0", _unit(rng, 1)[0], 5)  # the store's own start-up is not a query
            row = {"users": tier, "preferences": tier * per_user, **measure(store, tier, queries, rng),
                   "fill_seconds": round(fill_s, 1), "bytes_on_disk": size()}
        finally:
            store.close()
        rows.append(row)
        if progress:
            progress(row)
    return rows


def bytes_per_preference(path: Path, users: int = 200, per_user: int = 20) -> dict:
    """Bytes on disk per preference written through the real store API (audit chain and indexes included)."""
    from boundmem.store.sqlite import SQLiteStore

    paths = _paths()
    rng = np.random.default_rng(1)
    s = SQLiteStore(path)
    try:
        for u in range(users):
            vecs = _unit(rng, per_user)
            with s.transaction(f"user-{u}") as tx:
                for j in range(per_user):
                    from boundmem.schema.model import CategoryPath

                    tx.insert(CategoryPath(main=paths[(u + j) % len(paths)][0], sub=paths[(u + j) % len(paths)][1],
                                           detail=paths[(u + j) % len(paths)][2]), f"attribute {j}",
                              f"I always want attribute {j} on my drives, user {u}", vecs[j], f"conv-{u}-{j}", "bench")
    finally:
        s.close()
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    tables = {name: n for name, n in con.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")}
    con.close()
    n = users * per_user
    return {"total": os.path.getsize(path) / n,
            "preferences": (tables.get("preferences", 0) + tables.get("preferences_user", 0)
                            + sum(v for k, v in tables.items() if k.startswith("sqlite_autoindex_preferences"))) / n,
            "audit": sum(v for k, v in tables.items() if k.startswith(("audit", "sqlite_autoindex_audit"))) / n}


def register(app: typer.Typer) -> None:
    @app.command("scale")
    def scale(out: Path = typer.Option(Path("bench-out/scale"), "--out"),
              tiers: str = typer.Option("1000,10000,100000,1000000", "--users", help="Comma-separated user counts."),
              per_user: int = typer.Option(10, "--per-user", help="Preferences per user."),
              queries: int = typer.Option(1000, "--queries", help="Searches per tier."),
              postgres: Optional[str] = typer.Option(None, "--postgres", help="postgresql:// URL, or 'pgserver'."),
              work: Optional[Path] = typer.Option(None, "--work", help="Folder for the store files (default: a "
                                                  "temporary folder; a million users at 10 preferences take ~10 GB).")):
        """Per-user recall latency from 1k to 1M users on SQLite (and PostgreSQL), bulk-filled; bytes per preference."""
        import json
        import tempfile

        from rich.console import Console

        from boundmem.store.sqlite import SQLiteStore

        console = Console()
        out.mkdir(parents=True, exist_ok=True)
        tier_list = [int(x) for x in tiers.split(",") if x.strip()]
        res: dict = {"cores": os.cpu_count(), "per_user": per_user, "queries": queries, "tiers": tier_list}
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            tmpdir = Path(tmp)
            res["bytes_per_preference"] = bytes_per_preference(tmpdir / "bytes.db")
            console.print(f"bytes per preference (real API, audit included): {res['bytes_per_preference']}")
            db = tmpdir / "scale.db"
            SQLiteStore(db).close()
            rng = np.random.default_rng(0)
            res["sqlite"] = run_tiers(lambda: SQLiteStore(db), lambda a, b: fill_sqlite(db, a, b, per_user, rng),
                                      lambda: db.stat().st_size, tier_list, per_user, queries,
                                      progress=lambda r: console.print(f"sqlite {r}"))
            db.unlink()
            if postgres:
                res["postgres"] = _postgres(postgres, tmpdir, tier_list, per_user, queries, console)
        base = {name: rows[0]["p95_ms"] for name, rows in res.items() if name in ("sqlite", "postgres")}
        for name in base:
            for r in res[name]:
                r["p95_vs_first_tier"] = r["p95_ms"] / base[name]
        (out / "results.json").write_text(json.dumps(res, indent=2))
        md = _markdown(res)
        (out / "report.md").write_text(md)
        console.print(md, markup=False, highlight=False)


def _postgres(url: str, work: Path, tiers: list[int], per_user: int, queries: int, console) -> list[dict]:
    from boundmem.store.postgres import PostgresStore

    server = None
    if url == "pgserver":
        import pgserver

        server = pgserver.get_server(work / "pg", cleanup_mode="stop")
        url = server.get_uri()
    PostgresStore(url).close()
    rng = np.random.default_rng(0)

    def size() -> int:
        import psycopg

        with psycopg.connect(url) as con:
            return con.execute("SELECT pg_total_relation_size('preferences') + pg_total_relation_size('users')").fetchone()[0]

    try:
        return run_tiers(lambda: PostgresStore(url), lambda a, b: fill_postgres(url, a, b, per_user, rng), size,
                         tiers, per_user, queries, progress=lambda r: console.print(f"postgres {r}"))
    finally:
        if server is not None:
            server.cleanup()


def _markdown(res: dict) -> str:
    lines = [f"# bench scale ({res['cores']} cores, {res['per_user']} preferences per user, {res['queries']} searches "
             "per tier)", "", "| store | users | p50 ms | p95 ms | p95 / first tier | bytes on disk per preference | fill s |",
             "|---|---|---|---|---|---|---|"]
    for name in ("sqlite", "postgres"):
        for r in res.get(name, []):
            lines.append(f"| {name} | {r['users']:,} | {r['p50_ms']:.3f} | {r['p95_ms']:.3f} | {r['p95_vs_first_tier']:.2f} | "
                         f"{r['bytes_on_disk'] / r['preferences']:.0f} | {r['fill_seconds']} |")
    b = res["bytes_per_preference"]
    lines += ["", f"Through the real API (audit chain and indexes included), SQLite: {b['total']:.0f} bytes per preference "
                  f"({b['preferences']:.0f} in the preferences table and its indexes, {b['audit']:.0f} in the audit log)."]
    return "\n".join(lines) + "\n"
