"""An MCP server (stdio) so agent frameworks can use boundmem as a tool.

It runs on the operator's machine for one agent, so there are no keys: a fixed tenant
namespaces the user ids exactly as the HTTP API does, and the same database can be
served by both without one seeing the other's users unless they share the tenant name.
Needs the optional `mcp` package (`pip install 'boundmem[mcp]'`).
"""
from __future__ import annotations

import threading
from typing import Callable, Optional, Union

from pydantic import BaseModel, Field

try:  # mcp >= 2
    from mcp.server.mcpserver import MCPServer as _Server
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as _Server  # type: ignore[no-redef]

from ..memory import Memory
from ..models import Conversation, Turn
from ..store.base import NotFoundError
from .auth import namespaced

MemorySource = Union[Memory, Callable[[], Memory]]


class StoredPreference(BaseModel):
    id: str
    category: str
    attribute: str
    sentence: str = Field(description="What the user said that this was taken from.")


class RecallResult(BaseModel):
    preferences: list[StoredPreference]
    scores: list[float]


class AddResult(BaseModel):
    stored: list[StoredPreference] = Field(description="Preferences inserted or updated by this conversation.")
    unchanged: int = Field(description="Candidates that matched what was already stored.")
    blocked: int = Field(description="Candidates dropped because the user opted out of their category.")


class PreferenceListing(BaseModel):
    preferences: list[StoredPreference]


def build_server(memory: MemorySource, tenant: str = "mcp") -> "_Server":
    lock = threading.Lock()
    held: list[Memory] = []

    def mem() -> Memory:
        with lock:
            if not held:
                held.append(memory if isinstance(memory, Memory) else memory())
            return held[0]

    def sp(p) -> StoredPreference:
        return StoredPreference(id=p.id, category=str(p.path), attribute=p.attribute, sentence=p.sentence)

    server = _Server("boundmem", instructions=(
        "Long-term memory of user preferences, bounded to the categories the user agreed to. Call `add` with what "
        "the user said after a conversation, and `recall` with the user's latest utterance before answering."))

    @server.tool()
    def add(user: str, user_messages: list[str], conversation_id: Optional[str] = None) -> AddResult:
        """Remember the preferences the user expressed in these messages (the user's own words, in order)."""
        if not user_messages or not all(m.strip() for m in user_messages):
            raise ValueError("user_messages must be a non-empty list of non-empty strings")
        ns = namespaced(tenant, user)
        m = mem()
        conv = Conversation(id=conversation_id or "mcp", turns=tuple(Turn(role="user", text=t) for t in user_messages))
        r = m.add(conv, ns)
        ids = [d.target for d in r.decisions if d.action != "pass" and d.target]
        stored = [sp(m.store.get(ns, i)) for i in ids]
        return AddResult(stored=stored, unchanged=sum(d.action == "pass" for d in r.decisions), blocked=len(r.blocked))

    @server.tool()
    def recall(user: str, utterance: str, k: int = 5) -> RecallResult:
        """The stored preferences most relevant to what the user just said (k <= 0: dynamic, one subcategory)."""
        if not utterance.strip():
            raise ValueError("utterance must not be empty")
        hits = mem().recall(utterance, namespaced(tenant, user), k=None if k <= 0 else min(k, 100))
        return RecallResult(preferences=[sp(h.preference) for h in hits], scores=[round(h.score, 4) for h in hits])

    @server.tool()
    def list_preferences(user: str) -> PreferenceListing:
        """Everything stored about the user, with the sentence each preference came from."""
        return PreferenceListing(preferences=[sp(p) for p in mem().preferences(namespaced(tenant, user))])

    @server.tool()
    def delete_preference(user: str, preference_id: str) -> StoredPreference:
        """Delete one stored preference (when the user asks to forget it)."""
        try:
            return sp(mem().delete(namespaced(tenant, user), preference_id))
        except NotFoundError as e:
            raise ValueError(f"no preference {preference_id!r} for user {user!r}") from e

    return server


def main() -> None:  # `python -m boundmem.service.mcp` for clients that want a plain command
    import sys

    from .cli import app

    app(["mcp", *sys.argv[1:]])


if __name__ == "__main__":
    main()
