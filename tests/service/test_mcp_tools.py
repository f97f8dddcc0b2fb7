"""The MCP server's consent and erasure tools (opt_out, opt_in, export, forget), its version, its frame
checker on hostile input and token revocation across processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest

pytest.importorskip("mcp", reason="needs the optional 'mcp' package (requirements-dev.txt)")

from boundmem import __version__  # noqa: E402
from boundmem.service.mcp import Binding, ToolError, build_server, check_frame  # noqa: E402


def call(server, tool: str, args: dict | None = None):
    return anyio.run(server.call_tool, tool, args or {})


def structured(result) -> dict:
    return getattr(result, "structured_content", None) or getattr(result, "structuredContent")


@pytest.fixture()
def server(memory):
    return build_server(memory, Binding(tenant="agent", user="alice"))


def test_opt_out_opt_in_export_and_forget_act_on_the_bound_user_only(server, memory):
    memory.add(_conv("c0", "I love Italian food. Please play some Jazz."), "agent:alice")
    memory.add(_conv("c1", "I love Italian food."), "agent:bob")
    out = structured(call(server, "opt_out", {"category": "Restaurant"}))
    assert out["category"] == "points_of_interest/restaurant" and [p["attribute"] for p in out["purged"]] == ["Italian"]
    assert memory.store.opt_outs("agent:alice") == ["points_of_interest/restaurant"]
    exported = structured(call(server, "export"))
    assert exported["user"] == "alice" and exported["opt_outs"] == ["points_of_interest/restaurant"]
    assert "agent:alice" not in json.dumps(exported)   # the tenant namespace never reaches the agent
    assert {p["attribute"] for p in exported["preferences"]} == {"Jazz"}
    assert structured(call(server, "opt_in", {"category": "points_of_interest/restaurant"}))["opted_in"] is True
    assert structured(call(server, "opt_in", {"category": "Restaurant"}))["opted_in"] is False
    with pytest.raises(ToolError, match="No Such Category"):   # in process; a client gets an isError result
        call(server, "opt_out", {"category": "No Such Category"})
    assert structured(call(server, "forget"))["erased"] == 1
    assert memory.preferences("agent:alice") == [] and not memory.store.has_user("agent:alice")
    assert [p.attribute for p in memory.preferences("agent:bob")] == ["Italian"]


def test_no_tool_takes_a_user_and_the_server_has_a_version(server):
    tools = anyio.run(server.list_tools)
    assert {t.name for t in tools} >= {"add", "recall", "list_preferences", "delete_preference", "opt_out", "opt_in",
                                       "export", "forget"}
    assert all("user" not in t.input_schema["properties"] for t in tools)
    assert set(server.boundmem_arguments) == {t.name for t in tools}
    low = getattr(server, "_lowlevel_server", None) or getattr(server, "_mcp_server")
    assert low.version == __version__


def test_the_version_is_reported_at_initialize(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "boundmem.cli", "serve", "mcp", "--db", str(tmp_path / "m.db"),
                           "--user", "alice", "--embedder", "hash"], capture_output=True, timeout=120,
                          input=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                              "protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "t", "version": "1"}}}).encode() + b"\n")
    reply = json.loads(proc.stdout.splitlines()[0])
    assert reply["result"]["serverInfo"] == {**reply["result"]["serverInfo"], "name": "boundmem", "version": __version__}


@pytest.mark.parametrize("frame", [b"[" * 1000 + b"]" * 1000, b"[" * 100_000, b'{"a": ' * 5000,
                                   b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": ' + b"[" * 65
                                   + b"]" * 65 + b"}}"])
def test_no_frame_makes_the_checker_raise(frame):
    """The issue's case: `[` x 1000 + `]` x 1000 raised RecursionError and the server exited."""
    msg, err = check_frame(frame)
    assert msg is None and err["error"]["code"] == -32700 and "max_json_depth" in err["error"]["message"]


def test_a_frame_the_checker_cannot_read_is_an_internal_error_not_a_crash(monkeypatch):
    import boundmem.service.mcp as mcp_mod

    def broken(line, arguments):
        raise RuntimeError("bug")

    monkeypatch.setattr(mcp_mod, "_check_frame", broken)
    msg, err = check_frame(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}')
    assert msg is None and err["error"]["code"] == -32603


def test_a_revocation_reaches_other_processes_through_the_token_state_file(tmp_path):
    """An API server revokes, an MCP server in another process with the same secret and state file refuses; with
    no state file the MCP process cannot know (README says so, and `serve mcp --token` warns)."""
    secret, state = tmp_path / "secret", tmp_path / "tokens.db"
    secret.write_bytes(os.urandom(40))
    code = ("import sys; from boundmem.service.tokens import *; from pathlib import Path; "
            "i = TokenIssuer(load_secret(sys.argv[1]), Generations(sys.argv[2]) if sys.argv[2] else None); "
            "i.verify(sys.argv[3]); print('accepted')")

    def other_process(token: str, with_state: bool) -> str:
        r = subprocess.run([sys.executable, "-c", code, str(secret), str(state) if with_state else "", token],
                           capture_output=True, text=True, timeout=60)
        return "accepted" if r.returncode == 0 else r.stderr.strip().splitlines()[-1]

    from boundmem.service.tokens import Generations, TokenIssuer, load_secret

    api = TokenIssuer(load_secret(secret), Generations(state))
    token, _ = api.mint("acme", "alice")
    assert other_process(token, True) == "accepted"
    api.revoke("acme", "alice")
    assert "revoked" in other_process(token, True)
    assert other_process(token, False) == "accepted"   # the documented gap without a state file


def test_serve_mcp_with_a_token_but_no_state_file_warns_that_revocations_are_not_seen(tmp_path):
    from boundmem.service.tokens import TokenIssuer

    secret = tmp_path / "secret"
    secret.write_bytes(os.urandom(40))
    token, _ = TokenIssuer(secret.read_bytes()).mint("acme", "alice")
    proc = subprocess.run([sys.executable, "-m", "boundmem.cli", "serve", "mcp", "--db", str(tmp_path / "m.db"),
                           "--token", token, "--token-secret-file", str(secret), "--embedder", "hash"],
                          capture_output=True, text=True, timeout=120, input="")
    assert "--token-state" in proc.stderr and "revoc" in proc.stderr


def _conv(cid: str, text: str):
    from boundmem.models import Conversation, Turn

    return Conversation(id=cid, turns=(Turn(role="user", text=text),))
