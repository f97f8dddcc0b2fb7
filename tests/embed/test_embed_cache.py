"""The Memory's shared embedder: one vector per distinct text within an ingest, a bounded query cache."""
from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import pytest

from boundmem.config import Settings
from boundmem.embed import HashEmbedder
from boundmem.embed.cache import CachingEmbedder
from boundmem.memory import build_memory
from boundmem.models import Conversation, Turn


class Counting(HashEmbedder):
    """The hash embedder (which caches nothing itself), counting each text it is asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: Counter = Counter()

    def embed(self, texts):
        self.asked.update(texts)
        return super().embed(texts)


def _memory(tmp_path, capacity: int = 1024):
    mem = build_memory(Settings.from_env({"BOUNDMEM_QUERY_CACHE": str(capacity)}), db=tmp_path / "m.db",
                       embedder="hash")
    counting = Counting()
    mem.embedder.inner = counting   # every stage holds this wrapper: swapping its inner counts for all of them
    return mem, counting


CONVERSATION = Conversation(id="c1", turns=(
    Turn(role="user", text="I always prefer Italian food, and I love jazz on the radio."),
    Turn(role="assistant", text="Noted."),
    Turn(role="user", text="Stop remembering my music preferences. I like it at 21 degrees."),
    Turn(role="user", text="I always prefer Italian food, and I love jazz on the radio.")))


def test_each_distinct_text_is_embedded_once_per_ingest(tmp_path):
    mem, counting = _memory(tmp_path)
    res = mem.add(CONVERSATION, "alice")
    assert res.stored, "the conversation stores something (else the test proves nothing)"
    assert counting.asked, "the ingest embedded nothing"
    assert max(counting.asked.values()) == 1, {t: n for t, n in counting.asked.items() if n > 1}
    s = mem.stats()
    assert s["ingest_embedded"] == len(counting.asked) <= s["ingest_texts"]


def test_the_memo_lasts_one_ingest_only(tmp_path):
    mem, counting = _memory(tmp_path)
    mem.add(CONVERSATION.model_copy(update={"id": "c0"}), "carol")   # the stages embed the schema's texts once
    counting.asked.clear()
    mem.add(CONVERSATION, "alice")
    first = Counter(counting.asked)
    mem.add(CONVERSATION.model_copy(update={"id": "c2"}), "bob")
    assert first and counting.asked == first + first   # nothing of alice's ingest kept for bob's


def test_repeated_queries_hit_the_cache_and_give_the_same_hits(tmp_path):
    mem, counting = _memory(tmp_path)
    mem.add(CONVERSATION, "alice")
    counting.asked.clear()
    first = mem.recall("find me a restaurant", "alice", gate=False)
    again = mem.recall("  find me   a restaurant ", "alice", gate=False)   # whitespace only: the same query
    assert [h.preference.id for h in first] == [h.preference.id for h in again]
    assert counting.asked["find me a restaurant"] == 1 and sum(counting.asked.values()) == 1
    s = mem.stats()
    assert (s["hits"], s["misses"], s["size"]) == (1, 1, 1) and s["hit_rate"] == 0.5
    mem.recall("Find me a restaurant", "alice", gate=False)   # case is the model's business: another query
    assert mem.stats()["misses"] == 2


def test_the_cache_is_bounded_least_recently_used_first(tmp_path):
    mem, counting = _memory(tmp_path, capacity=2)
    for q in ("a one", "b two", "a one", "c three", "a one", "b two"):
        mem.recall(q, "alice", gate=False)
    s = mem.stats()
    # a (miss) b (miss) a (hit) c (miss, drops b) a (hit) b (miss, drops c)
    assert (s["hits"], s["misses"], s["size"]) == (2, 4, 2)


def test_zero_disables_it(tmp_path):
    mem, counting = _memory(tmp_path, capacity=0)
    mem.recall("play jazz", "alice", gate=False)
    mem.recall("play jazz", "alice", gate=False)
    assert counting.asked["play jazz"] == 2 and mem.stats()["size"] == 0


def test_a_bad_setting_is_a_clear_error():
    from boundmem.errors import ConfigError

    with pytest.raises(ConfigError, match="BOUNDMEM_QUERY_CACHE"):
        Settings.from_env({"BOUNDMEM_QUERY_CACHE": "-1"})


def test_cached_vectors_equal_fresh_ones_and_cannot_be_changed_by_a_caller():
    emb = CachingEmbedder(HashEmbedder(), capacity=8)
    v = emb.embed_query("warm seats please")
    assert np.array_equal(v, HashEmbedder().embed(["warm seats please"])[0])
    with pytest.raises(ValueError):
        v[0] = 1.0
    assert emb.embed_query("warm seats please") is v


def test_each_memory_has_its_own_cache(tmp_path):
    a, _ = _memory(tmp_path / "a")
    b, counting_b = _memory(tmp_path / "b")
    a.recall("play jazz", "u", gate=False)
    b.recall("play jazz", "u", gate=False)
    assert counting_b.asked["play jazz"] == 1 and a.stats()["misses"] == b.stats()["misses"] == 1


def test_threads_share_the_cache_safely():
    emb = CachingEmbedder(HashEmbedder(), capacity=16)
    queries = [f"query {i % 24}" for i in range(2000)]

    def run(offset: int) -> None:
        for q in queries[offset:] + queries[:offset]:
            assert np.array_equal(emb.embed_query(q), HashEmbedder().embed([q])[0])

    threads = [threading.Thread(target=run, args=(i * 7,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s = emb.stats()
    assert s["hits"] + s["misses"] == 4 * len(queries) and s["size"] <= 16


def test_ingests_on_two_threads_keep_their_own_memo():
    emb = CachingEmbedder(Counting(), capacity=0)
    barrier = threading.Barrier(2)

    def run() -> None:
        with emb.ingest():
            emb.embed(["same text"])
            barrier.wait()
            emb.embed(["same text"])

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert emb.inner.asked["same text"] == 2   # once per ingest


def test_after_warm_a_recall_embeds_only_its_query(tmp_path):
    """A served recall runs on the event loop: everything but the query's own vector is loaded by warm()."""
    mem, counting = _memory(tmp_path)
    mem.add(CONVERSATION, "alice")
    mem.warm()
    counting.asked.clear()
    mem.recall("find me a place for dinner", "alice")
    assert list(counting.asked.elements()) == ["find me a place for dinner"]


def test_a_cache_cleared_by_another_thread_mid_call_does_not_break_embed():
    """The vectors of one call come from that call: a clear between its write and its read (clear_cache from a
    benchmark thread, or the size bound) must not turn into a KeyError."""
    class Forgetful(dict):
        def __setitem__(self, key, value):   # as if another thread cleared the cache right after each write
            super().__setitem__(key, value)
            self.clear()

    from boundmem.embed.base import CachedEmbedder

    class Tiny(CachedEmbedder):
        dim = 4

        def _encode(self, texts):
            return np.array([[len(t), 1.0, 0.0, 0.0] for t in texts], dtype=np.float32)

    emb = Tiny()
    emb._cache = Forgetful()
    out = emb.embed(["jazz", "rock", "jazz"])
    assert out.shape[0] == 3 and np.allclose(out[0], out[2])
