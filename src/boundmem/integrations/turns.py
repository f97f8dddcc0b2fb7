"""The turn logic a voice framework's hook shares: recall started while the user speaks, a deadline on the wait,
one memory message replaced each turn, and only the new exchange learned from.

Why a deadline: in a voice assistant every millisecond before the LLM is silence the driver hears. The wait for
memory is capped (`deadline`, by default what `boundmem bench voice` measures a recall to take on CarMem users, with
headroom); past it the LLM answers without memory and the late result is dropped and counted (`TurnStats.late`), so a
slow disk or a busy CPU costs one turn its memory, never the reply its speed.

Why speculative: the transcription arrives before the end of the turn is decided (VAD silence, a turn model), so a
recall started on it (`speculate`) is usually done when the context reaches the LLM. One interim recall runs at a
time per conversation; a newer interim transcript waits for it and then replaces any older waiting one, so an interim
stream costs at most one recall in flight, not one per partial word (a final transcript starts at once).

Why replace: the frameworks' contexts live on from turn to turn and are shared; a memory message added each turn
would pile up. The one message this format wrote (`MemoryFormat.is_memory`) is found and replaced, never appended.

Why only the exchange: the context holds the whole conversation; submitting it after every reply would re-learn
every earlier turn. `exchange` submits the user's words and the reply of this turn alone, as a durable job
(`Memory.submit`), learned from by the Memory's worker thread off the voice loop.
"""
from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from ..errors import ConfigError
from ..jobs import Job
from ..memory import Memory
from ..messages import content_text
from ..models import MemoryRecall
from ..retrieve.format import DEFAULT, MemoryFormat
from ..user_id import check_store_user_id, namespaced

DEFAULT_DEADLINE = 0.15   # seconds; `boundmem bench voice` prints the recall times it stands on
MEMORY_ROLES = ("system", "developer")


@dataclass
class TurnStats:
    """What the hook did, for an operator's dashboard and for `bench voice`: turns answered, how many carried memory,
    how many recalls were ready from the speculative start, how many missed the deadline (dropped), exchanges queued,
    and the seconds each context was held before the LLM."""

    turns: int = 0
    injected: int = 0
    speculative: int = 0
    late: int = 0
    submitted: int = 0
    held: list[float] = field(default_factory=list)


def _norm(text: str) -> str:
    return " ".join(text.split())


class TurnMemory:
    """One conversation's memory in a voice pipeline: recall for the user's turn within a deadline, the one memory
    message, the exchange queued for learning. The Pipecat and LiveKit hooks are thin adapters over it.

    `user` (and `tenant`, for a multi-tenant store: the user is then `tenant:user`) names whose memory; `k` caps the
    memories; `episodic=True` adds episodes where episodic memory is on for the user (off unless asked); `fmt` is the
    operator's wording (retrieve/format.py); `role` the memory message's role."""

    def __init__(self, memory: Memory, user: str, *, tenant: Optional[str] = None,
                 deadline: float = DEFAULT_DEADLINE, k: int = 5, episodic: bool = False, gate: bool = True,
                 fmt: MemoryFormat = DEFAULT, role: str = "system", keep_jobs: int = 64):
        if not deadline > 0:
            raise ConfigError(f"deadline must be > 0 seconds, got {deadline!r}")
        if role not in MEMORY_ROLES:
            raise ConfigError(f"role must be one of {MEMORY_ROLES}, got {role!r}")
        self.memory = memory
        self.user = namespaced(tenant, user) if tenant is not None else check_store_user_id(user, "user")
        self.deadline, self.k, self.episodic, self.gate, self.fmt, self.role = deadline, k, episodic, gate, fmt, role
        self.stats = TurnStats()
        self.jobs: deque[Job] = deque(maxlen=keep_jobs)   # the last exchanges queued, newest last
        self._finals: list[str] = []
        self._recalls: dict[str, asyncio.Future] = {}     # text -> its recall (running or done), this turn's only
        self._running: Optional[asyncio.Future] = None
        self._waiting: Optional[str] = None
        self._submitting: set[asyncio.Task] = set()

    # --- recall ---------------------------------------------------------------------------
    def _recall(self, text: str) -> MemoryRecall:
        if self.episodic:
            return self.memory.recall_all(text, self.user, self.k, gate=self.gate)
        return MemoryRecall(preferences=self.memory.recall(text, self.user, self.k, gate=self.gate))

    def _start(self, text: str, loop: asyncio.AbstractEventLoop) -> asyncio.Future:
        fut = self._recalls.get(text)
        if fut is None:
            fut = loop.run_in_executor(None, self._recall, text)
            self._recalls[text] = fut
            self._running = fut
            fut.add_done_callback(lambda _f: self._next(loop))   # runs on the loop
        return fut

    def _next(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._running is not None and not self._running.done():
            return
        self._running = None
        text, self._waiting = self._waiting, None
        if text:
            self._start(text, loop)

    def transcript(self, text: str, final: bool) -> None:
        """A transcription of the turn in progress (interim or final): start recall on what the user has said so far,
        so that it is ready at the end of the turn. Call from the event loop."""
        text = _norm(text)
        if not text:
            return
        said = _norm(" ".join([*self._finals, text]))
        if final:
            self._finals.append(text)
        self.speculate(said, now=final)

    def speculate(self, text: str, now: bool = False) -> None:
        """Start recall on `text` as soon as the recall in flight is done (one at a time), or at once with `now` (a
        final transcript: most often the turn's whole text, worth a second recall in flight)."""
        text = _norm(text)
        if not text or text in self._recalls:
            return
        if not now and self._running is not None and not self._running.done():
            self._waiting = text
            return
        if self._waiting == text:
            self._waiting = None
        self._start(text, asyncio.get_running_loop())

    async def memory_for(self, text: str) -> str:
        """The memory message's text for the user's finished turn `text` ("" when nothing would help, or when the
        recall missed the deadline: then it is dropped and counted as late). Ends the turn: the next transcripts start
        a new one."""
        started = time.perf_counter()
        text = _norm(text)
        try:
            if not text:
                return ""
            loop = asyncio.get_running_loop()
            fut = self._recalls.get(text)
            if fut is not None:
                self.stats.speculative += 1
            else:
                fut = loop.run_in_executor(None, self._recall, text)
            try:
                got = await asyncio.wait_for(asyncio.shield(fut), self.deadline)
            except asyncio.TimeoutError:
                self.stats.late += 1
                return ""
            block = self.fmt.recall(self.memory.schema, got)
            self.stats.injected += bool(block)
            return block
        finally:
            self.stats.turns += 1
            self.stats.held.append(time.perf_counter() - started)
            self._finals, self._recalls, self._waiting = [], {}, None

    def replace(self, messages: Sequence[Any], block: str, text_of: Callable[[Any], tuple[str, str]]) -> list[Any]:
        """`messages` without any memory message this format wrote, and with `block` (if any) as the one memory
        message, placed after the leading system messages (the app's instructions stay first). `text_of(message)`
        gives (role, text) in the framework's own message shape; the new message is a plain {"role", "content"}."""
        kept = [m for m in messages if not self.is_memory(*text_of(m))]
        if block:
            at = 0
            while at < len(kept) and text_of(kept[at])[0] in MEMORY_ROLES:
                at += 1
            kept.insert(at, {"role": self.role, "content": block})
        return kept

    def is_memory(self, role: str, text: str) -> bool:
        return role in MEMORY_ROLES and self.fmt.is_memory(text)

    # --- learning -------------------------------------------------------------------------
    async def exchange(self, user_text: str, reply: str) -> Optional[Job]:
        """Queue this turn's exchange (the user's words and the reply, nothing earlier) for learning; the Memory's
        worker thread ingests it. Returns the durable job (None when the user said nothing)."""
        user_text, reply = _norm(user_text), _norm(reply)
        if not user_text:
            return None
        turns = [{"role": "user", "content": user_text}] + ([{"role": "assistant", "content": reply}] if reply else [])
        job = await asyncio.to_thread(self.memory.submit, turns, self.user)
        self.jobs.append(job)
        self.stats.submitted += 1
        return job

    def exchange_soon(self, user_text: str, reply: str) -> None:
        """`exchange` in a task of its own: the reply's path never waits for the queue's write."""
        task = asyncio.get_running_loop().create_task(self.exchange(user_text, reply))
        self._submitting.add(task)
        task.add_done_callback(self._submitting.discard)

    async def flush(self) -> list[Job]:
        """Wait until every exchange handed to `exchange_soon` is queued (not learned: follow `jobs` for that); at a
        conversation's end, or in a test. Returns the jobs queued so far (the last `keep_jobs`)."""
        while self._submitting:
            await asyncio.gather(*list(self._submitting))
        return list(self.jobs)


def last_user_text(messages: Sequence[Any], text_of: Callable[[Any], tuple[str, str]]) -> str:
    """The text of the last user message (list-of-parts content read as its text parts)."""
    for m in reversed(messages):
        role, text = text_of(m)
        if role == "user":
            return text
    return ""


def dict_message(m: Any) -> tuple[str, str]:
    """(role, text) of a {"role", "content"} message; ("", "") for any other shape (a provider-specific one)."""
    if isinstance(m, dict):
        return str(m.get("role") or ""), content_text(m.get("content"))
    return "", ""
