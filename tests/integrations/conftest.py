"""A real Memory (SQLite, MiniLM, the recall gate) holding two preferences, for the voice framework hooks' tests."""
from __future__ import annotations

import threading

import pytest

from boundmem import Memory
from boundmem.maintain.rules import RuleMaintainer
from boundmem.store.sqlite import SQLiteStore

# what the user says in the 20-turn conversations: requests the stored preferences bear on, and small talk
TURNS = ["put on some music", "find me a route to the office", "play something to relax", "what's the weather",
         "take me to the airport", "any music for the drive", "call my sister", "which way is fastest to work",
         "pick a radio station", "how far is the next fuel station"] * 2


@pytest.fixture()
def voice_memory(tmp_path, schema, minilm, cue_extractor):
    store = SQLiteStore(tmp_path / "voice.db")
    mem = Memory(schema=schema, store=store, extractor=cue_extractor, maintainer=RuleMaintainer(), embedder=minilm)
    mem.add([{"role": "user", "content": "I can't stand jazz music"},
             {"role": "user", "content": "I always avoid highways"}], "ann")
    mem.warm()
    yield mem
    mem.close_jobs()
    store.close()


class SlowRecall:
    """Wraps a Memory's recall so that it blocks until `release` is set: a recall that misses any deadline, without
    the test sleeping."""

    def __init__(self, mem: Memory):
        self.mem, self.inner = mem, mem.recall
        self.release, self.entered = threading.Event(), threading.Event()

    def __call__(self, *args, **kwargs):
        self.entered.set()
        self.release.wait(30)
        return self.inner(*args, **kwargs)


class SubmitLog:
    """Wraps a Memory's submit to record each conversation handed to it (the real submit still runs)."""

    def __init__(self, mem: Memory):
        self.inner, self.calls = mem.submit, []

    def __call__(self, conversation, user, *args, **kwargs):
        self.calls.append((user, [dict(m) for m in conversation]))
        return self.inner(conversation, user, *args, **kwargs)


async def speak_all(voice) -> list:
    """Every turn of TURNS through `voice` (each test module's running framework); the contexts the LLM was given.
    Returns once every exchange is queued."""
    seen = [await voice.say(text) for text in TURNS]
    await voice.memory.turns.flush()
    return seen


def check_exchanges(log: SubmitLog, stats) -> None:
    """Each turn's user words and its reply were submitted, nothing earlier, exactly once; every recall was started
    from the transcript and none missed the deadline."""
    assert [c for _, c in log.calls] == [[{"role": "user", "content": t}, {"role": "assistant", "content": f"Reply {i}."}]
                                         for i, t in enumerate(TURNS, 1)]
    assert (stats.turns, stats.submitted, stats.late, stats.speculative) == (20, 20, 0, 20)
