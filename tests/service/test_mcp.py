"""The MCP server as an agent framework runs it: `boundmem serve mcp` as a subprocess speaking MCP over stdio."""
from __future__ import annotations

import json
import sys

import anyio
import pytest

pytest.importorskip("mcp", reason="needs the optional 'mcp' package (requirements-dev.txt)")


def _structured(result) -> dict:
    for attr in ("structured_content", "structuredContent"):  # mcp 2.x / 1.x
        if getattr(result, attr, None) is not None:
            return getattr(result, attr)
    return json.loads(result.content[0].text)


def _is_error(result) -> bool:
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", None))


async def _session(args, script):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async with stdio_client(StdioServerParameters(command=sys.executable, args=args)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await script(session)


def test_add_and_recall_over_stdio(tmp_path):
    from boundmem.store.sqlite import SQLiteStore

    db = tmp_path / "mcp.db"
    args = ["-m", "boundmem.cli", "serve", "mcp", "--db", str(db), "--tenant", "agent",
            "--extractor", "keyword", "--maintainer", "rules", "--embedder", "hash"]

    async def script(s):
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert {"add", "recall", "list_preferences", "delete_preference"} <= set(tools)
        schema = getattr(tools["recall"], "input_schema", None) or tools["recall"].inputSchema
        assert {"user", "utterance", "k"} <= set(schema["properties"])
        added = _structured(await s.call_tool("add", {"user": "alice", "user_messages": [
            "I love Italian food.", "I always fill up at PetroLux."], "conversation_id": "chat-1"}))
        assert {p["attribute"] for p in added["stored"]} == {"Italian", "PetroLux"}
        hits = _structured(await s.call_tool("recall", {"user": "alice", "utterance": "hungry for Italian food", "k": 1}))
        bad = await s.call_tool("recall", {"user": "bob:x", "utterance": "Italian"})
        return hits, bad

    hits, bad = anyio.run(_session, args, script)
    assert [p["attribute"] for p in hits["preferences"]] == ["Italian"]
    assert hits["preferences"][0]["sentence"] == "I love Italian food."
    assert _is_error(bad)  # a user id that tries to leave the tenant namespace
    store = SQLiteStore(db)
    try:  # stored under the server's tenant namespace, provenance kept
        assert {p.attribute: p.conversation_id for p in store.preferences("agent:alice")} == {"Italian": "chat-1", "PetroLux": "chat-1"}
        assert store.users() == ["agent:alice"]
    finally:
        store.close()
