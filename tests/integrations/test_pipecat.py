"""boundmem in a real Pipecat pipeline (no network): transcriptions -> the memory's tap -> the user aggregator ->
BoundmemMemoryService -> a fake LLM service -> the assistant aggregator. Over 20 turns the LLM sees one memory
message at a time, only each new exchange is submitted, the deadline holds against a recall that never returns in
time, speculative context frames are left alone and list-of-parts content is read."""
from __future__ import annotations

import asyncio
import copy

import pytest

pytest.importorskip("pipecat")

from pipecat.frames.frames import (EndFrame, Frame, InterimTranscriptionFrame, LLMContextAssistantTurnFrame,  # noqa: E402
                                   LLMContextFrame,
                                   LLMFullResponseEndFrame, LLMFullResponseStartFrame, LLMMessagesAppendFrame,
                                   LLMTextFrame, TranscriptionFrame, UserStartedSpeakingFrame,
                                   UserStoppedSpeakingFrame)
from pipecat.pipeline.pipeline import Pipeline  # noqa: E402
from pipecat.pipeline.worker import PipelineParams, PipelineWorker  # noqa: E402
from pipecat.processors.aggregators.llm_context import LLMContext  # noqa: E402
from pipecat.processors.aggregators.llm_response_universal import (LLMContextAggregatorPair,  # noqa: E402
                                                                   LLMUserAggregatorParams)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor  # noqa: E402
from pipecat.services.llm_service import LLMService  # noqa: E402
from pipecat.services.settings import LLMSettings  # noqa: E402
from pipecat.turns.user_start import ExternalUserTurnStartStrategy  # noqa: E402
from pipecat.turns.user_stop import ExternalUserTurnStopStrategy  # noqa: E402
from pipecat.turns.user_turn_strategies import UserTurnStrategies  # noqa: E402
from pipecat.workers.runner import WorkerRunner  # noqa: E402

from boundmem.integrations.pipecat import USER_KEY, BoundmemMemoryService  # noqa: E402
from boundmem.retrieve.format import DEFAULT, MemoryFormat  # noqa: E402

from .conftest import TURNS, SlowRecall, SubmitLog, check_exchanges, speak_all  # noqa: E402

SYSTEM = {"role": "system", "content": "You are a car assistant."}


class FakeLLM(LLMService):
    """Answers every context frame with one fixed-form reply and keeps a copy of each context it was given."""

    def __init__(self, **kwargs):
        fields = ("system_instruction", "temperature", "max_tokens", "top_p", "top_k", "frequency_penalty",
                  "presence_penalty", "seed", "filter_incomplete_user_turns", "user_turn_completion_config")
        super().__init__(settings=LLMSettings(model="fake", **dict.fromkeys(fields)), **kwargs)
        self.seen: asyncio.Queue = asyncio.Queue()
        self.n = 0

    async def process_frame(self, frame: Frame, direction):
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame):
            await self.seen.put((frame.speculation, copy.deepcopy(frame.context.get_messages())))
            if not frame.speculation:
                self.n += 1
                await self.push_frame(LLMFullResponseStartFrame())
                await self.push_frame(LLMTextFrame(f"Reply {self.n}."))
                await self.push_frame(LLMFullResponseEndFrame())
        else:
            await self.push_frame(frame, direction)


class Learned(FrameProcessor):
    """First in the pipeline: the assistant aggregator sends each finished turn upstream too, so when it arrives here
    it has passed the memory service, which has handed that exchange to its queue by then."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.turns: asyncio.Queue = asyncio.Queue()

    async def process_frame(self, frame: Frame, direction):
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextAssistantTurnFrame) and direction == FrameDirection.UPSTREAM:
            self.turns.put_nowait(frame.text)
        await self.push_frame(frame, direction)


class Voice:
    """A running pipeline and the means to speak into it."""

    def __init__(self, memory, service_kwargs, params=None):
        self.context = LLMContext([dict(SYSTEM)])
        strategies = UserTurnStrategies(start=[ExternalUserTurnStartStrategy()],
                                        stop=[ExternalUserTurnStopStrategy(timeout=0.05)])
        pair = LLMContextAggregatorPair(self.context, user_params=LLMUserAggregatorParams(
            user_turn_strategies=strategies))
        self.memory = BoundmemMemoryService(memory, **service_kwargs)
        self.llm = FakeLLM()
        self.learned = Learned()
        pipeline = Pipeline([self.learned, self.memory.transcripts(), pair.user(), self.memory, self.llm,
                             pair.assistant()])
        self.task = PipelineWorker(pipeline, params=params or PipelineParams(), cancel_on_idle_timeout=False)

    async def say(self, text: str) -> list:
        """One user turn (interim then final transcription); returns the messages the LLM was given, once the reply's
        exchange is with the memory service."""
        words = text.split()
        for frame in (UserStartedSpeakingFrame(),
                      InterimTranscriptionFrame(" ".join(words[:2]), "ann", "t"),
                      TranscriptionFrame(text, "ann", "t"), UserStoppedSpeakingFrame()):
            await self.task.queue_frame(frame)
        speculation, messages = await self.llm.seen.get()
        assert not speculation
        await self.learned.turns.get()
        return messages

    async def run(self, script):
        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(self.task)
        job = asyncio.create_task(runner.run())
        try:
            return await asyncio.wait_for(script(self), 60)
        finally:
            await self.task.queue_frame(EndFrame())
            await asyncio.wait_for(job, 30)


def memory_messages(messages: list) -> list:
    return [m for m in messages if isinstance(m, dict) and DEFAULT.is_memory(m.get("content"))]


def test_twenty_turns_one_memory_message_each_and_only_the_new_exchange_submitted(voice_memory):
    log = SubmitLog(voice_memory)
    voice_memory.submit = log
    voice = Voice(voice_memory, {"user_id": "ann", "params": BoundmemMemoryService.InputParams(deadline=5.0)})

    seen = asyncio.run(voice.run(speak_all))
    counts = [len(memory_messages(m)) for m in seen]
    assert max(counts) == 1, counts                       # never piled up
    assert counts[TURNS.index("put on some music")] == 1  # and there when it helps
    assert "Dislikes: Jazz" in memory_messages(seen[0])[0]["content"]
    assert memory_messages(seen[0])[0]["role"] == "developer"   # Pipecat's role for guidance added to the context
    assert all(m[0] == SYSTEM for m in seen)              # the app's instructions stay first
    final = voice.context.get_messages()
    assert len(memory_messages(final)) <= 1
    assert {u for u, _ in log.calls} == {"ann"}
    check_exchanges(log, voice.memory.stats)
    jobs = voice.memory.turns.jobs
    assert voice_memory.wait(jobs[-1].id).status == "done"


def test_a_recall_past_the_deadline_leaves_the_llm_without_memory_and_is_dropped(voice_memory):
    slow = SlowRecall(voice_memory)
    voice_memory.recall = slow
    voice = Voice(voice_memory, {"user_id": "ann", "params": BoundmemMemoryService.InputParams(deadline=0.05)})

    async def script(v: Voice):
        first = await v.say("put on some music")
        slow.release.set()                     # the late result arrives after the LLM has answered
        voice_memory.recall = slow.inner
        second = await v.say("play something to relax")
        return first, second

    first, second = asyncio.run(voice.run(script))
    assert memory_messages(first) == []
    stats = voice.memory.stats
    assert stats.late == 1 and stats.held[0] < 1.0     # held about the deadline, not the recall
    assert len(memory_messages(second)) == 1            # the next turn recalls normally, one message


def test_speculative_context_frames_are_left_alone(voice_memory):
    voice = Voice(voice_memory, {"user_id": "ann"})

    async def script(v: Voice):
        ctx = LLMContext([dict(SYSTEM), {"role": "user", "content": "put on some music"}])
        await v.task.queue_frame(LLMContextFrame(context=ctx, speculation=True))
        speculation, messages = await v.llm.seen.get()
        return speculation, messages

    speculation, messages = asyncio.run(voice.run(script))
    assert speculation and memory_messages(messages) == []
    assert voice.memory.stats.turns == 0


def test_list_of_parts_content_is_read(voice_memory):
    voice = Voice(voice_memory, {"user_id": "ann"})

    async def script(v: Voice):
        await v.task.queue_frame(LLMMessagesAppendFrame(
            messages=[{"role": "user", "content": [{"type": "text", "text": "put on some music"}]}], run_llm=True))
        return (await v.llm.seen.get())[1]

    messages = asyncio.run(voice.run(script))
    assert len(memory_messages(messages)) == 1


def test_user_and_tenant_come_from_the_pipeline_parameters(voice_memory):
    voice_memory.add([{"role": "user", "content": "I can't stand jazz music"}], "acme:bob")
    params = PipelineParams(start_metadata={USER_KEY: "bob", "boundmem_tenant": "acme"})
    voice = Voice(voice_memory, {}, params=params)
    messages = asyncio.run(voice.run(lambda v: v.say("put on some music")))
    assert voice.memory.turns.user == "acme:bob"
    assert "Dislikes: Jazz" in memory_messages(messages)[0]["content"]


def test_the_operators_wording_is_used_and_its_message_replaced(voice_memory):
    fmt = MemoryFormat(preamble="Driver profile (data only):")
    voice = Voice(voice_memory, {"user_id": "ann", "memory_format": fmt,
                                 "params": BoundmemMemoryService.InputParams(deadline=5.0)})

    async def script(v: Voice):
        return [await v.say("put on some music"), await v.say("any music for the drive")]

    for messages in asyncio.run(voice.run(script)):
        mine = [m for m in messages if fmt.is_memory(m.get("content"))]
        assert len(mine) == 1 and mine[0]["content"].startswith("Driver profile (data only):\n")
