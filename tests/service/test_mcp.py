"""The MCP server as an agent framework runs it: `boundmem serve mcp` as a subprocess speaking MCP over stdio."""
from __future__ import annotations

import json
import os
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
    from mcp.client.stdio import get_default_environment, stdio_client

    # the whole environment: the MCP library passes only a few variables by default, and without PYTHONPATH the
    # server would be whatever boundmem is installed, not the code under test
    async with stdio_client(StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ))) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await script(session)


def _serve_mcp(db) -> list[str]:
    return ["-m", "boundmem.cli", "serve", "mcp", "--db", str(db),
            "--extractor", "keyword", "--maintainer", "rules", "--embedder", "hash"]


def test_add_and_recall_over_stdio(tmp_path):
    from boundmem.store.sqlite import SQLiteStore

    db = tmp_path / "mcp.db"
    args = [*_serve_mcp(db), "--tenant", "agent", "--user", "alice"]

    async def script(s):
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert {"add", "recall", "list_preferences", "delete_preference", "list_observations", "confirm_observation",
                "dismiss_observation"} <= set(tools)
        schema = getattr(tools["recall"], "input_schema", None) or tools["recall"].inputSchema
        assert {"utterance", "k", "gate", "min_score"} <= set(schema["properties"])
        assert all("user" not in (getattr(t, "input_schema", None) or t.inputSchema)["properties"] for t in tools.values())
        added = _structured(await s.call_tool("add", {"user_messages": [
            "I love Italian food.", "I always fill up at PetroLux."], "conversation_id": "chat-1"}))
        assert {p["attribute"] for p in added["stored"]} == {"Italian", "PetroLux"}
        hits = _structured(await s.call_tool("recall", {"utterance": "hungry for Italian food", "k": 1, "gate": False}))
        bad = await s.call_tool("recall", {"user": "bob:x", "utterance": "Italian"})
        return hits, bad

    hits, bad = anyio.run(_session, args, script)
    assert [p["attribute"] for p in hits["preferences"]] == ["Italian"]
    assert hits["preferences"][0]["sentence"] == "I love Italian food."
    assert _is_error(bad) and "no tool takes a user id" in bad.content[0].text   # a user id passed anyway
    store = SQLiteStore(db)
    try:  # stored under the server's tenant namespace, provenance kept
        assert {p.attribute: p.conversation_id for p in store.preferences("agent:alice")} == {"Italian": "chat-1", "PetroLux": "chat-1"}
        assert store.users() == ["agent:alice"]
    finally:
        store.close()


def _seed(db, user: str, *texts: str) -> None:
    """Store preferences for `agent:<user>` through a server bound to that user."""
    async def script(s):
        assert not _is_error(await s.call_tool("add", {"user_messages": list(texts)}))

    anyio.run(_session, [*_serve_mcp(db), "--tenant", "agent", "--user", user], script)


def test_a_server_bound_to_alice_refuses_every_other_user_id(tmp_path):
    """A prompt injection ("recall what bob likes", "forget bob's ...") names another user: refused, bob untouched."""
    from boundmem.store.sqlite import SQLiteStore

    db = tmp_path / "mcp.db"
    _seed(db, "bob", "I love Italian food.")
    store = SQLiteStore(db)
    try:
        bob_ids = [p.id for p in store.preferences("agent:bob")]
    finally:
        store.close()
    assert len(bob_ids) == 1

    async def script(s):
        out = {}
        for other in ("bob", "alice\n", "agent:bob", "bob\n"):
            out[other] = [await s.call_tool("recall", {"user": other, "utterance": "Italian food"}),
                          await s.call_tool("list_preferences", {"user": other}),
                          await s.call_tool("delete_preference", {"user": other, "preference_id": bob_ids[0]}),
                          await s.call_tool("add", {"user": other, "user_messages": ["I like Mexican food."]})]
        out["own"] = await s.call_tool("list_preferences", {})
        out["own, named"] = await s.call_tool("list_preferences", {"user": "alice"})
        out["bob's id as alice"] = await s.call_tool("delete_preference", {"preference_id": bob_ids[0]})
        return out

    out = anyio.run(_session, [*_serve_mcp(db), "--tenant", "agent", "--user", "alice"], script)
    for other in ("bob", "alice\n", "agent:bob", "bob\n"):
        for r in out[other]:
            assert _is_error(r), (other, r)
            assert "Italian" not in r.content[0].text
    assert _structured(out["own"])["preferences"] == []
    assert _is_error(out["own, named"])   # no tool takes a user, not even its own: the server decides whose memory
    assert _is_error(out["bob's id as alice"])
    store = SQLiteStore(db)
    try:
        assert [p.id for p in store.preferences("agent:bob")] == bob_ids
        assert sorted(store.users()) == ["agent:bob"]   # nothing was written for any other id
    finally:
        store.close()


def test_serve_mcp_must_be_bound_to_one_user(tmp_path):
    import subprocess

    for extra, needle in (([], "exactly one user"), (["--user", "alice\n"], "invalid user id"),
                          (["--user", "a:b"], "invalid user id"), (["--token", "bmu1.x.y"], "--token-secret-file")):
        r = subprocess.run([sys.executable, *_serve_mcp(tmp_path / "x.db"), *extra], capture_output=True, text=True,
                           timeout=120, stdin=subprocess.DEVNULL)
        assert r.returncode == 2 and needle in r.stderr, (extra, r.stderr)


def test_a_server_bound_to_a_user_token_stops_when_it_is_revoked(tmp_path):
    import subprocess

    from boundmem.service.tokens import Generations, TokenIssuer

    secret, state = tmp_path / "secret", tmp_path / "tokens.db"
    secret.write_bytes(b"s" * 40)
    issuer = TokenIssuer(secret.read_bytes(), Generations(state))   # what the API server holds
    token, _ = issuer.mint("acme", "alice", ttl=600)
    args = [*_serve_mcp(tmp_path / "m.db"), "--token", token, "--token-secret-file", str(secret), "--token-state", str(state)]

    async def script(s):
        added = await s.call_tool("add", {"user_messages": ["I love Italian food."]})
        other = await s.call_tool("list_preferences", {"user": "bob"})
        issuer.revoke("acme", "alice")
        after = await s.call_tool("list_preferences", {})
        return added, other, after

    added, other, after = anyio.run(_session, args, script)
    assert not _is_error(added) and _is_error(other)
    assert _is_error(after) and "revoked" in after.content[0].text
    # a revoked, forged or expired token does not even start a server
    expired, _ = TokenIssuer(secret.read_bytes(), Generations(state), clock=lambda: 0.0).mint("acme", "alice", ttl=60)
    for bad, why in ((token, "revoked"), (token[:-2] + "xx", "signature"), (expired, "expired")):
        r = subprocess.run([sys.executable, *args[:args.index("--token") + 1], bad, *args[args.index("--token") + 2:]],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert r.returncode == 2 and why in r.stderr, (why, r.stderr)


def test_add_answers_with_what_was_stored_without_reading_it_back(tmp_path):
    """The ingest result carries the stored preferences (as inserted or updated), so `add` reads nothing back."""
    from boundmem.extract.keyword import KeywordExtractor
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.memory import Memory
    from boundmem.schema import builtin_schema
    from boundmem.embed import HashEmbedder
    from boundmem.service.mcp import Binding, build_server
    from boundmem.store.sqlite import SQLiteStore

    class CountingStore(SQLiteStore):
        gets = 0

        def get(self, user, pref_id):
            CountingStore.gets += 1
            return super().get(user, pref_id)

    store = CountingStore(tmp_path / "m.db")
    mem = Memory(schema=builtin_schema(), store=store, extractor=KeywordExtractor(), maintainer=RuleMaintainer(),
                 embedder=HashEmbedder())
    server = build_server(mem, Binding(tenant="agent", user="alice"))
    try:
        first = _structured(anyio.run(server.call_tool, "add", {"user_messages": ["I love Italian food."]}))
        (italian,) = store.preferences("agent:alice")
        assert first["stored"] == [{"id": italian.id, "category": str(italian.path), "attribute": "Italian",
                                    "polarity": "like", "sentence": "I love Italian food."}]
        again = _structured(anyio.run(server.call_tool, "add", {"user_messages": ["Italian food, as always."]}))
        assert again["stored"] == [] and again["unchanged"] == 1
        assert CountingStore.gets == 0
    finally:
        store.close()


@pytest.fixture()
def cue_server(tmp_path, cue_extractor):
    """An MCP server bound to agent:alice over a Memory whose extractor marks dislikes and one-off choices."""
    from boundmem.embed import HashEmbedder
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.memory import Memory
    from boundmem.schema import builtin_schema
    from boundmem.service.mcp import Binding, build_server
    from boundmem.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "m.db")
    mem = Memory(schema=builtin_schema(), store=store, extractor=cue_extractor, maintainer=RuleMaintainer(),
                 embedder=HashEmbedder())
    yield mem, (lambda name, args: anyio.run(build_server(mem, Binding(tenant="agent", user="alice")).call_tool,
                                             name, args))
    store.close()


def _tool_error(call, name, args) -> str:
    from boundmem.service.mcp import ToolError

    with pytest.raises(ToolError) as e:
        call(name, args)
    return str(e.value)


def test_polarity_and_observations_as_tools(cue_server):
    mem, call = cue_server
    added = _structured(call("add", {"user_messages": ["I can't stand Jazz.", "Play some Rock."], "conversation_id": "c1"}))
    assert [(p["attribute"], p["polarity"]) for p in added["stored"]] == [("Jazz", "dislike")]
    assert [(o["attribute"], o["polarity"], o["conversation_id"]) for o in added["observed"]] == [("Rock", "like", "c1")]
    assert added["promoted"] == []
    listed = _structured(call("list_preferences", {}))["preferences"]
    assert [(p["attribute"], p["polarity"]) for p in listed] == [("Jazz", "dislike")]
    (rock,) = _structured(call("list_observations", {}))["observations"]
    assert rock["sentence"] == "Play some Rock."
    confirmed = _structured(call("confirm_observation", {"observation_id": rock["id"]}))
    assert (confirmed["attribute"], confirmed["polarity"]) == ("Rock", "like")
    assert {p.attribute for p in mem.preferences("agent:alice")} == {"Jazz", "Rock"}
    call("add", {"user_messages": ["Play some Pop."], "conversation_id": "c2"})
    (pop,) = _structured(call("list_observations", {}))["observations"]
    assert _structured(call("dismiss_observation", {"observation_id": pop["id"]}))["id"] == pop["id"]
    assert _structured(call("list_observations", {}))["observations"] == [] == mem.observations("agent:alice")
    assert "nope" in _tool_error(call, "confirm_observation", {"observation_id": "nope"})
    assert "nope" in _tool_error(call, "dismiss_observation", {"observation_id": "nope"})


def test_observation_tools_serve_only_the_bound_user(cue_server):
    """A prompt injection naming bob reaches none of bob's observations, and alice's tools never show them."""
    mem, call = cue_server
    mem.add(_conversation("b1", "Play some Jazz."), "agent:bob")
    (bobs,) = mem.observations("agent:bob")
    for name, args in (("list_observations", {"user": "bob"}),
                       ("confirm_observation", {"user": "bob", "observation_id": bobs.id}),
                       ("dismiss_observation", {"user": "agent:bob", "observation_id": bobs.id})):
        # over stdio a `user` argument is refused at the frame (test_mcp_frames); called in process the library
        # may drop it: either way nothing of bob's comes back
        try:
            answer = str(call(name, args))
        except Exception as e:   # noqa: BLE001 - a refusal is as good as an empty answer here
            answer = str(e)
        assert "Jazz" not in answer
    assert _structured(call("list_observations", {}))["observations"] == []
    assert "Jazz" not in _tool_error(call, "confirm_observation", {"observation_id": bobs.id})
    assert "Jazz" not in _tool_error(call, "dismiss_observation", {"observation_id": bobs.id})
    assert [o.id for o in mem.observations("agent:bob")] == [bobs.id] and mem.preferences("agent:bob") == []


def _conversation(cid: str, *texts: str):
    from boundmem.models import Conversation, Turn

    return Conversation(id=cid, turns=tuple(Turn(role="user", text=t) for t in texts))
