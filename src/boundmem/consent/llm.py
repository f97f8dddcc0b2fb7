"""Consent by voice, LLM variant: one short forced tool call that lists the user's consent requests.

The model sees the user's turns, numbered, and the schema's categories (main, sub and detail, by path, name and
description) and calls `record_consent_requests` with `{"requests": [{"turn", "action", "category"}]}`, where
`action` is "stop_remembering" (opt-out) or "forget" (delete what is stored) and `category` one of the listed paths.
The utterance kept as the consent record is the user's turn itself, never text the model wrote.

No silent guess: an answer that is not a valid call (no tool call, broken JSON, an unknown category or action, a
turn that is not a user turn, extra fields) raises `ConsentError` naming the conversation, the model and what was
wrong, and nothing is applied. A conversation with no clause shaped like a consent request (the local patterns:
"stop remembering ...", "don't keep track of ...", "forget|delete ...") costs no call unless `gate=False`.
"""
from __future__ import annotations

import json
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, ValidationError

from ..llm.client import LLMClient
from ..llm.errors import LLMOutputError
from ..models import Conversation
from ..schema.model import Schema
from ..extract.base import ExtractionError
from .local import ConsentRequest, LocalConsentDetector

TOOL_NAME = "record_consent_requests"

SYSTEM_PROMPT = """\
You find a user's requests about what a voice assistant may remember. The default is that there are none.
- "stop_remembering": the user tells the assistant to stop remembering, tracking, storing or keeping track of a kind \
of thing ("stop remembering where I like to eat", "don't keep track of my music").
- "forget": the user tells the assistant to forget, delete or erase what it knows of a kind of thing ("forget my \
music preferences", "delete what you know about my parking").
- Not requests: preferences ("I like to eat Italian"), questions ("do you remember my music?"), commands for the car \
or the media ("stop the music", "delete the route"), "don't forget ...", or a person forgetting something.
- category: the path of the category the request is about, from the list; the broadest one that the user's words \
name (a main or sub category when they speak of it as a whole). Leave a request out if no category fits.
- turn: the number of the user turn that says it.
Categories:
{categories}
Call {tool} with {{"requests": [...]}}; [] when there is none."""


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")

    turn: int
    action: Literal["stop_remembering", "forget"]
    category: str


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requests: list[_Request]


class ConsentError(ExtractionError):
    """The LLM's consent answer was not valid; nothing was applied."""


def category_paths(schema: Schema) -> list[tuple[str, str, str]]:
    """(path, name, description) of every main, sub and detail category, in schema order."""
    out = []
    for m in schema.mains:
        out.append((m.key, m.name, m.description))
        for s in m.subs:
            out.append((f"{m.key}/{s.key}", s.name, s.description))
            out.extend((f"{m.key}/{s.key}/{d.key}", d.name, "") for d in s.details)
    return out


def tool_definition(schema: Schema) -> dict:
    paths = [p for p, _, _ in category_paths(schema)]
    item = {"type": "object", "additionalProperties": False, "required": ["turn", "action", "category"],
            "properties": {"turn": {"type": "integer", "description": "number of the user turn"},
                           "action": {"type": "string", "enum": ["stop_remembering", "forget"]},
                           "category": {"type": "string", "enum": paths}}}
    return {"type": "function", "function": {
        "name": TOOL_NAME, "description": "Record the user's requests to stop remembering or to forget a category.",
        "parameters": {"type": "object", "additionalProperties": False, "required": ["requests"],
                       "properties": {"requests": {"type": "array", "items": item}}}}}


class LLMConsentDetector:
    name = "llm"

    def __init__(self, client: LLMClient, gate: bool = True):
        self.client = client
        self.gate = gate
        self._local = LocalConsentDetector(None)
        self.calls = 0

    def messages(self, conversation: Conversation, schema: Schema) -> list[dict[str, str]]:
        cats = "\n".join(f"- {p}: {n}" + (f" ({d})" if d else "") for p, n, d in category_paths(schema))
        turns = "\n".join(f"{i}: {t}" for i, t in conversation.user_sentences())
        return [{"role": "system", "content": SYSTEM_PROMPT.format(categories=cats, tool=TOOL_NAME)},
                {"role": "user", "content": f"User turns:\n===\n{turns}\n===\nList the user's consent requests."}]

    def detect(self, conversation: Conversation, schema: Schema) -> list[ConsentRequest]:
        if self.gate and not self._local.mentions_consent(conversation):
            return []
        self.calls += 1
        try:
            args = self.client.call_tool(self.messages(conversation, schema), tool_definition(schema))
        except LLMOutputError as e:
            raise self._error(conversation, str(e)) from e
        try:
            answer = _Answer.model_validate(args)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise self._error(conversation, f"{where}: {first['msg']} in {json.dumps(args)[:300]}") from None
        texts = dict(conversation.user_sentences())
        paths = {p for p, _, _ in category_paths(schema)}
        out = []
        for r in answer.requests:
            if r.turn not in texts:
                raise self._error(conversation, f"turn {r.turn} is not a user turn (user turns: {sorted(texts)})")
            if r.category not in paths:
                raise self._error(conversation, f"unknown category {r.category!r}")
            out.append(ConsentRequest(kind="opt_out" if r.action == "stop_remembering" else "delete", prefix=r.category,
                                      utterance=texts[r.turn], turn=r.turn, how="llm"))
        return out

    def _error(self, conversation: Conversation, why: str) -> ConsentError:
        return ConsentError(f"LLM consent answer for conversation {conversation.id!r} is invalid, nothing was applied "
                            f"(model {self.client.model!r}): {why}")


def default_detector(extractor, embedder) -> Optional[object]:
    """The consent detector that goes with an extractor: the LLM one for an LLM extractor (same client), else local."""
    client = getattr(extractor, "client", None)
    if isinstance(client, LLMClient):
        return LLMConsentDetector(client)
    return LocalConsentDetector(embedder)
