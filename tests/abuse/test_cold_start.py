"""Warm means warm. The first 50 concurrent adds after `serve` said ready waited ~19 s each in
`extract/speech.py _identifier` (an lru_cache around a model load that `Memory.warm()` never called and that let
every concurrent first caller load it again). Here the language identifier's load is made slow on purpose (a stand-in
for the real file read) and counted; the reader's own model is a stand-in that reads nothing (the behaviour under
test is the loading, not the reading)."""
from __future__ import annotations

import threading
import time

import numpy as np

from boundmem.embed import HashEmbedder
from boundmem.extract import speech
from boundmem.extract.reader import ReaderExtractor
from boundmem.extract.reader_model import ReaderSettings
from boundmem.maintain.rules import RuleMaintainer
from boundmem.memory import Memory
from boundmem.store.sqlite import SQLiteStore

LOAD_SECONDS = 1.5   # the stand-in load; a request that pays for it is far past 3x a warm one
N = 50
TEXT = "I would really like to stop somewhere for Italian food tonight, if there is a place on the way."


class _Ident:
    def classify(self, text: str):
        return ("en", 1.0)


class _Reader:
    """What ReaderExtractor needs of its model, reading nothing (no files: the bundled model is not needed here)."""

    settings = ReaderSettings(input_hash="stand-in", category_scale=1.0, category_none=0.0, item_scale=1.0,
                              item_none=0.0)

    def warm(self) -> None:
        pass

    def read_many(self, turns):
        return [[] for _ in turns]


def _slow_loader(loads: list[int]):
    def load():
        loads.append(1)
        time.sleep(LOAD_SECONDS)   # the model file being read (a stand-in); not a wait on background work
        return _Ident()
    return load


def _concurrently(fn, n: int = N) -> list[float]:
    """`fn()` in n threads released together; each one's latency (seconds)."""
    start, out, lock = threading.Barrier(n), [], threading.Lock()

    def run():
        start.wait()
        t0 = time.perf_counter()
        fn()
        with lock:
            out.append(time.perf_counter() - t0)
    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == n, "a thread failed"
    return out


def test_concurrent_first_callers_load_the_language_identifier_once(monkeypatch, kind):
    k = kind("cold start: one load under 50 concurrent first callers")
    loads: list[int] = []
    monkeypatch.setattr(speech, "_IDENT", None)
    monkeypatch.setattr(speech, "_load_identifier", _slow_loader(loads))
    _concurrently(lambda: speech.is_english(TEXT))
    k.check(len(loads) == 1, f"the identifier was loaded {len(loads)} times")


def test_fifty_concurrent_first_adds_after_warm_are_as_fast_as_warm_ones(tmp_path, monkeypatch, schema, kind):
    k = kind("cold start: 50 concurrent first adds after warm()")
    loads: list[int] = []
    monkeypatch.setattr(speech, "_IDENT", None)
    monkeypatch.setattr(speech, "_load_identifier", _slow_loader(loads))
    embedder = HashEmbedder()
    store = SQLiteStore(tmp_path / "cold.db")
    mem = Memory(schema=schema, store=store, extractor=ReaderExtractor(embedder, model=_Reader()),
                 maintainer=RuleMaintainer(), embedder=embedder, consent=False)
    mem.warm()
    k.check(len(loads) == 1, f"warm() loaded the identifier {len(loads)} times")
    mem.warm()   # a second warm() (serve, then a worker) does no work again
    k.check(len(loads) == 1, "a second warm() loaded it again")
    users = iter(range(10_000))
    add = lambda: mem.add(TEXT, f"driver-{next(users)}")   # noqa: E731
    first = _concurrently(add)
    warm = _concurrently(add)
    p99_first, p99_warm = np.percentile(first, 99), np.percentile(warm, 99)
    print(f"\n50 concurrent adds: first p99 {p99_first * 1000:.0f} ms, warm p99 {p99_warm * 1000:.0f} ms")
    k.check(p99_first <= 3 * p99_warm + 0.05, (p99_first, p99_warm))
    k.check(len(loads) == 1, f"the request path loaded the identifier again ({len(loads)} loads)")
    store.close()
