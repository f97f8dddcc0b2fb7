"""A scripted OpenAI-compatible HTTP server for tests: real sockets, so the real `openai` SDK code runs.

Usage (any test; `tests/` is on sys.path through tests/conftest.py, so import it as `llm.fake_openai`)::

    from llm.fake_openai import FakeOpenAI, tool_call, content, raw, status, delay, embeddings

    with FakeOpenAI([tool_call("extract_user_preferences", {"points_of_interest": None}),
                     status(500), content("hello")]) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="k")   # or LLMClient(model, base_url=srv.base_url)
        ...
        srv.requests[0].json["messages"]      # what the SDK sent
        srv.requests[0].headers["authorization"]

The server listens on 127.0.0.1 on a random free port, in a daemon thread. Each POST (any path:
/v1/chat/completions, /v1/embeddings, ...) consumes the next entry of the script, in order. An entry is a
`Reply` (built by the helpers below) or a callable `f(request) -> Reply` for answers that depend on the
request. When the script is used up the server answers HTTP 418 with "fake server script exhausted" (not
retried by clients, so a test that makes more calls than it scripted fails loudly); `srv.unused` tells
how many entries were never consumed.

Reply helpers:
- `tool_call(name, args, content=None)`: an assistant message with one tool call; `args` is a dict
  (JSON-encoded for you) or a str sent verbatim (e.g. broken JSON). `tool_calls([(name, args), ...])` for several.
- `content(text)`: a plain assistant message, no tool call.
- `raw(body, status=200, content_type="application/json")`: any body, e.g. invalid JSON.
- `status(code, message=..., headers=None)`: an OpenAI-style error body with that HTTP status (429, 500, ...).
- `delay(seconds, then)`: sleep before sending `then` (to trigger client timeouts). The sleep ends early
  when the server stops, so tests never wait for it.
- `embeddings(vectors)`: an /v1/embeddings answer.
Every completion helper takes `prompt_tokens` / `completion_tokens` to script the usage block.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional, Sequence, Union

__all__ = ["FakeOpenAI", "Reply", "Request", "tool_call", "tool_calls", "content", "raw", "status", "delay",
           "embeddings"]


@dataclass
class Request:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def json(self) -> Any:
        return json.loads(self.body or b"null")

    @property
    def messages(self) -> list[dict]:
        return self.json.get("messages", [])

    def text(self) -> str:
        """All message contents joined: handy for `assert "..." in req.text()`."""
        return "\n".join(str(m.get("content") or "") for m in self.messages)

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.json.get("tools", [])]


@dataclass
class Reply:
    status: int = 200
    body: Union[bytes, Callable[[Request], bytes]] = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


Script = Sequence[Union[Reply, Callable[[Request], Reply]]]

_counter = iter(range(1, 1 << 62))


def _completion(message: dict, finish: str, prompt_tokens: int, completion_tokens: int) -> Callable[[Request], bytes]:
    def build(req: Request) -> bytes:
        n = next(_counter)
        try:
            model = req.json.get("model", "fake-model")
        except ValueError:
            model = "fake-model"
        return json.dumps({
            "id": f"chatcmpl-fake-{n}", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }).encode()

    return build


def tool_calls(calls: Sequence[tuple[str, Union[dict, str]]], content: Optional[str] = None, *,
               prompt_tokens: int = 10, completion_tokens: int = 5) -> Reply:
    tcs = [{"id": f"call_{i}", "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
           for i, (name, args) in enumerate(calls)]
    msg = {"role": "assistant", "content": content, "tool_calls": tcs}
    return Reply(body=_completion(msg, "tool_calls", prompt_tokens, completion_tokens))


def tool_call(name: str, args: Union[dict, str], content: Optional[str] = None, *,
              prompt_tokens: int = 10, completion_tokens: int = 5) -> Reply:
    return tool_calls([(name, args)], content, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


def content(text: str, *, prompt_tokens: int = 10, completion_tokens: int = 5) -> Reply:
    return Reply(body=_completion({"role": "assistant", "content": text}, "stop", prompt_tokens, completion_tokens))


def raw(body: Union[str, bytes], status: int = 200, content_type: str = "application/json") -> Reply:
    return Reply(status=status, body=body.encode() if isinstance(body, str) else body, content_type=content_type)


def status(code: int, message: str = "scripted error", headers: Optional[dict[str, str]] = None) -> Reply:
    body = json.dumps({"error": {"message": message, "type": "fake_error", "param": None, "code": str(code)}}).encode()
    return Reply(status=code, body=body, headers=dict(headers or {}))


def delay(seconds: float, then: Optional[Reply] = None) -> Reply:
    r = then or content("late")
    return Reply(status=r.status, body=r.body, content_type=r.content_type, headers=r.headers, delay=seconds)


def embeddings(vectors: Sequence[Sequence[float]], *, prompt_tokens: int = 3) -> Reply:
    def build(req: Request) -> bytes:
        return json.dumps({"object": "list", "model": req.json.get("model", "fake-embed"),
                           "data": [{"object": "embedding", "index": i, "embedding": list(map(float, v))}
                                    for i, v in enumerate(vectors)],
                           "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}}).encode()

    return Reply(body=build)


class FakeOpenAI:
    """Scripted server; use as a context manager (or call start()/stop())."""

    def __init__(self, script: Script = ()):
        self._script = list(script)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.requests: list[Request] = []
        self._server: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    # --- lifecycle --------------------------------------------------------------------------
    def start(self) -> "FakeOpenAI":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # keep test output clean
                pass

            def do_GET(self):
                self._answer()

            def do_POST(self):
                self._answer()

            def _answer(self):
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else b""
                req = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.time())
                reply = fake._next(req)
                if reply.delay and fake._stop.wait(reply.delay):
                    return
                data = reply.body(req) if callable(reply.body) else reply.body
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", reply.content_type)
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): expected in timeout tests

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- script -----------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def push(self, *replies: Union[Reply, Callable[[Request], Reply]]) -> None:
        """Append entries to the script while the server runs."""
        with self._lock:
            self._script.extend(replies)

    @property
    def unused(self) -> int:
        with self._lock:
            return len(self._script)

    def _next(self, req: Request) -> Reply:
        with self._lock:
            self.requests.append(req)
            entry = self._script.pop(0) if self._script else None
        if entry is None:
            return status(418, "fake server script exhausted")
        return entry(req) if callable(entry) and not isinstance(entry, Reply) else entry
