"""Malformed JSON-RPC frames against the real `boundmem serve mcp` process: every one gets an error reply (a client
that waits for an answer must never hang), the server stays up, and the tools apply the API's limits and user-id
rule. Raw bytes on the pipe, no MCP client library in between (it would refuse to send most of these)."""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import pytest

pytest.importorskip("mcp", reason="needs the optional 'mcp' package (requirements-dev.txt)")

MAX_FRAME = 20_000


class RawClient:
    def __init__(self, proc: subprocess.Popen):
        self.proc, self.buf = proc, b""

    def send(self, data: bytes) -> None:
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def send_obj(self, obj) -> None:
        self.send(json.dumps(obj).encode())

    def recv(self, timeout: float = 20.0) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise AssertionError(f"no reply within {timeout} s (server {'exited' if self.proc.poll() is not None else 'silent'})")
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    raise AssertionError("server closed stdout")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, id_, method, params=None) -> dict:
        self.send_obj({"jsonrpc": "2.0", "id": id_, "method": method, **({"params": params} if params is not None else {})})
        return self.recv()


@pytest.fixture()
def raw(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "boundmem.cli", "serve", "mcp", "--db", str(tmp_path / "m.db"),
                             "--tenant", "agent", "--user", "alice", "--max-frame-bytes", str(MAX_FRAME),
                             "--max-turns", "5", "--max-turn-chars", "300", "--max-total-chars", "1000",
                             "--extractor", "keyword", "--maintainer", "rules", "--embedder", "hash"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    c = RawClient(proc)
    init = c.call(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "raw", "version": "1"}})
    assert "result" in init, init
    c.send_obj({"jsonrpc": "2.0", "method": "notifications/initialized"})
    yield c
    if not proc.stdin.closed:
        proc.stdin.close()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _req(id_, method, params=None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, **({"params": params} if params is not None else {})}).encode()


# (kind, raw frame, expected error code, expected id in the reply)
MALFORMED = [
    ("invalid JSON", b'{"jsonrpc": "2.0", "id": 1, "method": ', -32700, None),
    ("invalid UTF-8", b'{"jsonrpc": "2.0", "id": 2, "method": "ping\xff\xfe"}', -32700, None),
    ("not an object", b"42", -32600, None),
    ("batch", json.dumps([json.loads(_req(3, "ping")), json.loads(_req(4, "tools/list"))]).encode(), -32600, None),
    ("empty batch", b"[]", -32600, None),
    ("missing method", json.dumps({"jsonrpc": "2.0", "id": 5}).encode(), -32600, 5),
    ("method not a string", json.dumps({"jsonrpc": "2.0", "id": 6, "method": 7}).encode(), -32600, 6),
    ("wrong jsonrpc version", json.dumps({"jsonrpc": "1.0", "id": 8, "method": "ping"}).encode(), -32600, 8),
    ("id of a wrong type", json.dumps({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}).encode(), -32600, None),
    ("params not an object", _req(9, "tools/list", [1, 2]), -32602, 9),
    ("tools/call name not a string", _req(10, "tools/call", {"name": 5, "arguments": {}}), -32602, 10),
    ("tools/call arguments not an object", _req(11, "tools/call", {"name": "recall", "arguments": ["x"]}), -32602, 11),
    ("unknown method", _req(12, "memory/dump_everything"), -32601, 12),
    ("request without an id", json.dumps({"jsonrpc": "2.0", "method": "tools/list"}).encode(), -32600, None),
    ("deeply nested JSON", b"[" * 1000 + b"]" * 1000, -32700, None),
    ("very deeply nested JSON", b"[" * 19_000, -32700, None),
    ("deep params", _req(14, "tools/call", {"name": "recall", "arguments": {"utterance": "x", "k": 1}})[:-1]
     + b', "x": ' + b"[" * 100 + b"]" * 100 + b"}", -32700, None),
    ("oversize frame", _req(13, "tools/call", {"name": "recall", "arguments": {"utterance": "x" * (3 * MAX_FRAME)}}),
     -32000, None),
]


def test_every_malformed_frame_gets_a_json_rpc_error_and_the_server_stays_up(raw):
    for n, (kind, frame, code, id_) in enumerate(MALFORMED):
        raw.send(frame)
        reply = raw.recv()
        assert reply.get("jsonrpc") == "2.0" and "error" in reply, (kind, reply)
        assert reply["error"]["code"] == code and reply["id"] == id_, (kind, reply)
        assert reply["error"]["message"], kind
        # still serving, and in step: the next request's reply is the next line
        assert raw.call(f"ping-{n}", "ping") == {"jsonrpc": "2.0", "id": f"ping-{n}", "result": {}}, kind


def test_malformed_notifications_are_dropped_without_a_reply(raw):
    """JSON-RPC never answers a notification, however broken; the next reply must be the ping's."""
    raw.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": [1]}).encode())
    raw.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/made_up"}).encode())
    assert raw.call(99, "ping") == {"jsonrpc": "2.0", "id": 99, "result": {}}


def test_a_frame_just_under_the_limit_is_served(raw):
    r = raw.call(20, "tools/call", {"name": "recall", "arguments": {"utterance": "Italian food " + "y" * 250}})
    assert "result" in r and not r["result"].get("isError"), r


def _tool_error(reply) -> str:
    assert "result" in reply and reply["result"].get("isError") is True, reply
    return reply["result"]["content"][0]["text"]


def test_tools_apply_the_content_limits_and_the_user_id_rule(raw):
    assert "max_turns=5" in _tool_error(raw.call(30, "tools/call", {"name": "add", "arguments": {"user_messages": ["I love Italian food."] * 6}}))
    assert "max_turn_chars=300" in _tool_error(raw.call(31, "tools/call", {"name": "add", "arguments": {"user_messages": ["a" * 301]}}))
    assert "max_total_chars=1000" in _tool_error(raw.call(32, "tools/call", {"name": "add", "arguments": {"user_messages": ["a" * 300] * 4}}))
    assert "no tool takes a user id" in _tool_error(raw.call(33, "tools/call", {"name": "recall", "arguments": {"user": "alice\n", "utterance": "Italian"}}))
    assert "does not take 'user'" in _tool_error(raw.call(34, "tools/call", {"name": "list_preferences", "arguments": {"user": "bob"}}))
    assert "does not take 'limit'" in _tool_error(raw.call(38, "tools/call", {"name": "recall", "arguments": {"utterance": "x", "limit": 3}}))
    _tool_error(raw.call(35, "tools/call", {"name": "recall", "arguments": {"utterance": "Italian", "k": "many"}}))
    _tool_error(raw.call(36, "tools/call", {"name": "no_such_tool", "arguments": {}}))
    ok = raw.call(37, "tools/call", {"name": "add", "arguments": {"user_messages": ["I love Italian food."]}})
    assert not ok["result"].get("isError"), ok


def test_requests_sent_just_before_the_client_closes_its_side_are_still_answered(raw):
    """A client that writes its last request and closes stdin still gets the answer (the library alone would
    cancel it at end of input), then the server exits cleanly."""
    raw.send(_req(50, "tools/call", {"name": "recall", "arguments": {"utterance": "Italian food"}}))
    raw.send(_req(51, "tools/list"))
    raw.proc.stdin.close()
    got = {raw.recv()["id"], raw.recv()["id"]}
    assert got == {50, 51}
    assert raw.proc.wait(30) == 0
