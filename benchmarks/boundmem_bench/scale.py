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
from datetime import datetime
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import typer

from boundmem.schema.load import builtin_schema

from .report import machine_info
from .results import Figure, write_results

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
    from boundmem.store.sqlite import BLOCK, encode_vectors

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
            vecs = encode_vectors(_unit(rng, hi - lo))
            con.executemany(
                "INSERT INTO preferences(user, key, id, main, sub, detail, attribute, sentence, conversation_id, "
                "created_at, updated_at, embedding, polarity) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                ((f"user-{u}", (u + 1) * BLOCK + j, uuid.uuid4().hex, *paths[(u + j) % len(paths)], f"attribute {j}",
                  f"I always want attribute {j} on my drives, user {u}", f"conv-{u}-{j}", _NOW, _NOW,
                  vecs[u - lo], "like") for u in range(lo, hi)))
            con.execute("COMMIT")
            con.execute("BEGIN")
    con.execute("COMMIT")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


def fill_postgres(url: str, users_from: int, users_to: int, per_user: int, rng: np.random.Generator,
                  batch: int = 50_000, cluster: bool = True) -> None:
    """Bulk rows in the PostgreSQL store's layout by binary COPY (vectors as pgvector's binary form, no text
    formatting of floats), in rounds; the secondary index is dropped for the fill and rebuilt after it. With
    `cluster` the table is then rewritten in user order (CLUSTER ... USING preferences_user), the layout a
    maintained database has (see the README), so a search reads a user's few adjacent pages instead of one page
    per preference scattered by arrival time."""
    import psycopg
    from pgvector.psycopg import register_vector

    paths = _paths()
    with psycopg.connect(url, autocommit=True) as con:
        register_vector(con)
        con.execute("INSERT INTO meta(key, value) VALUES ('embedding_dim', %s) ON CONFLICT DO NOTHING", (str(DIM),))
        con.execute("DROP INDEX IF EXISTS preferences_user")
        with con.cursor().copy("COPY users(id, created_at) FROM STDIN") as cp:
            for u in range(users_from, users_to):
                cp.write_row((f"user-{u}", _NOW))
        types = ["text"] * 8 + ["timestamptz", "timestamptz", "vector", "text"]
        now = datetime.fromisoformat(_NOW)
        for j in range(per_user):
            for lo in range(users_from, users_to, batch):
                hi = min(users_to, lo + batch)
                vecs = _unit(rng, hi - lo)
                with con.cursor().copy("COPY preferences(id, user_id, main, sub, detail, attribute, sentence, "
                                       "conversation_id, created_at, updated_at, embedding, polarity) "
                                       "FROM STDIN (FORMAT BINARY)") as cp:
                    cp.set_types(types)
                    for u in range(lo, hi):
                        cp.write_row((uuid.uuid4().hex, f"user-{u}", *paths[(u + j) % len(paths)], f"attribute {j}",
                                      f"I always want attribute {j} on my drives, user {u}", f"conv-{u}-{j}", now,
                                      now, vecs[u - lo], "like"))
        con.execute("CREATE INDEX IF NOT EXISTS preferences_user ON preferences(user_id, main, sub, detail)")
        if cluster:
            con.execute("CLUSTER preferences USING preferences_user")
        con.execute("VACUUM ANALYZE preferences")


def measure(store, tier: int, queries: int, rng: np.random.Generator, k: int = 5, ref=None, ref_users: int = 0) -> dict:
    """Per-user search latency over users drawn at random from the `tier` users filled. With `ref` (a store of
    `ref_users` users, the first tier kept aside) every query alternates with one on the reference, so the ratio of
    the two p95s is taken under the same machine load (the machine is shared; tiers are minutes apart)."""
    pick = random.Random(int(rng.integers(1 << 31)))
    lat, ref_lat = [], []
    for i in range(queries):
        for s, n, out in ((store, tier, lat), (ref, ref_users, ref_lat))[:: 1 if i % 2 else -1]:
            if s is None:
                continue
            u = f"user-{pick.randrange(n)}"
            q = _unit(rng, 1)[0]
            t = time.perf_counter()
            hits = s.search(u, q, k)
            out.append((time.perf_counter() - t) * 1000)
            assert hits and all(p.user == u for p, _ in hits), u
    row = {"p50_ms": _pct(lat, 50), "p95_ms": _pct(lat, 95), "p99_ms": _pct(lat, 99), "mean_ms": statistics.fmean(lat)}
    if ref_lat:
        row.update(ref_p95_ms=_pct(ref_lat, 95), p95_vs_ref=_pct(lat, 95) / _pct(ref_lat, 95))
    return row


def run_tiers(open_store: Callable[[], object], fill: Callable[[int, int], None], size: Callable[[], int],
              tiers: list[int], per_user: int, queries: int, seed: int = 0,
              progress: Optional[Callable[[dict], None]] = None, open_ref: Optional[Callable[[], object]] = None,
              phases: Optional[list[tuple[str, Callable[[], None]]]] = None) -> list[dict]:
    """Fill each tier on top of the last and measure it (interleaved with `open_ref`'s store, a copy of the first
    tier, when given). `phases` are (name, step) run in turn after a tier's fill, one measurement after each
    (PostgreSQL: as filled, then clustered by user)."""
    rng = np.random.default_rng(seed)
    rows, filled = [], 0
    ref = open_ref() if open_ref else None
    try:
        for tier in tiers:
            t0 = time.perf_counter()
            fill(filled, tier)
            fill_s = time.perf_counter() - t0
            filled = tier
            for phase, step in phases or [("", lambda: None)]:
                t1 = time.perf_counter()
                step()
                store = open_store()
                try:
                    store.search("user-0", _unit(rng, 1)[0], 5)  # the store's own start-up is not a query
                    row = {"users": tier, "preferences": tier * per_user,
                           **measure(store, tier, queries, rng, ref=ref, ref_users=tiers[0]),
                           "fill_seconds": round(fill_s, 1), "bytes_on_disk": size(),
                           "load_average_1m": round(os.getloadavg()[0], 2)}
                    if phase:
                        row.update(layout=phase, step_seconds=round(time.perf_counter() - t1, 1))
                finally:
                    store.close()
                rows.append(row)
                if progress:
                    progress(row)
    finally:
        if ref is not None:
            ref.close()
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
            "preferences": sum(v for k, v in tables.items() if k.startswith(("preferences", "sqlite_autoindex_preferences"))) / n,
            "audit": sum(v for k, v in tables.items() if k.startswith(("audit", "sqlite_autoindex_audit"))) / n}


def cluster_postgres(url: str) -> None:
    """Rewrite the preferences table in user order (what `CLUSTER` / pg_repack do on a maintained database)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute("CLUSTER preferences USING preferences_user")
        con.execute("VACUUM ANALYZE preferences")


def register(app: typer.Typer) -> None:
    @app.command("scale")
    def scale(out: Path = typer.Option(Path("bench-out/scale"), "--out"),
              tiers: str = typer.Option("1000,10000,100000,1000000", "--users", help="Comma-separated user counts."),
              per_user: int = typer.Option(10, "--per-user", help="Preferences per user."),
              queries: int = typer.Option(1000, "--queries", help="Searches per tier."),
              postgres: Optional[str] = typer.Option(None, "--postgres", help="postgresql:// URL, or 'pgserver'."),
              sqlite: bool = typer.Option(True, "--sqlite/--no-sqlite", help="Measure SQLite too."),
              work: Optional[Path] = typer.Option(None, "--work", help="Folder for the store files (default: a "
                                                  "temporary folder; a million users at 10 preferences take ~10 GB).")):
        """Per-user recall latency from 1k to 1M users on SQLite (and PostgreSQL), bulk-filled; bytes per preference.

        Every tier's queries alternate with queries on a reference store holding the first tier, so `p95_vs_ref`
        compares the two under the same load."""
        import json
        import tempfile

        from rich.console import Console

        from boundmem.store.sqlite import SQLiteStore

        console = Console()
        out.mkdir(parents=True, exist_ok=True)
        machine = machine_info()
        tier_list = [int(x) for x in tiers.split(",") if x.strip()]
        res: dict = {"cores": os.cpu_count(), "per_user": per_user, "queries": queries, "tiers": tier_list}
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            tmpdir = Path(tmp)
            res["bytes_per_preference"] = bytes_per_preference(tmpdir / "bytes.db")
            console.print(f"bytes per preference (real API, audit included): {res['bytes_per_preference']}")
            if sqlite:
                db, ref_db = tmpdir / "scale.db", tmpdir / "ref.db"
                SQLiteStore(db).close()
                SQLiteStore(ref_db).close()
                fill_sqlite(ref_db, 0, tier_list[0], per_user, np.random.default_rng(1))
                rng = np.random.default_rng(0)
                res["sqlite"] = run_tiers(lambda: SQLiteStore(db), lambda a, b: fill_sqlite(db, a, b, per_user, rng),
                                          lambda: db.stat().st_size, tier_list, per_user, queries,
                                          progress=lambda r: console.print(f"sqlite {r}"),
                                          open_ref=lambda: SQLiteStore(ref_db))
                db.unlink()
            if postgres:
                res["postgres"] = _postgres(postgres, tmpdir, tier_list, per_user, queries, console)
        for name in ("sqlite", "postgres"):
            rows = res.get(name, [])
            for r in rows:
                first = [f for f in rows if f.get("layout") == r.get("layout")][0]
                r["p95_vs_first_tier"] = r["p95_ms"] / first["p95_ms"]
        (out / "results.json").write_text(json.dumps(res, indent=2))
        md = _markdown(res)
        (out / "report.md").write_text(md)
        write_results("scale", out, md, headline(res), summary=res, machine=machine)
        console.print(md, markup=False, highlight=False)


def headline(res: dict) -> list[Figure]:
    """README's figures of a scale run: per store, recall p95 at the largest tier and its ratio to the first."""
    figs = []
    for name in ("sqlite", "postgres"):
        rows = res.get(name) or []
        if rows:
            last = rows[-1]
            figs += [Figure(f"per-user search p95 at {last['users']:,} users, {name}" +
                            (f" ({last['layout']})" if last.get("layout") else ""), last["p95_ms"], ".2f", "ms"),
                     Figure(f"... over the {rows[0]['users']:,}-user tier, {name}", last["p95_vs_first_tier"], ".2f", "x",
                            readme=False)]
    figs.append(Figure("bytes on disk per preference, SQLite, audit included", res["bytes_per_preference"]["total"],
                       ",.0f", readme=False))
    return figs


def _postgres(url: str, work: Path, tiers: list[int], per_user: int, queries: int, console) -> list[dict]:
    import psycopg

    from boundmem.store.postgres import PostgresStore

    server = None
    if url == "pgserver":
        import pgserver

        server = pgserver.get_server(work / "pg", cleanup_mode="stop")
        url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as con:  # the reference: the first tier, in a database of its own
        con.execute("DROP DATABASE IF EXISTS boundmem_scale_ref")
        con.execute("CREATE DATABASE boundmem_scale_ref")
    ref_url = psycopg.conninfo.make_conninfo(url, dbname="boundmem_scale_ref")
    PostgresStore(url).close()
    PostgresStore(ref_url).close()
    fill_postgres(ref_url, 0, tiers[0], per_user, np.random.default_rng(1))
    rng = np.random.default_rng(0)

    def size() -> int:
        with psycopg.connect(url) as con:
            return con.execute("SELECT pg_total_relation_size('preferences') + pg_total_relation_size('users')").fetchone()[0]

    try:
        return run_tiers(lambda: PostgresStore(url),
                         lambda a, b: fill_postgres(url, a, b, per_user, rng, cluster=False), size,
                         tiers, per_user, queries, progress=lambda r: console.print(f"postgres {r}"),
                         open_ref=lambda: PostgresStore(ref_url),
                         phases=[("as filled", lambda: None), ("clustered", lambda: cluster_postgres(url))])
    finally:
        if server is not None:
            server.cleanup()


def _markdown(res: dict) -> str:
    lines = [f"# bench scale ({res['cores']} cores, {res['per_user']} preferences per user, {res['queries']} searches "
             "per tier)", "", "| store | layout | users | p50 ms | p95 ms | p95 / first tier | p95 / reference (1st tier, "
             "interleaved) | bytes on disk per preference | fill s | load 1m |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name in ("sqlite", "postgres"):
        for r in res.get(name, []):
            lines.append(f"| {name} | {r.get('layout', 'as written')} | {r['users']:,} | {r['p50_ms']:.3f} | {r['p95_ms']:.3f} | "
                         f"{r['p95_vs_first_tier']:.2f} | {r.get('p95_vs_ref', float('nan')):.2f} | "
                         f"{r['bytes_on_disk'] / r['preferences']:.0f} | {r['fill_seconds']} | {r['load_average_1m']} |")
    b = res["bytes_per_preference"]
    lines += ["", f"Through the real API (audit chain and indexes included), SQLite: {b['total']:.0f} bytes per preference "
                  f"({b['preferences']:.0f} in the preferences table and its indexes, {b['audit']:.0f} in the audit log)."]
    return "\n".join(lines) + "\n"
