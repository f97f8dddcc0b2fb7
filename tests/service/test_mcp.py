"""The MCP server as an agent framework sees it: a subprocess speaking MCP over stdio."""
from __future__ import annotations

import json
import sys

import anyio
import pytest

pytest.importorskip("mcp", reason="needs the optional 'mcp' package (requirements-dev.txt)")

SERVER = """
import sys
from boundmem.extract.keyword import KeywordExtractor
from boundmem.maintain.rules import RuleMaintainer
from boundmem.memory import Memory
from boundmem.retrieve.embed import HashEmbedder
from boundmem.schema import builtin_schema
from boundmem.service.mcp import build_server
from boundmem.store.sqlite import SQLiteStore

mem = Memory(schema=builtin_schema(), store=SQLiteStore(sys.argv[1]), extractor=KeywordExtractor(),
             maintainer=RuleMaintainer(), embedder=HashEmbedder())
build_server(mem, tenant=sys.argv[2]).run("stdio")
"""


def _structured(result) -> dict:
    if getattr(result, "structured_content", None) is not None:
        return result.structured_content
    if getattr(result, "structuredContent", None) is not None:
        return result.structuredContent
    return json.loads(result.content[0].text)


async def _session(db, tenant, script, args=None):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=args or ["-c", SERVER, str(db), tenant])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await script(session)


def test_add_and_recall_over_stdio(tmp_path):
    from boundmem.store.sqlite import SQLiteStore

    db = tmp_path / "mcp.db"

    async def script(s):
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert {"add", "recall", "list_preferences", "delete_preference"} <= set(tools)
        assert "utterance" in tools["recall"].input_schema["properties"] if hasattr(tools["recall"], "input_schema") \
            else "utterance" in tools["recall"].inputSchema["properties"]
        added = _structured(await s.call_tool("add", {"user": "alice", "user_messages": [
            "I love Italian food.", "I always fill up at PetroLux."], "conversation_id": "chat-1"}))
        assert {p["attribute"] for p in added["stored"]} == {"Italian", "PetroLux"}
        hits = _structured(await s.call_tool("recall", {"user": "alice", "utterance": "hungry for Italian food", "k": 1}))
        bad = await s.call_tool("recall", {"user": "bob:x", "utterance": "Italian"})
        return hits, bad

    hits, bad = anyio.run(_session, db, "agent", script)
    assert [p["attribute"] for p in hits["preferences"]] == ["Italian"]
    assert hits["preferences"][0]["sentence"] == "I love Italian food."
    assert (getattr(bad, "is_error", None) or getattr(bad, "isError", None)) is True  # a namespace-escaping user id
    store = SQLiteStore(db)
    try:  # stored under the server's tenant namespace, provenance kept
        assert {p.attribute: p.conversation_id for p in store.preferences("agent:alice")} == {"Italian": "chat-1", "PetroLux": "chat-1"}
        assert store.users() == ["agent:alice"]
    finally:
        store.close()


def test_cli_serve_mcp_speaks_the_protocol(tmp_path):
    """`boundmem serve mcp` itself (the command an agent framework is configured with) answers list_tools."""
    args = ["-m", "boundmem.cli", "serve", "mcp", "--db", str(tmp_path / "cli.db"), "--tenant", "agent",
            "--extractor", "keyword", "--maintainer", "rules"]

    async def script(s):
        return {t.name for t in (await s.list_tools()).tools}

    assert {"add", "recall"} <= anyio.run(_session, None, None, script, args)
