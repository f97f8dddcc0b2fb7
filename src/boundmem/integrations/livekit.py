"""boundmem in a LiveKit agent: memory recalled into the turn's context within a deadline, learned from each reply.

    memory = BoundmemAgentMemory(Memory.local("boundmem.db"), user_id="ann")
    session = AgentSession(stt=..., llm=..., tts=..., vad=...)
    memory.attach(session)                       # transcripts start recall; each exchange is learned from
    await session.start(agent=MemoryAgent(memory, instructions="You are a car assistant."), room=ctx.room)

The hooks are LiveKit's own: `Agent.on_user_turn_completed` (the user has finished, the LLM is about to answer) puts
the one memory message into `turn_ctx`, waiting at most `deadline` seconds for the recall (past it the LLM answers
without memory, the late result is dropped and counted); the session's `user_input_transcribed` events start the
recall while the user is still speaking, and `conversation_item_added` hands each user message and the assistant's
reply to it, and nothing earlier, to the durable job queue. An agent of your own calls
`memory.on_user_turn_completed(turn_ctx, new_message, agent=self)` from its hook instead of deriving from
`MemoryAgent` (the agent: so that LiveKit's preemptive generation survives a turn whose memory did not change).
Needs `pip install 'boundmem[livekit]'`.
"""
from __future__ import annotations

from typing import Any, Optional

from livekit.agents import Agent, AgentSession, llm
from livekit.agents.voice.events import ConversationItemAddedEvent, UserInputTranscribedEvent

from ..memory import Memory
from ..retrieve.format import DEFAULT, MemoryFormat
from .turns import DEFAULT_DEADLINE, TurnMemory, TurnStats


def _message(m: Any) -> tuple[str, str]:
    """(role, text) of a LiveKit chat item; a function call or handoff has no role we read and is kept as it is."""
    if isinstance(m, llm.ChatMessage):
        return m.role, m.text_content or ""
    if isinstance(m, dict):   # what `TurnMemory.replace` inserts, before it becomes a ChatMessage
        return m["role"], m["content"]
    return "", ""


class BoundmemAgentMemory:
    """One conversation's memory for a LiveKit agent. `user_id` (and `tenant`) name whose; `deadline` caps the wait
    for recall; `k`, `episodic` (opt-in), `gate`, `memory_format` and `role` as in `TurnMemory`."""

    def __init__(self, memory: Memory, *, user_id: str, tenant: Optional[str] = None,
                 deadline: float = DEFAULT_DEADLINE, k: int = 5, episodic: bool = False, gate: bool = True,
                 memory_format: MemoryFormat = DEFAULT, role: str = "system"):
        self.turns = TurnMemory(memory, user_id, tenant=tenant, deadline=deadline, k=k, episodic=episodic, gate=gate,
                                fmt=memory_format, role=role)
        self._user_text = ""

    @property
    def stats(self) -> TurnStats:
        return self.turns.stats

    def attach(self, session: AgentSession) -> None:
        """Listen to the session: transcripts start recall, added conversation items are learned from."""
        session.on("user_input_transcribed", self._transcribed)
        session.on("conversation_item_added", self._item_added)

    def _transcribed(self, ev: UserInputTranscribedEvent) -> None:
        self.turns.transcript(ev.transcript, final=ev.is_final)

    def _item_added(self, ev: ConversationItemAddedEvent) -> None:
        role, text = _message(ev.item)
        if role == "user":
            self._user_text = text
        elif role == "assistant" and self._user_text:
            said, self._user_text = self._user_text, ""
            self.turns.exchange_soon(said, text)

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage,
                                     agent: Optional[Agent] = None) -> None:
        """Put this turn's memory into `turn_ctx` (replacing any memory message already there).

        Why `agent`: LiveKit's preemptive generation (on by default) starts the reply on a copy of the agent's chat
        context before the turn ends, and discards it (starting again) when this hook leaves `turn_ctx` different
        from that copy. A memory message only in `turn_ctx` would be new every turn; given the agent, it is also
        kept in the agent's own context, and a turn whose memory is the same as the last one's leaves `turn_ctx`
        as it was, so that the early reply stands."""
        block = await self.turns.memory_for(_message(new_message)[1])
        held = [_message(m)[1] for m in turn_ctx.items if self.turns.is_memory(*_message(m))]
        if held == ([block] if block else []):
            return
        turn_ctx.items = self._with(turn_ctx.items, block)
        if agent is not None:
            kept = agent.chat_ctx.copy()
            kept.items = self._with(kept.items, block)
            await agent.update_chat_ctx(kept)

    def _with(self, items: list, block: str) -> list:
        return [llm.ChatMessage(role=m["role"], content=[m["content"]]) if isinstance(m, dict) else m
                for m in self.turns.replace(items, block, _message)]


class MemoryAgent(Agent):
    """An `Agent` whose turns carry the user's memory: pass the `BoundmemAgentMemory` and Agent's own arguments."""

    def __init__(self, memory: BoundmemAgentMemory, **kwargs: Any):
        super().__init__(**kwargs)
        self.memory = memory

    async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
        await self.memory.on_user_turn_completed(turn_ctx, new_message, agent=self)
