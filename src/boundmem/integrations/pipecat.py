"""boundmem in a Pipecat pipeline: memory recalled into the LLM's context within a deadline, learned from each reply.

    transport.input(), stt, memory.transcripts(), context_aggregator.user(), memory, llm, tts, transport.output(),
    context_aggregator.assistant()

`BoundmemMemoryService` sits where Pipecat's own memory services sit, between the user context aggregator and the
LLM. On each (non-speculative) `LLMContextFrame` it holds the frame at most `deadline` seconds for the recall of the
user's turn, replaces its one memory message in the shared context (never appends one per turn) and passes the frame
on; on the assistant aggregator's `LLMContextAssistantTurnFrame` it queues the user's words and that reply, and
nothing earlier, for learning (a durable job).

The user aggregator consumes the transcriptions, so a processor after it never sees them: `memory.transcripts()` is
a pass-through placed before it, which starts recall speculatively on each interim and final transcription so the
memory is ready when the turn ends (without it, recall starts at the context frame and the deadline is all it has).

Whose memory: `user_id` (and `tenant`) given here, or in the pipeline's parameters,
`PipelineParams(start_metadata={"boundmem_user_id": ..., "boundmem_tenant": ...})`, read at the pipeline's start.
Needs `pip install 'boundmem[pipecat]'`.
"""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, Field

from pipecat.frames.frames import (Frame, InterimTranscriptionFrame, LLMContextAssistantTurnFrame, LLMContextFrame,
                                   LLMContextUserTurnFrame, StartFrame, TranscriptionFrame)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from ..errors import ConfigError
from ..memory import Memory
from ..retrieve.format import DEFAULT, MemoryFormat
from .turns import DEFAULT_DEADLINE, TurnMemory, TurnStats, dict_message, last_user_text

USER_KEY = "boundmem_user_id"
TENANT_KEY = "boundmem_tenant"


def _message(m: Any) -> tuple[str, str]:
    """(role, text) of a Pipecat context message: a standard {"role", "content"} dict (content a string or a list of
    parts); an LLM-specific message has no role we can read and is kept as it is."""
    return dict_message(m)


class BoundmemMemoryService(FrameProcessor):
    """Recall into the LLM's context within a deadline; learn from each exchange. See the module docstring."""

    class InputParams(BaseModel):
        """deadline: seconds a context frame may wait for memory (past it the LLM goes without; the late result is
        dropped and counted); k: at most this many memories; episodic: add episodes where episodic memory is on for
        the user (opt-in); gate=False: the raw top-k instead of what passes the recall gate; role: the memory message's role.

        Why "developer" by default: Pipecat keeps the app's instructions in the LLM service's `system_instruction` and
        guidance added at run time as developer messages in the context; an adapter that sends the instruction as a
        separate parameter (Anthropic, Google) drops an initial system message of the context when `system_instruction`
        is set, and each service turns developer messages into what its model accepts (user messages where it has no
        such role)."""

        deadline: float = Field(default=DEFAULT_DEADLINE, gt=0)
        k: int = Field(default=5, ge=1, le=50)
        episodic: bool = False
        gate: bool = True
        role: Literal["system", "developer"] = "developer"

    def __init__(self, memory: Memory, *, user_id: Optional[str] = None, tenant: Optional[str] = None,
                 params: Optional[InputParams] = None, memory_format: MemoryFormat = DEFAULT, **kwargs: Any):
        super().__init__(**kwargs)
        self._memory, self._tenant, self._format = memory, tenant, memory_format
        self._params = params or BoundmemMemoryService.InputParams()
        self._turns: Optional[TurnMemory] = self._bind(user_id, tenant) if user_id is not None else None
        self._user_text = ""

    def _bind(self, user_id: str, tenant: Optional[str]) -> TurnMemory:
        p = self._params
        return TurnMemory(self._memory, user_id, tenant=tenant, deadline=p.deadline, k=p.k, episodic=p.episodic,
                          gate=p.gate, fmt=self._format, role=p.role)

    @property
    def turns(self) -> TurnMemory:
        if self._turns is None:
            raise ConfigError("BoundmemMemoryService has no user: pass user_id=... or "
                              f"PipelineParams(start_metadata={{'{USER_KEY}': ...}})")
        return self._turns

    @property
    def stats(self) -> TurnStats:
        """Turns, memory injected, speculative hits, late (dropped) recalls, exchanges queued, seconds held."""
        return self.turns.stats

    def transcripts(self) -> FrameProcessor:
        """The pass-through to place before the user context aggregator: it starts recall on each transcription."""
        return _TranscriptTap(self)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, StartFrame) and self._turns is None:
            meta = getattr(frame, "metadata", None) or {}
            self._turns = self._bind(meta.get(USER_KEY), meta.get(TENANT_KEY, self._tenant)) \
                if meta.get(USER_KEY) is not None else None
        elif isinstance(frame, (TranscriptionFrame, InterimTranscriptionFrame)):
            self.heard(frame)
        elif isinstance(frame, LLMContextUserTurnFrame):
            self._user_text = frame.text
        elif isinstance(frame, LLMContextFrame) and not frame.speculation and direction == FrameDirection.DOWNSTREAM:
            await self._remember(frame)
        elif isinstance(frame, LLMContextAssistantTurnFrame):
            self._learn(frame.text)
        await self.push_frame(frame, direction)

    def heard(self, frame: Frame) -> None:
        if self._turns is not None:
            self._turns.transcript(frame.text, final=isinstance(frame, TranscriptionFrame))

    async def _remember(self, frame: LLMContextFrame) -> None:
        context = frame.context
        messages = context.get_messages()
        said = last_user_text(messages, _message)
        self._user_text = said or self._user_text
        block = await self.turns.memory_for(said)
        context.set_messages(self.turns.replace(context.get_messages(), block, _message))

    def _learn(self, reply: str) -> None:
        said, self._user_text = self._user_text, ""
        if said:
            self.turns.exchange_soon(said, reply)


class _TranscriptTap(FrameProcessor):
    """Before the user aggregator: hands each transcription to the memory service and passes every frame on."""

    def __init__(self, service: BoundmemMemoryService, **kwargs: Any):
        super().__init__(**kwargs)
        self._service = service

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, (TranscriptionFrame, InterimTranscriptionFrame)):
            self._service.heard(frame)
        await self.push_frame(frame, direction)
