"""The embedder a Memory shares between its stages: one vector per distinct text within an ingest, and a bounded
cache of query vectors.

Why a wrapper and not the model's own text cache (base.CachedEmbedder): that cache is the model's (any text, up to
its size, then cleared whole), the hash embedder and a caller's own embedder have none, and nobody can tell what it
saves. Here an ingest's stages (consent, extraction, maintenance, storage) share one memo for as long as the ingest
runs, whatever the embedder, and recalls go through a least-recently-used cache of `capacity` queries with hit and
miss counters, so a repeated voice command ("play my music") costs a dictionary lookup instead of a forward pass.
Both belong to the wrapper (one per Memory): nothing is shared between Memories or kept at module level."""
from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Iterator, Sequence

import numpy as np

from .base import CachedEmbedder, Embedder


def query_key(text: str) -> str:
    """A query as cached and embedded: whitespace runs collapsed and ends trimmed, nothing more (MiniLM's tokenizer
    splits on whitespace, so its vector does not change; case and punctuation are kept: other models read them)."""
    return " ".join(text.split())


class CachingEmbedder:
    """An `Embedder` over `inner` with the ingest memo (`ingest()`) and the query cache (`embed_query`)."""

    def __init__(self, inner: Embedder, capacity: int = 1024):
        if capacity < 0:
            raise ValueError(f"query cache capacity must be >= 0, not {capacity}")
        self.inner = inner
        self.capacity = capacity
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._local = threading.local()   # the memo of the ingest running on this thread
        self.hits = self.misses = 0
        self.ingest_texts = self.ingest_encoded = 0

    # the embedder's identity and extras (backend, source, ...) are the inner one's
    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def __getattr__(self, attr: str):
        if attr == "inner":   # not set yet (copy, unpickling): no recursion
            raise AttributeError(attr)
        return getattr(self.inner, attr)

    # --- one vector per distinct text within an ingest ------------------------------------------
    @contextmanager
    def ingest(self) -> Iterator[None]:
        """While the block runs (on this thread), each distinct text is embedded once; nested blocks share the memo."""
        outer = getattr(self._local, "memo", None)
        if outer is None:
            self._local.memo = {}
        try:
            yield
        finally:
            if outer is None:
                self._local.memo = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        memo = getattr(self._local, "memo", None)
        if memo is None:
            return self.inner.embed(texts)
        texts = list(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in memo]
        if missing:
            memo.update(zip(missing, np.asarray(self.inner.embed(missing), dtype=np.float32)))
        with self._lock:
            self.ingest_texts += len(texts)
            self.ingest_encoded += len(missing)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.vstack([memo[t] for t in texts])

    # --- the query cache ------------------------------------------------------------------
    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one query (of its `query_key`), from the cache when it was asked recently."""
        key = query_key(text)
        if self.capacity:
            with self._lock:
                v = self._queries.get(key)
                if v is not None:
                    self._queries.move_to_end(key)
                    self.hits += 1
                    return v
                self.misses += 1
        # the model's own text cache is bypassed: queries are bounded here, not kept by the model
        inner = self.inner
        v = np.asarray(inner.encode_uncached([key]) if isinstance(inner, CachedEmbedder) else inner.embed([key]),
                       dtype=np.float32)[0]
        if self.capacity:
            v.setflags(write=False)   # shared by every caller that hits it
            with self._lock:
                self._queries[key] = v
                self._queries.move_to_end(key)
                while len(self._queries) > self.capacity:
                    self._queries.popitem(last=False)
        return v

    def stats(self) -> dict:
        """Query cache: capacity, size, hits, misses, hit rate; ingests: texts asked for and texts really embedded."""
        with self._lock:
            n = self.hits + self.misses
            return {"capacity": self.capacity, "size": len(self._queries), "hits": self.hits, "misses": self.misses,
                    "hit_rate": self.hits / n if n else 0.0,
                    "ingest_texts": self.ingest_texts, "ingest_embedded": self.ingest_encoded}

    def reset_stats(self) -> None:
        with self._lock:
            self.hits = self.misses = self.ingest_texts = self.ingest_encoded = 0

    def clear_cache(self) -> None:
        """Forget every cached query vector (and the model's own text cache): benchmarks, so each text is encoded."""
        with self._lock:
            self._queries.clear()
        clear = getattr(self.inner, "clear_cache", None)
        if clear is not None:
            clear()


def embed_query(embedder: Embedder, text: str) -> np.ndarray:
    """One query's vector through the embedder's query cache where it has one (a Memory's embedder has)."""
    if isinstance(embedder, CachingEmbedder):
        return embedder.embed_query(text)
    return np.asarray(embedder.embed([text]), dtype=np.float32)[0]
