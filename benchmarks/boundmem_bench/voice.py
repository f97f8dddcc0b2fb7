"""`boundmem bench voice`: how long a voice turn's context waits for memory before the LLM sees it.

Each turn runs through real Pipecat pipelines (pipecat-ai, `boundmem-bench[voice]`): an interim then a final
transcription, the end of the turn after `end_of_turn` seconds of silence (what a VAD waits before it calls the turn
over), the user context aggregator, then the memory under test, then a scripted LLM that answers at once. Held is the
time from the context frame leaving the aggregator to the LLM receiving it. The pipelines, side by side in one run,
each turn through each of them in turn so that load on the machine falls on all alike:

- boundmem with its transcript tap: recall starts on the transcriptions, and is usually done when the turn ends;
- boundmem without the tap: recall starts at the context frame, so the context waits for one recall;
- no memory at all;
- where mem0 is installed (`boundmem-bench[peer]`), Pipecat's own `Mem0MemoryService` on mem0's local search over the
  same sentences with the same MiniLM (`bench peer`'s setup, infer=False: no LLM is called).

Beside each turn, one recall of the same words is timed on its own (`Memory.recall`, embedding caches cleared first,
as they are before each pipeline turn): held over one recall is what the early start buys, and what the deadline
bounds. What each memory learns from a turn is learned before the next turn is timed, as it would be in a car,
where the next turn comes seconds later.

Users and turns: CarMem's training users (lines 51-100), their ten preferences stored as the dataset states them, and
as turns their ten `next_conversation_question`s (requests those preferences bear on).
"""
from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional, Sequence

import typer

from .recall_sets import UserSpec, incar_users, store_users
from .report import load_average, machine_info, write_json
from .results import Figure, write_results

END_OF_TURN = 0.2   # Pipecat's VAD stop_secs default: the silence before the turn is called over


def voice_turns(carmem: Path, users: int) -> list[tuple[UserSpec, list[str]]]:
    """The first `users` training users with their preferences and their ten next-conversation requests."""
    specs = {u.user: u for u in incar_users(carmem)}
    out = []
    with open(carmem, encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            if n < 50 or not line.strip():
                continue
            spec = specs.get(f"carmem{n + 1}")
            asks = [c.get("next_conversation_question") for c in json.loads(line)["data"]]
            if spec is not None:
                out.append((spec, [a.strip() for a in asks if isinstance(a, str) and a.strip()]))
            if len(out) == users:
                break
    return out


def _pct(xs: Sequence[float], q: float) -> Optional[float]:
    if not xs:
        return None
    s = sorted(xs)
    return float(s[min(len(s) - 1, int(round(q * (len(s) - 1))))])


def _ms(x: Optional[float]) -> Optional[float]:
    return None if x is None else round(x * 1000, 2)


MODES = ("speculative", "at_context", "none")
MEM0 = "mem0"


class _Rig:
    """One user's running pipelines and the means to speak into them: boundmem with recall started on the
    transcriptions (`speculative`), boundmem without the transcript tap so recall starts at the context frame
    (`at_context`), no memory at all (`none`), and with `mem0` (a mem0 Memory) Pipecat's own `Mem0MemoryService`."""

    def __init__(self, mem, user: str, deadline: float, clock: "_RecallClock", mem0: Any = None):
        from pipecat.pipeline.pipeline import Pipeline
        from pipecat.pipeline.worker import PipelineParams, PipelineWorker

        from boundmem.integrations.pipecat import BoundmemMemoryService

        frames = _frames()
        self.mem, self.user, self.clock = mem, user, clock
        self.services, self.workers, self.llms = {}, {}, {}
        self.modes = MODES + ((MEM0,) if mem0 is not None else ())
        for mode in self.modes:
            stamp, llm = frames.Stamp(), frames.ScriptedLLM()
            llm.stamp = stamp
            pair = frames.aggregators()
            steps = [pair.user(), stamp, llm, pair.assistant()]
            if mode == MEM0:
                self.mem0 = _mem0_service(mem0, user)
                steps.insert(2, self.mem0)
            elif mode != "none":
                service = BoundmemMemoryService(mem, user_id=user,
                                                params=BoundmemMemoryService.InputParams(deadline=deadline))
                steps.insert(2, service)
                if mode == "speculative":
                    steps.insert(0, service.transcripts())
                self.services[mode] = service
            self.workers[mode] = PipelineWorker(Pipeline(steps), params=PipelineParams(),
                                                cancel_on_idle_timeout=False)
            self.llms[mode] = llm

    async def say(self, mode: str, text: str, end_of_turn: float) -> float:
        """One turn through `mode`'s pipeline; the seconds its context was held before the LLM."""
        from pipecat.frames.frames import (InterimTranscriptionFrame, TranscriptionFrame, UserStartedSpeakingFrame,
                                           UserStoppedSpeakingFrame)

        worker, words = self.workers[mode], text.split()
        self.mem.embedder.clear_cache()
        if mode == MEM0:   # every query really embedded, by both (`bench peer`'s rule)
            self.mem0.memory_client.embedding_model.inner.clear_cache()
        for frame in (UserStartedSpeakingFrame(), InterimTranscriptionFrame(" ".join(words[:len(words) // 2 or 1]),
                                                                           self.user, "t"),
                      TranscriptionFrame(text, self.user, "t")):
            await worker.queue_frame(frame)
        if end_of_turn > 0:
            await asyncio.sleep(end_of_turn)   # the silence a VAD waits before it calls the turn over
        await worker.queue_frame(UserStoppedSpeakingFrame())
        held = await self.llms[mode].held.get()
        if mode == MEM0:
            await self.mem0.settle()
        elif mode in self.services:
            await self._learned(self.services[mode])
        return held

    async def _learned(self, service) -> None:
        """Wait (outside the timing) until this turn's exchange is queued and learned: in a car the next turn comes
        seconds later, and the ingestion is done by then; here it would run on into the next pipeline's turn."""
        turns, want = service.turns, service.stats.turns
        for _ in range(2000):   # the assistant turn reaches the service just after the reply; at most a few seconds
            if service.stats.submitted >= want:
                break
            await asyncio.sleep(0.002)
        jobs = await turns.flush()
        if jobs:
            await asyncio.to_thread(self.mem.wait, jobs[-1].id)

    def one_recall(self, text: str) -> float:
        """One recall of `text` on its own, outside any pipeline, caches cleared."""
        self.mem.embedder.clear_cache()
        t0 = time.perf_counter()
        self.mem.recall(text, self.user)
        return time.perf_counter() - t0

    async def run(self, script):
        from pipecat.frames.frames import EndFrame
        from pipecat.workers.runner import WorkerRunner

        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(*self.workers.values())
        job = asyncio.create_task(runner.run())
        try:
            return await script(self)
        finally:
            for w in self.workers.values():
                await w.queue_frame(EndFrame())
            await asyncio.wait_for(job, 60)


def _frames():
    """The scripted pipeline parts, defined on first use so that the module imports without Pipecat."""
    from pipecat.frames.frames import (LLMContextFrame, LLMFullResponseEndFrame, LLMFullResponseStartFrame,
                                       LLMTextFrame)
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import (LLMContextAggregatorPair,
                                                                       LLMUserAggregatorParams)
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.turns.user_start import ExternalUserTurnStartStrategy
    from pipecat.turns.user_stop import ExternalUserTurnStopStrategy
    from pipecat.turns.user_turn_strategies import UserTurnStrategies

    class Stamp(FrameProcessor):
        """Notes when a context frame leaves the user aggregator."""
        at = 0.0

        async def process_frame(self, frame, direction):
            await super().process_frame(frame, direction)
            if isinstance(frame, LLMContextFrame) and direction == FrameDirection.DOWNSTREAM:
                self.at = time.perf_counter()
            await self.push_frame(frame, direction)

    class ScriptedLLM(FrameProcessor):
        """Answers each context frame at once and reports how long it was held since the stamp."""
        stamp: Any = None

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.held: asyncio.Queue = asyncio.Queue()

        async def process_frame(self, frame, direction):
            await super().process_frame(frame, direction)
            if isinstance(frame, LLMContextFrame) and not frame.speculation:
                self.held.put_nowait(time.perf_counter() - self.stamp.at)
                for f in (LLMFullResponseStartFrame(), LLMTextFrame("Sure."), LLMFullResponseEndFrame()):
                    await self.push_frame(f)
            else:
                await self.push_frame(frame, direction)

    def aggregators():
        strategies = UserTurnStrategies(start=[ExternalUserTurnStartStrategy()],
                                        stop=[ExternalUserTurnStopStrategy(timeout=0.05)])
        return LLMContextAggregatorPair(LLMContext([{"role": "system", "content": "You are a car assistant."}]),
                                        user_params=LLMUserAggregatorParams(user_turn_strategies=strategies))

    return SimpleNamespace(Stamp=Stamp, ScriptedLLM=ScriptedLLM, aggregators=aggregators)


def _mem0_service(client: Any, user: str):
    """Pipecat's `Mem0MemoryService` as it is (search on every context frame, no timeout; the conversation stored in
    a background task), over `client`, a local mem0 Memory, and storing with infer=False: no LLM is called here.

    `settle()` waits for the stores in flight: the rig calls it after each mem0 turn, outside the timing, because
    the service stores the whole conversation again on every turn, and those embeddings running on into the other
    pipelines' turns would load the CPU under them."""
    from unittest import mock

    from pipecat.services.mem0 import memory as pipecat_mem0

    class Mem0NoInfer(pipecat_mem0.Mem0MemoryService):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.storing: set = set()

        async def _store_messages(self, messages):
            task = asyncio.ensure_future(asyncio.to_thread(self.memory_client.add, messages, user_id=self.user_id,
                                                           infer=False, metadata={"platform": "pipecat"}))
            self.storing.add(task)
            try:
                await task
            finally:
                self.storing.discard(task)

        async def settle(self):
            while self.storing:
                await asyncio.gather(*list(self.storing), return_exceptions=True)

    with mock.patch.object(pipecat_mem0, "Memory", SimpleNamespace(from_config=lambda _config: client)):
        return Mem0NoInfer(local_config={"client": "given"}, user_id=user)


def _mem0(work: Path, mem, picked) -> Any:
    """A mem0 Memory on local files with boundmem's MiniLM (`bench peer`'s adapter; an embedder of its own, so that
    its threads and boundmem's never share a cache), holding each user's preference sentences (infer=False), or None
    when mem0 is not installed (`boundmem-bench[peer]`)."""
    from boundmem.config import Settings
    from boundmem.embed.registry import make_embedder

    from .peer import build_mem0
    from .report import MissingExtraError

    os.environ.setdefault("MEM0_TELEMETRY", "False")   # read when mem0 is imported: a benchmark must not phone home
    try:
        import pipecat.services.mem0.memory  # noqa: F401
        client = build_mem0(work, make_embedder(mem.embedder.name, Settings.from_env()))
    except (ImportError, MissingExtraError):
        return None
    for spec, _ in picked:
        for pref in spec.prefs:
            client.add(pref.sentence, user_id=spec.user, infer=False)
    return client


class _RecallClock:
    """Wraps a Memory's recall to keep how long each call took (its own time, in the thread that ran it)."""

    def __init__(self, mem):
        self.inner, self.times = mem.recall, []

    def __call__(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return self.inner(*args, **kwargs)
        finally:
            self.times.append(time.perf_counter() - t0)


async def _user_rows(rig: _Rig, asks: list[str], silence: float) -> list[dict]:
    rows = []
    for text in asks:
        row = {"user": rig.user, "text": text}
        for mode in rig.modes:
            before = len(rig.clock.times)
            row[f"held_{mode}"] = await rig.say(mode, text, silence)
            if mode == "at_context":   # the one recall that pipeline ran, and its context waited for
                row["recall_in_turn"] = sum(rig.clock.times[before:])
        row["one_recall"] = await asyncio.to_thread(rig.one_recall, text)
        rows.append(row)
    return rows


def measure(carmem: Path, users: int, deadline: float, silence: float, embedder: str = "minilm",
            progress: bool = False, mem0: bool = True) -> tuple[list[dict], dict]:
    """Every turn of `users` CarMem users through the pipelines (mem0's where asked and installed); the rows and each
    memory service's counts."""
    from boundmem.memory import build_memory
    from boundmem.schema.load import builtin_schema

    picked = voice_turns(carmem, users)
    rows: list[dict] = []
    keys = ("turns", "injected", "speculative", "late", "submitted")
    counts = {mode: dict.fromkeys(keys, 0) for mode in MODES if mode != "none"}
    with tempfile.TemporaryDirectory() as tmp:
        mem = build_memory(db=Path(tmp) / "voice.db", schema=builtin_schema("incar"), embedder=embedder)
        try:
            store_users(mem, [spec for spec, _ in picked])
            mem.warm()
            mem.recall = clock = _RecallClock(mem)
            peer = _mem0(Path(tmp) / "mem0", mem, picked) if mem0 else None
            for n, (spec, asks) in enumerate(picked):
                rig = _Rig(mem, spec.user, deadline, clock, peer)
                rows += asyncio.run(rig.run(lambda r: _user_rows(r, asks, silence)))
                for mode, service in rig.services.items():
                    for key in keys:
                        counts[mode][key] += getattr(service.stats, key)
                if progress:
                    typer.echo(f"  user {n + 1}/{len(picked)}", err=True)
        finally:
            mem.close_jobs()
            mem.store.close()
    return rows, counts


def summarise(rows: list[dict], deadline: float) -> dict:
    """Per pipeline: held p50/p95 (ms), its p95 over the p95 of one recall (the one the context waited for in the
    pipeline without the tap, timed in its thread), and whether that p95 is within the deadline; one recall's p50/p95
    beside them, in the pipeline and on its own."""
    one, waited = [r["one_recall"] for r in rows], [r["recall_in_turn"] for r in rows if "recall_in_turn" in r]
    r95 = _pct(waited, 0.95)
    out: dict[str, Any] = {"turns": len(rows),
                           "recall_in_turn_ms": {"p50": _ms(_pct(waited, 0.5)), "p95": _ms(r95)},
                           "one_recall_ms": {"p50": _ms(_pct(one, 0.5)), "p95": _ms(_pct(one, 0.95))}}
    for mode in [m for m in (*MODES, MEM0) if rows and f"held_{m}" in rows[0]]:
        held = [r[f"held_{mode}"] for r in rows]
        p95 = _pct(held, 0.95)
        out[mode] = {"held_ms": {"p50": _ms(_pct(held, 0.5)), "p95": _ms(p95)},
                     "p95_over_recall_p95": round(p95 / r95, 3) if p95 is not None and r95 else None,
                     "p95_within_deadline": (p95 is not None and p95 <= deadline) if mode in ("speculative", "at_context")
                     else None}   # the others have no deadline
    return out


LABELS = {"speculative": "boundmem, recall started on the transcriptions",
          "at_context": "boundmem, recall started at the context frame", "none": "without memory",
          MEM0: "Pipecat's Mem0MemoryService (mem0 local search)"}


def markdown(summary: dict, meta: dict) -> str:
    one, waited = summary["one_recall_ms"], summary["recall_in_turn_ms"]
    lines = ["# bench voice", "",
             f"{meta['users']} CarMem users, {summary['turns']} turns; end-of-turn silence {meta['end_of_turn'] * 1000:g} ms; "
             f"deadline {meta['deadline'] * 1000:g} ms; embedder {meta['embedder']}; {meta['seconds']:.0f} s.", "",
             f"One recall, in the pipeline without the tap (the one its context waited for): p50 {waited['p50']} ms, "
             f"p95 {waited['p95']} ms; on its own, outside any pipeline: p50 {one['p50']} ms, p95 {one['p95']} ms.", "",
             "| pipeline | held before the LLM p50 / p95 (ms) | held p95 / one recall p95 | p95 within deadline "
             "| late (dropped) | memory injected |",
             "| --- | ---: | ---: | --- | ---: | ---: |"]
    for mode in [m for m in (*MODES, MEM0) if m in summary]:
        s, c = summary[mode], meta["counts"].get(mode)
        late, injected = (c["late"], c["injected"]) if c else ("-", "-")
        lines.append(f"| {LABELS[mode]} | {s['held_ms']['p50']} / {s['held_ms']['p95']} | {s['p95_over_recall_p95']} "
                     f"| {_or_dash(s['p95_within_deadline'])} | {late} | {injected} |")
    if MEM0 not in summary:
        lines += ["", "mem0: not run (--no-mem0, or mem0 not installed: pip install 'boundmem-bench[peer]')."]
    return "\n".join(lines) + "\n"


def _or_dash(x: Any) -> str:
    return "-" if x is None else str(x)


def run_voice(carmem: Path, users: int = 10, deadline: Optional[float] = None, end_of_turn: float = END_OF_TURN,
              embedder: str = "minilm", progress: bool = False, mem0: bool = True) -> tuple[dict, list[dict], dict]:
    from boundmem.integrations.turns import DEFAULT_DEADLINE

    from .report import MissingExtraError

    try:
        import pipecat  # noqa: F401
    except ImportError as e:
        raise MissingExtraError("bench voice runs a Pipecat pipeline: pip install 'boundmem-bench[voice]'") from e
    deadline = DEFAULT_DEADLINE if deadline is None else deadline
    t0 = time.perf_counter()
    rows, counts = measure(carmem, users, deadline, end_of_turn, embedder, progress, mem0)
    meta = {"users": len({r["user"] for r in rows}), "deadline": deadline, "end_of_turn": end_of_turn,
            "embedder": embedder, "counts": counts, "seconds": time.perf_counter() - t0}
    return summarise(rows, deadline), rows, meta


def _quiet_pipecat() -> None:
    """Pipecat logs every turn's frames at DEBUG to stderr; in a timing run that is noise on the screen and load on
    the CPU, so the command keeps its warnings only."""
    import sys

    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="WARNING")


def register(app: typer.Typer) -> None:
    @app.command("voice")
    def voice(carmem: Path = typer.Option(Path("../shared/data/carmem/dataset.jsonl"), "--carmem",
                                          help="CarMem dataset.jsonl (its users 51-100 hold the preferences)."),
              users: int = typer.Option(10, "--users", min=1, max=50, help="How many CarMem users (ten turns each)."),
              deadline: Optional[float] = typer.Option(None, "--deadline", min=0.001,
                                                       help="Seconds a context may wait for memory (default: the "
                                                            "integrations' default)."),
              end_of_turn: float = typer.Option(END_OF_TURN, "--end-of-turn", min=0.0,
                                                help="Silence between the final transcription and the end of the "
                                                     "turn (a VAD's stop time)."),
              embedder: str = typer.Option("minilm", "--embedder"),
              mem0: bool = typer.Option(True, "--mem0/--no-mem0", help="Also Pipecat's Mem0MemoryService on mem0's "
                                        "local search, where mem0 is installed (boundmem-bench[peer])."),
              out: Path = typer.Option(Path("bench-out/voice"), "--out")):
        """Per turn, the time the context is held before the LLM with boundmem and without (p50/p95), and its ratio
        to one recall, in a real Pipecat pipeline on CarMem users."""
        if not carmem.is_file():
            raise typer.BadParameter(f"{carmem} is not a file", param_hint="--carmem")
        _quiet_pipecat()
        summary, rows, meta = run_voice(carmem, users, deadline, end_of_turn, embedder, progress=True, mem0=mem0)
        meta["machine"], meta["load_average_end"] = machine_info(), load_average()   # latency on a shared box
        write_json(out / "results.json", {"meta": meta, "summary": summary})
        (out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (out / "report.md").write_text(report := markdown(summary, meta))
        write_results("voice", out, report, headline(summary), summary=summary, machine=meta["machine"])
        typer.echo(report)


def headline(summary: dict) -> list[Figure]:
    """README's figures of a voice run: the time a turn's context waits before the LLM, with memory and without."""
    figs = []
    for mode, label in (("speculative", "boundmem (recall started on the transcriptions)"), ("none", "no memory"),
                        (MEM0, "Pipecat's Mem0MemoryService")):
        if mode in summary:
            held = summary[mode]["held_ms"]
            figs.append(Figure(f"voice turn: context held before the LLM p50 / p95, {label}",
                               f"{held['p50']} / {held['p95']} ms", readme=mode == "speculative"))
    if "speculative" in summary:
        figs.append(Figure("voice turn: held p95 over one recall's p95, recall started on the transcriptions",
                           summary["speculative"]["p95_over_recall_p95"], ".2f", "x"))
    return figs
