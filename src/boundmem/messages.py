"""What `Memory.add`, `submit`, the HTTP ingest route and the client accept as a conversation, turned into one.

Every LLM SDK already holds the exchange as a list of `{"role", "content"}` messages (OpenAI, Anthropic, mem0,
Pipecat and LiveKit contexts), so that list is accepted as it is, as are a plain string (one user turn) and our own
`Conversation`. Only what the user and the assistant said is kept: system, developer and tool messages are the
application's words, not the user's, and are never mined for preferences. Anything else is an `InputError` naming
what was expected and where, so a wrong shape never surfaces as an AttributeError deep inside extraction."""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Optional, Sequence, Union

from pydantic import BaseModel, ValidationError

from .errors import InputError
from .models import Conversation, Turn

ConversationInput = Union[Conversation, str, Sequence[Mapping[str, Any]], Mapping[str, Any]]
"""A `Conversation`, a string (one user turn), a list of `{"role", "content"}` messages, one such message, or a
conversation's JSON (`{"id", "turns"}`)."""

EXPECTED = ("a Conversation, a string (one user turn) or a list of {'role', 'content'} messages "
            "(roles user and assistant; system, developer and tool messages are ignored)")

_SPEAKERS = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "model": "assistant"}
_IGNORED = {"system", "developer", "tool", "function", "ipython"}


class MessageError(InputError):
    """A conversation given in a shape boundmem cannot read; names the message and field."""


def new_conversation_id() -> str:
    """An id for a conversation given without one: unique, so two such conversations never merge in provenance."""
    return f"conv-{uuid.uuid4().hex}"


def _text(content: Any, where: str) -> str:
    """A message's words: a string, or the text parts of a list of content parts (OpenAI / Anthropic multimodal)."""
    if content is None:
        return ""   # an assistant message that only calls tools
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, (list, tuple)):
        parts = []
        for j, part in enumerate(content):
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif not (isinstance(part, Mapping) and "type" in part):   # an image or audio part: not words
                raise MessageError(f"{where}.content[{j}]: a content part is a string or {{'type': 'text', 'text': ...}}, "
                                   f"got {type(part).__name__}")
        return " ".join(p.strip() for p in parts if p.strip())
    raise MessageError(f"{where}.content: must be a string or a list of text parts, got {type(content).__name__}")


def content_text(content: Any) -> str:
    """The words of a message's content as a live chat context holds it (a string or a list of parts, Pipecat's and
    LiveKit's included), never raising: a voice pipeline reads its context every turn and must not stop on a part it
    cannot read (an image, an unknown shape), which simply holds no words."""
    if isinstance(content, (list, tuple)):
        return " ".join(t for t in (content_text(p) if not isinstance(p, Mapping) else content_text(p.get("text"))
                                    for p in content) if t)
    return content.strip() if isinstance(content, str) else ""


def _as_mapping(msg: Any) -> Optional[Mapping]:
    if isinstance(msg, Mapping):
        return msg
    if isinstance(msg, Turn):
        return {"role": msg.role, "content": msg.text}
    if isinstance(msg, BaseModel):   # an SDK's own message object (openai's ChatCompletionMessage, ...)
        return msg.model_dump()
    return None


def _turns(messages: Sequence[Any], field: str) -> list[Turn]:
    turns: list[Turn] = []
    for i, msg in enumerate(messages):
        where = f"{field}[{i}]"
        m = _as_mapping(msg)
        if m is None or "role" not in m:
            raise MessageError(f"{where}: expected a {{'role', 'content'}} message, got "
                               f"{type(msg).__name__ if m is None else 'a mapping without role'}")
        role = m["role"]
        key = role.strip().lower() if isinstance(role, str) else None
        if key in _IGNORED:
            continue
        if key not in _SPEAKERS:
            raise MessageError(f"{where}.role: unknown role {role!r} (user and assistant are read; "
                               f"{', '.join(sorted(_IGNORED))} are ignored)")
        text = _text(m["content"] if "content" in m else m.get("text"), where)
        if text:
            turns.append(Turn(role=_SPEAKERS[key], text=text))
    return turns


def to_conversation(obj: ConversationInput, conversation_id: Optional[str] = None) -> Conversation:
    """The `Conversation` for any accepted input; the id is `conversation_id`, the input's own, or a new one."""
    if isinstance(obj, Conversation):
        if conversation_id is not None and conversation_id != obj.id:
            raise MessageError(f"conversation_id {conversation_id!r} differs from the Conversation's id {obj.id!r}")
        return obj
    if conversation_id is not None and (not isinstance(conversation_id, str) or not conversation_id.strip()):
        raise MessageError("conversation_id: must be a non-empty string")
    if isinstance(obj, str):
        if not obj.strip():
            raise MessageError("the conversation is an empty string")
        turns, field = [Turn(role="user", text=obj.strip())], "text"
    elif isinstance(obj, Mapping) and ("turns" in obj or "messages" in obj):   # a conversation's JSON, the API's body
        field = "turns" if "turns" in obj else "messages"
        cid = obj.get("id")
        if conversation_id is not None and cid is not None and cid != conversation_id:
            raise MessageError(f"conversation_id {conversation_id!r} differs from the conversation's id {cid!r}")
        inner = obj[field]
        if not isinstance(inner, (list, tuple)) and not (field == "messages" and isinstance(inner, str)):
            raise MessageError(f"{field}: expected a list of messages, got {type(inner).__name__}")
        return to_conversation(inner, conversation_id or cid)
    elif isinstance(obj, Mapping) or isinstance(obj, Turn):   # one message
        turns, field = _turns([obj], "messages"), "messages"
    elif isinstance(obj, (list, tuple)):
        turns, field = _turns(obj, "messages"), "messages"
    else:
        raise MessageError(f"expected {EXPECTED}; got {type(obj).__name__}")
    if not turns:
        raise MessageError(f"{field}: no user or assistant message with text (expected {EXPECTED})")
    try:
        return Conversation(id=conversation_id or new_conversation_id(), turns=tuple(turns))
    except ValidationError as e:
        err = e.errors()[0]
        raise MessageError(f"{'.'.join(map(str, err['loc'])) or 'conversation'}: {err['msg']}") from None
