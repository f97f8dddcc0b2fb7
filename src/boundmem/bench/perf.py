"""`boundmem bench perf`: throughput and latency on this machine, with the targets beside the measurements.

Timing lives here, never in tests. Recall latency is measured on the store's search (what grows
with the number of users) and separately end to end (query embedding included), because the
MiniLM forward pass dominates the latter and does not depend on the store at all.
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Optional

import numpy as np
import typer

from ..models import Conversation, Turn
from ..schema.load import builtin_schema

TARGETS = {"extraction_conv_per_s": 100.0, "recall_p99_ms_at_1M": 10.0}


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def _conversations(data: Optional[Path], n: int) -> list[Conversation]:
    """Real CarMem conversations when the data is there (distinct texts: no cache hits), else varied synthetic ones."""
    convs: list[Conversation] = []
    if data and data.exists():
        for line in data.open():
            for c in json.loads(line)["data"]:
                turns = tuple(Turn(role="user" if "USER" in t else "assistant", text=next(iter(t.values())))
                              for t in c["extraction_conversation"])
                convs.append(Conversation(id=c["conversation_uuid"], turns=turns))
                if len(convs) >= n:
                    return convs
    i = 0
    while len(convs) < n:
        convs.append(Conversation(id=f"syn-{i}", turns=(
            Turn(role="user", text=f"Trip {i}: I always prefer {['Italian', 'Mexican', 'Indian'][i % 3]} food and {18 + i % 7} degrees."),
            Turn(role="assistant", text=f"Noted for trip {i}."))))
        i += 1
    return convs


def backends() -> list[str]:
    """MiniLM backends that can run here (both are measured: they give the same vectors)."""
    from ..retrieve import onnx_embed

    out = ["onnx"] if onnx_embed.available() else []
    if onnx_embed.installed("sentence_transformers"):
        out.append("torch")
    return out


def _fresh(backend: str):
    """A new embedder (empty text cache, so every sentence is really embedded) with its model already loaded."""
    from ..factory import make_embedder

    emb = make_embedder(f"minilm-{backend}")
    emb.embed(["warm up"])
    emb.clear_cache()
    return emb


def measure_embedding(texts: list[str], backend: str = "torch") -> float:
    emb = _fresh(backend)
    t = time.perf_counter()
    emb.embed(texts)
    return len(texts) / (time.perf_counter() - t)


def measure_extraction(convs: list[Conversation], backend: str = "torch") -> dict:
    """Sequential (one call per conversation, as an assistant does live) and batched (bulk import)."""
    from ..factory import make_extractor

    schema = builtin_schema()
    res: dict = {"backend": backend}
    ex = make_extractor("local", _fresh(backend))
    if hasattr(ex, "warm"):
        ex.warm(schema)   # schema vectors are embedded once per process, not per conversation
    ex.embedder.clear_cache()
    t = time.perf_counter()
    n_found = sum(len(ex.extract(c, schema)) for c in convs)
    dt = time.perf_counter() - t
    res.update(extractor=type(ex).__name__, conversations=len(convs), seconds=dt, conv_per_s=len(convs) / dt,
               candidates=n_found)
    if hasattr(ex, "extract_many"):
        ex.embedder.clear_cache()
        t = time.perf_counter()
        ex.extract_many(convs, schema)
        res["batched_conv_per_s"] = len(convs) / (time.perf_counter() - t)
    return res


def measure_ingest(convs: list[Conversation], workdir: Path) -> dict:
    from ..factory import build_memory

    mem = build_memory(db=workdir / "ingest.db")
    mem.warm()
    t = time.perf_counter()
    for i, c in enumerate(convs):
        mem.add(c, f"user-{i % 50}")
    dt = time.perf_counter() - t
    mem.store.close()
    return {"conversations": len(convs), "seconds": dt, "conv_per_s": len(convs) / dt,
            "backend": getattr(mem.embedder, "backend", type(mem.embedder).__name__)}


def _fill(store, users_from: int, users_to: int, per_user: int, dim: int, rng: np.random.Generator, schema) -> None:
    paths = [r.path for r in schema.details()]
    for u in range(users_from, users_to):
        vecs = rng.standard_normal((per_user, dim)).astype(np.float32)
        with store.transaction(f"user-{u}") as tx:
            for j in range(per_user):
                tx.insert(paths[(u + j) % len(paths)], f"attr-{j}", f"sentence {u}-{j}", vecs[j], None, "bench perf")


def measure_recall_scaling(store, tiers: list[int], per_user: int, queries: int, dim: int = 384, seed: int = 0,
                           progress=None) -> list[dict]:
    schema = builtin_schema()
    rng = np.random.default_rng(seed)
    rows, filled = [], 0
    for tier in tiers:
        t0 = time.perf_counter()
        _fill(store, filled, tier, per_user, dim, rng, schema)
        fill_s = time.perf_counter() - t0
        filled = tier
        lat = []
        for _ in range(queries):
            u = f"user-{int(rng.integers(0, tier))}"
            q = rng.standard_normal(dim).astype(np.float32)
            t = time.perf_counter()
            hits = store.search(u, q, 5)
            lat.append((time.perf_counter() - t) * 1000)
            assert hits and all(h[0].user == u for h in hits)
        rows.append({"users": tier, "preferences": tier * per_user, "p50_ms": _pct(lat, 50), "p99_ms": _pct(lat, 99),
                     "mean_ms": statistics.fmean(lat), "fill_seconds": fill_s,
                     "fill_prefs_per_s": (tier - (rows[-1]["users"] if rows else 0)) * per_user / max(fill_s, 1e-9)})
        if progress:
            progress(rows[-1])
    return rows


def _plot(rows_by_store: dict[str, list[dict]], path: Path) -> None:
    from .report import _plt, save_figure

    fig, ax = _plt().subplots(figsize=(6, 4))
    for name, rows in rows_by_store.items():
        xs = [r["preferences"] for r in rows]
        ax.plot(xs, [r["p50_ms"] for r in rows], marker="o", label=f"{name} p50")
        ax.plot(xs, [r["p99_ms"] for r in rows], marker="x", linestyle="--", label=f"{name} p99")
    ax.axhline(TARGETS["recall_p99_ms_at_1M"], color="grey", linewidth=0.8, label="p99 target")
    ax.set_xscale("log")
    ax.set_xlabel("stored preferences (10 per user)")
    ax.set_ylabel("store search latency (ms)")
    ax.legend(fontsize=8)
    save_figure(fig, path)


def register(app: typer.Typer) -> None:
    @app.command("perf")
    def perf(data: Optional[Path] = typer.Option(None, "--data", help="CarMem dataset.jsonl (real conversations for throughput)."),
             out: Path = typer.Option(Path("bench-out/perf"), "--out"),
             tiers: str = typer.Option("1000,10000,100000", "--users", help="Comma-separated user counts (10 prefs each)."),
             conversations: int = typer.Option(500, "--conversations"),
             queries: int = typer.Option(1000, "--queries"),
             postgres: Optional[str] = typer.Option(None, "--postgres", help="postgresql:// URL, or 'pgserver' to start one."),
             skip_models: bool = typer.Option(False, "--skip-models", help="Only the store measurements."),
             writers: int = typer.Option(8, "--writers"), ops: int = typer.Option(10_000, "--ops", help="Operations per writer.")):
        """Extraction/embedding throughput, ingest throughput, recall latency as users grow, concurrent writers."""
        from rich.console import Console

        console = Console()
        out.mkdir(parents=True, exist_ok=True)
        res: dict = {"cores": os.cpu_count(), "targets": TARGETS}
        t_all = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            if not skip_models:
                convs = _conversations(data, conversations)
                texts = [t.text for c in convs for t in c.turns if t.role == "user"]
                res["user_sentences_per_conversation"] = len(texts) / len(convs)
                res["minilm_sentences_per_s"], res["extraction"] = {}, {}
                for backend in backends():
                    console.print(f"[{backend}] embedding {len(texts)} user sentences ...")
                    res["minilm_sentences_per_s"][backend] = measure_embedding(texts, backend)
                    console.print(f"[{backend}] extracting {len(convs)} conversations ...")
                    res["extraction"][backend] = measure_extraction(convs, backend)
                console.print("ingesting ...")
                res["ingest"] = measure_ingest(convs[: min(200, len(convs))], work)
            tier_list = [int(x) for x in tiers.split(",") if x.strip()]
            from ..store.sqlite import SQLiteStore

            scaling: dict[str, list[dict]] = {}
            console.print(f"recall latency on SQLite, users {tier_list} ...")
            s = SQLiteStore(work / "scale.db")
            scaling["sqlite"] = measure_recall_scaling(s, tier_list, 10, queries, progress=lambda r: console.print(r))
            s.close()
            if postgres:
                scaling["postgres"] = _postgres_scaling(postgres, work, tier_list, queries, console)
            res["recall_scaling"] = scaling
            try:
                from ..store.stress import hammer  # type: ignore[import-not-found]
            except ImportError:
                hammer = None
            if hammer and writers > 0 and ops > 0:
                console.print(f"{writers} writers x {ops} operations on SQLite ...")
                t = time.perf_counter()
                from functools import partial

                rep = hammer(partial(SQLiteStore, work / "hammer.db"), writers, ops)
                res["concurrent_writers"] = {"writers": writers, "ops": ops,
                                             "result": {**rep.model_dump(), "ok": rep.ok, "tx_per_second": rep.tx_per_second},
                                             "seconds": time.perf_counter() - t}
        res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        res["wall_seconds"] = time.perf_counter() - t_all
        (out / "results.json").write_text(json.dumps(res, indent=2, default=str))
        _plot(res["recall_scaling"], out / "recall_latency.png")
        md = _markdown(res)
        (out / "report.md").write_text(md)
        console.print(md)


def _postgres_scaling(url: str, work: Path, tiers: list[int], queries: int, console) -> list[dict]:
    from ..store.postgres import PostgresStore  # type: ignore[import-not-found]

    server = None
    if url == "pgserver":
        import pgserver

        server = pgserver.get_server(work / "pg", cleanup_mode="stop")
        url = server.get_uri()
    console.print(f"recall latency on PostgreSQL, users {tiers} ...")
    s = PostgresStore(url)
    try:
        return measure_recall_scaling(s, tiers, 10, queries, progress=lambda r: console.print(r))
    finally:
        s.close()
        if server is not None:
            server.cleanup()


def _markdown(res: dict) -> str:
    lines = [f"# boundmem bench perf ({res['cores']} cores, wall {res['wall_seconds']:.0f} s, peak RSS {res['peak_rss_mb']:.0f} MB)", ""]
    if "extraction" in res:
        ing, target = res["ingest"], TARGETS["extraction_conv_per_s"]
        lines += [f"{res['user_sentences_per_conversation']:.1f} user sentences per conversation.", "",
                  "| measure | value | target |", "|---|---|---|"]
        for backend, e in res["extraction"].items():
            lines += [f"| MiniLM raw embedding [{backend}] | {res['minilm_sentences_per_s'][backend]:.0f} sentences/s | |",
                      f"| local extraction, one call per conversation [{backend}] | {e['conv_per_s']:.1f} conversations/s | >= {target:.0f} |",
                      *([f"| local extraction, batched (`extract_many`) [{backend}] | {e['batched_conv_per_s']:.1f} conversations/s | "
                         f">= {target:.0f} |"] if "batched_conv_per_s" in e else [])]
        lines += [f"| ingest end to end (extract+maintain+store, SQLite, {ing.get('backend', 'default')}) | "
                  f"{ing['conv_per_s']:.1f} conversations/s | |", ""]
    for name, rows in res["recall_scaling"].items():
        lines += [f"Store search latency, {name} (top-5 of one user's 10 preferences, random 384-d vectors):", "",
                  "| users | preferences | p50 ms | p99 ms | fill prefs/s |", "|---|---|---|---|---|"]
        lines += [f"| {r['users']:,} | {r['preferences']:,} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['fill_prefs_per_s']:.0f} |"
                  for r in rows]
        lines.append("")
    if "concurrent_writers" in res:
        cw = res["concurrent_writers"]
        r = cw["result"]
        lines += [f"Concurrent writers on SQLite: {cw['writers']} x {cw['ops']} transactions in {cw['seconds']:.1f} s: "
                  f"{'ok' if r.get('ok') else 'NOT OK'}, {r.get('tx_per_second', 0):.0f} tx/s, "
                  f"p95 {r.get('latency_ms_p95', 0):.1f} ms; lost/duplicated: "
                  f"{ {k: v for k, v in r.items() if any(w in k for w in ('lost', 'dup', 'missing'))} }", ""]
    return "\n".join(lines)
