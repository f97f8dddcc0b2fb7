"""boundmem in a real LiveKit AgentSession (no room, no network): a scripted streaming STT feeds interim and final
transcripts, the turn is committed by hand (turn_detection="manual"), LiveKit calls the agent's
on_user_turn_completed and a fake LLM answers. Over 20 turns the LLM sees one memory message at a time, only each new
exchange is submitted, and the deadline holds against a recall that never returns in time."""
from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("livekit.agents")

from livekit.agents import AgentSession, llm, stt  # noqa: E402
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS  # noqa: E402

from boundmem.integrations.livekit import BoundmemAgentMemory, MemoryAgent  # noqa: E402
from boundmem.retrieve.format import DEFAULT  # noqa: E402

from .conftest import TURNS, SlowRecall, SubmitLog, check_exchanges, speak_all  # noqa: E402

INSTRUCTIONS = "You are a car assistant."


class ScriptedSTT(stt.STT):
    """A streaming STT whose transcripts the test hands it (`say`), whatever audio it is given."""

    def __init__(self):
        super().__init__(capabilities=stt.STTCapabilities(streaming=True, interim_results=True))
        self.events: asyncio.Queue = asyncio.Queue()

    async def _recognize_impl(self, buffer, *, language=None, conn_options=DEFAULT_API_CONNECT_OPTIONS):
        raise NotImplementedError

    def stream(self, *, language=None, conn_options=DEFAULT_API_CONNECT_OPTIONS):
        return _Stream(stt=self, conn_options=conn_options)

    def say(self, text: str) -> None:
        words = text.split()
        for kind, said in ((stt.SpeechEventType.INTERIM_TRANSCRIPT, " ".join(words[:2])),
                           (stt.SpeechEventType.FINAL_TRANSCRIPT, text)):
            self.events.put_nowait(stt.SpeechEvent(type=kind, alternatives=[stt.SpeechData(language="en", text=said)]))


class _Stream(stt.RecognizeStream):
    async def _run(self) -> None:
        while True:
            self._event_ch.send_nowait(await self._stt.events.get())


class FakeLLM(llm.LLM):
    """Answers "Reply N." and keeps each chat context it was given."""

    def __init__(self):
        super().__init__()
        self.seen: asyncio.Queue = asyncio.Queue()
        self.n = 0

    def chat(self, *, chat_ctx, tools=None, conn_options=DEFAULT_API_CONNECT_OPTIONS, **kwargs):
        self.n += 1
        self.seen.put_nowait([(m.role, m.text_content) for m in chat_ctx.messages()])
        return _Reply(self, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options, text=f"Reply {self.n}.")


class _Reply(llm.LLMStream):
    def __init__(self, *args, text: str, **kwargs):
        super().__init__(*args, **kwargs)
        self._text = text

    async def _run(self) -> None:
        self._event_ch.send_nowait(llm.ChatChunk(id="r", delta=llm.ChoiceDelta(role="assistant", content=self._text)))


class Voice:
    def __init__(self, memory: BoundmemAgentMemory):
        self.memory = memory

    def _open(self) -> None:   # inside the event loop: the session takes the running loop
        self.stt, self.llm = ScriptedSTT(), FakeLLM()
        memory = self.memory
        self.session = AgentSession(stt=self.stt, llm=self.llm, turn_handling={"turn_detection": "manual"})
        memory.attach(self.session)
        self.finals: asyncio.Queue = asyncio.Queue()
        self.replies: asyncio.Queue = asyncio.Queue()
        self.session.on("user_input_transcribed",
                        lambda ev: ev.is_final and self.finals.put_nowait(ev.transcript))
        self.session.on("conversation_item_added",
                        lambda ev: ev.item.role == "assistant" and self.replies.put_nowait(ev.item.text_content))

    async def say(self, text: str) -> list:
        self.stt.say(text)
        assert await self.finals.get() == text
        self.session.commit_user_turn()
        seen = await self.llm.seen.get()
        await self.replies.get()
        return seen

    async def run(self, script):
        self._open()
        await self.session.start(MemoryAgent(self.memory, instructions=INSTRUCTIONS))
        try:
            return await asyncio.wait_for(script(self), 60)
        finally:
            await self.session.aclose()


def memory_messages(messages: list) -> list:
    return [text for role, text in messages if role == "system" and DEFAULT.is_memory(text)]


def test_twenty_turns_one_memory_message_each_and_only_the_new_exchange_submitted(voice_memory):
    log = SubmitLog(voice_memory)
    voice_memory.submit = log
    voice = Voice(BoundmemAgentMemory(voice_memory, user_id="ann", deadline=5.0))

    seen = asyncio.run(voice.run(speak_all))
    counts = [len(memory_messages(m)) for m in seen]
    assert max(counts) == 1, counts
    assert "Dislikes: Jazz" in memory_messages(seen[0])[0]
    assert all(m[0] == ("system", INSTRUCTIONS) for m in seen)
    check_exchanges(log, voice.memory.stats)
    assert voice_memory.wait(voice.memory.turns.jobs[-1].id).status == "done"


def test_a_recall_past_the_deadline_leaves_the_llm_without_memory_and_is_dropped(voice_memory):
    slow = SlowRecall(voice_memory)
    voice_memory.recall = slow
    voice = Voice(BoundmemAgentMemory(voice_memory, user_id="ann", deadline=0.05))

    async def script(v: Voice):
        first = await v.say("put on some music")
        slow.release.set()
        voice_memory.recall = slow.inner
        return first, await v.say("play something to relax")

    first, second = asyncio.run(voice.run(script))
    assert memory_messages(first) == []
    assert voice.memory.stats.late == 1 and voice.memory.stats.held[0] < 1.0
    assert len(memory_messages(second)) == 1


def test_the_hook_reads_list_of_parts_and_replaces_a_memory_message_already_there(voice_memory):
    memory = BoundmemAgentMemory(voice_memory, user_id="ann")
    stale = DEFAULT.block(DEFAULT.preamble, ['{"memory": "old"}'])
    ctx = llm.ChatContext([llm.ChatMessage(role="system", content=[INSTRUCTIONS]),
                           llm.ChatMessage(role="system", content=[stale])])
    msg = llm.ChatMessage(role="user", content=["put on", "some music"])
    asyncio.run(memory.on_user_turn_completed(ctx, msg))
    texts = [m.text_content for m in ctx.messages()]
    assert texts[0] == INSTRUCTIONS and len(texts) == 2
    assert DEFAULT.is_memory(texts[1]) and "Dislikes: Jazz" in texts[1] and "old" not in texts[1]


class PreflightSTT(ScriptedSTT):
    """An STT that ends the turn itself (turn_detection="stt") and sends a preflight transcript first, on which
    LiveKit starts its preemptive generation before the turn ends."""

    def say(self, text: str) -> None:
        for kind, said in ((stt.SpeechEventType.START_OF_SPEECH, ""), (stt.SpeechEventType.PREFLIGHT_TRANSCRIPT, text),
                           (stt.SpeechEventType.FINAL_TRANSCRIPT, text), (stt.SpeechEventType.END_OF_SPEECH, "")):
            alternatives = [stt.SpeechData(language="en", text=said)] if said else []
            self.events.put_nowait(stt.SpeechEvent(type=kind, alternatives=alternatives))


def test_preemptive_generation_stands_while_the_memory_is_the_same(voice_memory):
    """LiveKit starts the reply early on the agent's context and starts again if the hook changed it: the memory
    message is kept in the agent's context, so only a turn whose memory changed costs a second LLM call."""
    memory = BoundmemAgentMemory(voice_memory, user_id="ann", deadline=5.0)
    turns = ["put on some music", "any music for the drive", "play something to relax", "what's the weather"]

    async def script():
        stt_, llm_ = PreflightSTT(), FakeLLM()
        session = AgentSession(stt=stt_, llm=llm_, turn_handling={"turn_detection": "stt"})
        memory.attach(session)
        replies: asyncio.Queue = asyncio.Queue()
        session.on("conversation_item_added", lambda ev: isinstance(ev.item, llm.ChatMessage)
                   and ev.item.role == "assistant" and replies.put_nowait(ev.item.text_content))
        await session.start(MemoryAgent(memory, instructions=INSTRUCTIONS))
        calls = []
        try:
            for text in turns:
                stt_.say(text)
                await asyncio.wait_for(replies.get(), 60)
                calls.append(llm_.n)
        finally:
            await session.aclose()
        return calls, [llm_.seen.get_nowait() for _ in range(llm_.seen.qsize())]

    calls, contexts = asyncio.run(script())
    # the first turn brings the memory in (the early reply is redone); the next two keep it; the weather drops it
    assert calls == [2, 3, 4, 6], calls
    assert all(len(memory_messages(c)) <= 1 for c in contexts)
    assert len(memory_messages(contexts[1])) == 1 and len(memory_messages(contexts[-1])) == 0
