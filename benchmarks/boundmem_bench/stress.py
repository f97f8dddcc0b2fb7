"""Concurrent-writer stress for any Store, with an exact count of what must be there afterwards.

Every operation is one ingest transaction of the read-decide-write kind maintenance does:
  * a *shared* candidate: all writers, at their i-th operation, offer the same attribute to the
    same user; it must be inserted once and passed by everyone else (serialisation per user:
    two writers that both read "not stored" would append a duplicate);
  * a *unique* candidate ("w{writer}-op{i}"): must be stored exactly once (no lost commits).
Then the store is read back and the counts compared with exactly what was written.

`tests/store` runs it small (8 x 300); `boundmem bench perf` runs it large (e.g. 8 x 10 000)
and reports `HammerReport.tx_per_second` and latencies. `store_factory` must be picklable for
mode="processes" (e.g. `functools.partial(SQLiteStore, path)`), since each process opens its own.
"""
from __future__ import annotations

import multiprocessing
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Literal, Optional

import numpy as np
from pydantic import BaseModel

from boundmem.models import Candidate
from boundmem.schema.model import CategoryPath
from boundmem.store.base import Store, StoreBusy

Mode = Literal["threads", "processes"]
_BUSY_RETRIES = 20  # a writer that found the store busy this often in a row reports it as its error
Via = Literal["store", "memory"]

# used with via="store"; the store itself does not check paths against a schema
STORE_SHARED = CategoryPath(main="stress", sub="load", detail="shared")
STORE_UNIQUE = CategoryPath(main="stress", sub="load", detail="unique")


class HammerReport(BaseModel):
    mode: str
    via: str
    writers: int
    ops: int
    users: int
    shared_keys: int
    seconds: float
    committed: int
    errors: list[str]
    unique_expected: int
    unique_found: int
    unique_missing: int
    unique_duplicated: int
    shared_expected: int
    shared_found: int
    shared_duplicated: int
    unexpected: int
    audit_inserts: int
    audit_inserts_expected: int
    audit_passes: int
    audit_passes_expected: int
    latency_ms_p50: float
    latency_ms_p95: float
    latency_ms_max: float
    user_ids: list[str]

    @property
    def ok(self) -> bool:
        """Nothing lost, nothing duplicated, every transaction audited, no writer failed."""
        return (not self.errors and self.committed == self.writers * self.ops
                and self.unique_found == self.unique_expected and self.unique_missing == 0
                and self.unique_duplicated == 0 and self.shared_found == self.shared_expected
                and self.shared_duplicated == 0 and self.unexpected == 0
                and self.audit_inserts == self.audit_inserts_expected
                and self.audit_passes == self.audit_passes_expected)

    @property
    def tx_per_second(self) -> float:
        return self.committed / self.seconds if self.seconds > 0 else 0.0


def _user(run: str, i: int, users: int) -> str:
    return f"stress-{run}-u{i % users}"


def _shared(i: int, shared_keys: int) -> str:
    return f"shared-{i % shared_keys}"


def _unique(w: int, i: int) -> str:
    return f"w{w}-op{i}"


def memory_paths() -> tuple[CategoryPath, CategoryPath]:
    """(shared, unique) paths for via="memory": the first two multiple-preference details of the built-in schema."""
    from boundmem.schema.load import builtin_schema

    multi = [d.path for d in builtin_schema().details() if d.detail.multiple]
    return multi[0], multi[1]


def _paths(via: Via) -> tuple[CategoryPath, CategoryPath]:
    return (STORE_SHARED, STORE_UNIQUE) if via == "store" else memory_paths()


def _write(store: Store, w: int, ops: int, users: int, shared_keys: int, run: str, dim: int,
           via: Via, start: Optional[threading.Barrier] = None) -> tuple[int, Optional[str], float, float, list[float]]:
    """One writer's loop. Returns (committed, error, t_start, t_end, per-transaction seconds)."""
    shared_path, unique_path = _paths(via)
    rng = np.random.default_rng(1000 + w)
    mem = None
    if via == "memory":
        from boundmem.extract.keyword import KeywordExtractor
        from boundmem.maintain.rules import RuleMaintainer
        from boundmem.memory import Memory
        from boundmem.embed import HashEmbedder
        from boundmem.schema.load import builtin_schema

        mem = Memory(schema=builtin_schema(), store=store, extractor=KeywordExtractor(),
                     maintainer=RuleMaintainer(), embedder=HashEmbedder(dim))
    if start is not None:
        start.wait()
    committed, lat, t0 = 0, [], time.time()
    try:
        for i in range(ops):
            user, key, mine, conv = _user(run, i, users), _shared(i, shared_keys), _unique(w, i), f"w{w}-op{i}"
            t = time.perf_counter()
            vecs = rng.standard_normal((2, dim)).astype(np.float32)
            for attempt in range(_BUSY_RETRIES + 1):
                try:
                    if mem is not None:
                        mem.apply([Candidate(path=shared_path, attribute=key, sentence=f"I like {key}."),
                                   Candidate(path=unique_path, attribute=mine, sentence=f"I like {mine}.")], user, conv)
                    else:
                        with store.transaction(user) as tx:
                            if any(p.attribute == key for p in tx.preferences(shared_path)):
                                tx.note("pass", f"stress {conv}: {key} already stored")
                            else:
                                tx.insert(shared_path, key, f"I like {key}.", vecs[0], conv, f"stress {conv}")
                            tx.insert(unique_path, mine, f"I like {mine}.", vecs[1], conv, f"stress {conv}")
                    break
                except StoreBusy:  # the lock waits a few seconds, then says busy: a client retries (nothing was written)
                    if attempt == _BUSY_RETRIES:
                        raise
                    time.sleep(0.05)
            lat.append(time.perf_counter() - t)
            committed += 1
    except Exception as e:  # reported, not raised: the other writers' results still count
        return committed, f"writer {w}: {type(e).__name__}: {e}", t0, time.time(), lat
    return committed, None, t0, time.time(), lat


def _process_writer(store_factory: Callable[[], Store], *args):
    store = store_factory()
    try:
        return _write(store, *args)
    finally:
        store.close()


def tally(store: Store, writers: int, ops: int, users: int, shared_keys: int, run: str,
          via: Via = "store") -> dict:
    """Read the store back and count against exactly what the writers were told to write."""
    shared_path, unique_path = _paths(via)
    user_ids = sorted({_user(run, i, users) for i in range(ops)})
    want_unique = {(_user(run, i, users), _unique(w, i)) for w in range(writers) for i in range(ops)}
    want_shared = {(_user(run, i, users), _shared(i, shared_keys)) for i in range(ops)}
    got_unique: Counter = Counter()
    got_shared: Counter = Counter()
    unexpected = inserts = passes = 0
    for u in user_ids:
        for p in store.preferences(u):
            if p.path == unique_path:
                got_unique[(u, p.attribute)] += 1
            elif p.path == shared_path:
                got_shared[(u, p.attribute)] += 1
            else:
                unexpected += 1
        ops_seen = Counter(a.op for a in store.audit(u))
        inserts += ops_seen["insert"]
        passes += ops_seen["pass"]
    unexpected += sum(n for k, n in got_unique.items() if k not in want_unique)
    unexpected += sum(n for k, n in got_shared.items() if k not in want_shared)
    total = writers * ops
    return dict(
        unique_expected=len(want_unique), unique_found=sum(1 for k in want_unique if got_unique[k]),
        unique_missing=sum(1 for k in want_unique if not got_unique[k]),
        unique_duplicated=sum(n - 1 for n in got_unique.values() if n > 1),
        shared_expected=len(want_shared), shared_found=sum(1 for k in want_shared if got_shared[k]),
        shared_duplicated=sum(n - 1 for n in got_shared.values() if n > 1),
        unexpected=unexpected, audit_inserts=inserts, audit_inserts_expected=total + len(want_shared),
        audit_passes=passes, audit_passes_expected=total - len(want_shared), user_ids=user_ids)


def hammer(store_factory: Callable[[], Store], writers: int = 8, ops: int = 300, *, mode: Mode = "threads",
           via: Via = "store", users: int = 4, shared_keys: int = 16, dim: int = 64,
           start_method: str = "spawn", run: Optional[str] = None) -> HammerReport:
    """Run `writers` concurrent writers doing `ops` ingest transactions each; count the result.

    threads: one store object shared by all threads (the service's situation).
    processes: one store per process, made by `store_factory` in the child ("spawn" by default,
    because forking a process that holds threads or a loaded model is unsafe). With "spawn", a
    calling *script* needs the `if __name__ == "__main__":` guard (console entry points have it).
    """
    if writers < 1 or ops < 1:
        raise ValueError("writers and ops must be >= 1")
    run = run or uuid.uuid4().hex[:8]
    args = (ops, users, shared_keys, run, dim, via)
    results = []
    if mode == "threads":
        store = store_factory()
        try:
            barrier = threading.Barrier(writers)
            slots: list = [None] * writers

            def go(w: int) -> None:
                slots[w] = _write(store, w, *args, start=barrier)

            threads = [threading.Thread(target=go, args=(w,), name=f"hammer-{w}") for w in range(writers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            results = slots
            counts = tally(store, writers, ops, users, shared_keys, run, via)
        finally:
            store.close()
    elif mode == "processes":
        ctx = multiprocessing.get_context(start_method)
        with ProcessPoolExecutor(max_workers=writers, mp_context=ctx) as pool:
            futures = [pool.submit(_process_writer, store_factory, w, *args) for w in range(writers)]
            results = [f.result() for f in futures]
        store = store_factory()
        try:
            counts = tally(store, writers, ops, users, shared_keys, run, via)
        finally:
            store.close()
    else:
        raise ValueError(f"unknown mode {mode!r} (threads or processes)")
    lat = np.array([x for r in results for x in r[4]]) * 1000 if results else np.zeros(1)
    lat = lat if lat.size else np.zeros(1)
    return HammerReport(
        mode=mode, via=via, writers=writers, ops=ops, users=users, shared_keys=shared_keys,
        seconds=max(r[3] for r in results) - min(r[2] for r in results),
        committed=sum(r[0] for r in results), errors=[r[1] for r in results if r[1]],
        latency_ms_p50=float(np.percentile(lat, 50)), latency_ms_p95=float(np.percentile(lat, 95)),
        latency_ms_max=float(lat.max()), **counts)
