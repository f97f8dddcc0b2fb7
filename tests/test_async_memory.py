"""AsyncMemory: Memory's methods awaited, run off the event loop, the docs' voice example as written."""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import os
import threading
from pathlib import Path

import pytest

from boundmem import AsyncMemory, InputError, Memory
from boundmem.embed import HashEmbedder
from boundmem.extract.keyword import KeywordExtractor
from boundmem.maintain.rules import RuleMaintainer
from boundmem.store.sqlite import SQLiteStore

CHAT = [{"role": "system", "content": "You are a car assistant."},
        {"role": "user", "content": "I always go for Italian food."}, {"role": "assistant", "content": "Noted."}]


@pytest.fixture()
def memory(tmp_path, schema):
    store = SQLiteStore(tmp_path / "a.db")
    yield Memory(schema=schema, store=store, extractor=KeywordExtractor(), maintainer=RuleMaintainer(),
                 embedder=HashEmbedder())
    store.close()


def test_every_memory_method_has_an_awaited_twin_with_its_signature():
    public = [n for k in Memory.__mro__[:-1] for n, v in vars(k).items()
              if not n.startswith("_") and inspect.isfunction(v) and n != "local"]
    assert {"add", "submit", "wait", "recall", "preferences", "opt_out", "opt_in", "delete", "export", "forget",
            "remember_episode", "recall_episodes", "episodes", "episode_opt_out"} <= set(public)
    for name in public:
        twin = getattr(AsyncMemory, name)
        assert inspect.iscoroutinefunction(twin), name
        assert inspect.signature(twin) == inspect.signature(getattr(Memory, name)), name
    assert inspect.signature(AsyncMemory.local).parameters == inspect.signature(Memory.local).parameters


def test_the_same_answers_awaited(memory):
    mem = AsyncMemory(memory)

    async def scenario():
        r = await mem.add(CHAT, user="ann")
        hits = await mem.recall("Where should we eat?", user="ann", k=3, gate=False)
        job = await mem.submit("I love Italian food.", user="bob", conversation_id="c-bob")
        done = await mem.wait(job.id)
        with pytest.raises(InputError):
            await mem.add(42, user="ann")
        purged = await mem.opt_out("ann", "Restaurant")
        return r, hits, done, purged, await mem.export("ann"), await mem.forget("bob")

    r, hits, done, purged, export, forgotten = asyncio.run(scenario())
    assert [p.attribute for p in r.stored] == ["Italian"] and hits[0].preference.attribute == "Italian"
    assert done.status == "done" and [p.attribute for p in purged] == ["Italian"]
    assert export.opt_outs and export.preferences == [] and forgotten == 1


def test_work_runs_off_the_event_loop_and_concurrent_awaits_all_land(memory):
    """The extractor blocks until a coroutine on the loop releases it: that can only happen if the ingest runs in
    another thread (on the loop it would never be released, and `go.wait` gives up)."""
    started, go, threads = threading.Event(), threading.Event(), []
    inner = memory.extractor

    class Blocking:
        def extract(self, conversation, schema):
            threads.append(threading.get_ident())
            if conversation.id == "slow":
                started.set()
                assert go.wait(10), "the event loop was blocked while an ingest ran"
            return inner.extract(conversation, schema)

    memory.extractor = Blocking()
    mem = AsyncMemory(memory)

    async def scenario():
        loop_thread = threading.get_ident()
        slow = asyncio.create_task(mem.add("I love Italian food.", user="u0", conversation_id="slow"))
        await asyncio.to_thread(started.wait, 10)
        go.set()   # the loop is free while the slow ingest waits
        others = await asyncio.gather(*(mem.add("I love Italian food.", user=f"u{i}") for i in range(1, 5)))
        return loop_thread, await slow, others

    loop_thread, slow, others = asyncio.run(scenario())
    assert loop_thread not in threads and len(threads) == 5
    assert [p.attribute for r in [slow, *others] for p in r.stored] == ["Italian"] * 5


def test_docs_voice_example_runs_as_written(tmp_path, minilm, monkeypatch):
    readme = (Path(__file__).resolve().parents[1] / "docs" / "guides" / "async.md").read_text(encoding="utf-8")
    section = readme[readme.index("## `AsyncMemory`"):]
    code = section[section.index("```python") + 9:]
    code = code[:code.index("```")]
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/guides/async.md", "exec"), {"__name__": "__readme__"})
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("What you remember about this user") and any('"memory": "Italian"' in l for l in lines) \
        and lines[-1] == "done", lines
    assert os.path.exists(tmp_path / "voice.db")
