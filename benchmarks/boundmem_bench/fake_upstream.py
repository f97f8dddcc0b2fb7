"""An instant OpenAI-compatible model server for `bench perf`: every chat completion gets the same short reply.
Run as `python -m boundmem_bench.fake_upstream`; prints its port on the first line of stdout."""
from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLY = json.dumps({"id": "cmpl-bench", "object": "chat.completion", "created": 0, "model": "bench",
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Sure."}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True   # else headers and body as two packets meet delayed ACKs: 40 ms stalls

    def log_message(self, *a):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(REPLY)))
        self.end_headers()
        self.wfile.write(REPLY)


def main() -> None:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
