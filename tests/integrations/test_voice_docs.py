"""The voice guide's examples (docs/guides/voice.md), each Python block run as written: the
Pipecat program against a scripted OpenAI-compatible server on the loopback (the user's own LLM, played here), the
LiveKit agent file loaded as a module (its worker is started only as a script), and the LiveKit hook shown on its own.
All three run in one process, one after the other, so that the interpreter and the models start once."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("pipecat")
pytest.importorskip("livekit.agents")

from boundmem.retrieve.format import DEFAULT  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guides" / "voice.md"
REPLY = ["Here is some rock", " for you."]


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


class _Model(BaseHTTPRequestHandler):
    """A streaming chat-completions endpoint: records the messages of each request, answers REPLY in chunks."""
    protocol_version = "HTTP/1.1"
    seen: list = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.seen.append(json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))["messages"])
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        for delta in ({"role": "assistant", "content": ""}, *({"content": c} for c in REPLY)):
            chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "local",
                     "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.close_connection = True


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """Every block of the page run in one process, one after the other, each in a folder of its own (one interpreter
    start for the three); the model server's requests and each block's output."""
    _Model.seen = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    where = tmp_path_factory.mktemp("voice-docs")
    for n, code in enumerate(blocks()):
        (where / f"example{n}").mkdir()
        (where / f"example{n}" / "example.py").write_text(code, encoding="utf-8")
    try:
        done = subprocess.run([sys.executable, "-c", RUNNER, str(where), str(len(blocks()))], capture_output=True,
                              text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1",
                                                           "OPENAI_BASE_URL": f"http://127.0.0.1:{srv.server_address[1]}/v1"})
    finally:
        srv.shutdown()
        thread.join()
    assert done.returncode == 0, done.stderr[-3000:]
    return _Model.seen, done.stdout.split(SEPARATOR + "\n")


SEPARATOR = "=== next example ==="
# each block as a script would run it, except that the agent file's worker (`if __name__ == "__main__"`) is not started
RUNNER = f"""
import os, runpy, sys
root, count = sys.argv[1], int(sys.argv[2])
for n in range(count):
    os.chdir(os.path.join(root, f"example{{n}}"))
    runpy.run_path("example.py", run_name="voice_example")
    print({SEPARATOR!r}, flush=True)
"""


def test_the_page_has_the_three_examples():
    found = blocks()
    assert len(found) == 3
    assert "BoundmemMemoryService" in found[0] and "MemoryAgent" in found[1] and "on_user_turn_completed" in found[2]


def test_the_pipecat_program_runs_and_the_model_gets_one_memory_message(ran):
    seen, outs = ran
    out = outs[0]
    assert out.count("assistant: " + "".join(REPLY)) == 2, out
    assert "turns 2, with memory 1, recall ready early 2, late 0, exchanges queued 2" in out, out
    assert len(seen) == 2
    first = [m for m in seen[0] if DEFAULT.is_memory(m["content"])]
    assert len(first) == 1 and first[0]["role"] == "developer" and "Dislikes: Jazz" in first[0]["content"]
    assert seen[0][0] == {"role": "system", "content": "You are a car assistant."}
    assert not [m for m in seen[1] if DEFAULT.is_memory(m["content"])]   # "Thanks!": nothing that helps, none left


def test_the_livekit_agent_file_loads_and_the_hook_shows_the_memory(ran):
    _, outs = ran
    assert outs[1] == ""                     # the agent file: definitions only, its worker starts as a script
    out = outs[2]
    items, late = out.strip().split("\n\n")[:-1], out.strip().splitlines()[-1]
    assert late == "late: 0", out
    assert items[0] == "system: You are a car assistant." and items[-1] == "user: Find me a route to the office.", out
    assert len(items) == 3 and items[1].startswith("system: ") and DEFAULT.is_memory(items[1][len("system: "):]), out
    assert '"memory": "Avoids: Highways"' in items[1] and '"they_said": "I always avoid highways."' in items[1]
