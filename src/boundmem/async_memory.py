"""`AsyncMemory`: the async twin of `Memory`, for asyncio programs (voice pipelines: Pipecat, LiveKit agents).

One implementation, as httpx shares one between Client and AsyncClient: every public method of `Memory` is here
with the same name, parameters and answer, awaited, and runs the Memory's own method in a worker thread
(`asyncio.to_thread`), because extraction, embedding and the store block (ONNX Runtime, SQLite, an LLM endpoint)
and must not stall the event loop that streams audio. The wrappers are generated from `Memory` itself, so a method
added there is here too (a test compares the signatures). `Memory` is already used from many threads at once by the
HTTP service, so concurrent awaits are safe; a `then=` callback of `add` runs in the worker thread."""
from __future__ import annotations

import asyncio
import functools
import inspect
from pathlib import Path
from typing import Any, Optional

from .config import Settings
from .memory import Memory
from .schema.model import Schema

_SYNC = {"local"}   # constructors stay synchronous: nothing is loaded or embedded until first use


def _public_methods() -> list[str]:
    """Memory's public methods, its own and those it inherits (the episodic ones of `episodes.EpisodicAccess`)."""
    names: dict[str, None] = {}
    for klass in reversed(Memory.__mro__[:-1]):
        names.update({n: None for n, v in vars(klass).items()
                      if not n.startswith("_") and n not in _SYNC and inspect.isfunction(v)})
    return list(names)


def _twin(name: str):
    method = getattr(Memory, name)

    @functools.wraps(method)
    async def call(self: "AsyncMemory", *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(self.memory, name), *args, **kwargs)

    return call


class AsyncMemory:
    """`await mem.add(messages, user="ann")`, `await mem.recall(text, user="ann")`, ...: `Memory`'s methods, awaited.
    `memory` is the wrapped `Memory` (its `schema`, `store`, `jobs` are read through it)."""

    def __init__(self, memory: Memory):
        self.memory = memory

    @classmethod
    def local(cls, db: str | Path = "boundmem.db", schema: Optional[Schema] = None,
              settings: Optional[Settings] = None) -> "AsyncMemory":
        """`Memory.local` wrapped (opening the store is quick; the models load on first use, or `await warm()`)."""
        return cls(Memory.local(db, schema=schema, settings=settings))

    @property
    def schema(self) -> Schema:
        return self.memory.schema

    def __repr__(self) -> str:
        return f"AsyncMemory({self.memory.store!r})"


for _name in _public_methods():
    setattr(AsyncMemory, _name, _twin(_name))
