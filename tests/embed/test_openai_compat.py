"""OpenAIEmbedder against a real local HTTP server speaking the /v1/embeddings protocol (no network)."""
from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from boundmem.embed import Embedder
from boundmem.embed.openai_compat import EmbeddingError, OpenAIEmbedder

DIM = 6


def raw_vector(text: str) -> list[float]:
    """Deterministic, deliberately NOT unit-norm, so normalisation is observable."""
    h = hashlib.sha256(text.encode()).digest()
    return [(b - 128) / 8.0 for b in h[:DIM]]


class Server:
    """Records every request; `mode` scripts the next responses."""

    def __init__(self):
        self.requests: list[dict] = []
        self.mode = "ok"
        self.headers: list[dict] = []
        srv = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                srv.requests.append(body)
                srv.headers.append({k.lower(): v for k, v in self.headers.items()})
                if self.path != "/v1/embeddings":
                    return self._send(404, {"error": {"message": "no route"}})
                texts = body["input"]
                data = [{"object": "embedding", "index": i, "embedding": raw_vector(t)} for i, t in enumerate(texts)]
                data.reverse()  # servers need not answer in order; `index` says where each belongs
                if srv.mode == "short":
                    data = data[1:]
                elif srv.mode == "zero":
                    data[0]["embedding"] = [0.0] * DIM
                elif srv.mode == "dim":
                    data[0]["embedding"] = data[0]["embedding"] + [1.0]
                elif srv.mode == "error":
                    return self._send(500, {"error": {"message": "boom", "type": "server_error"}})
                self._send(200, {"object": "list", "data": data, "model": body["model"],
                                 "usage": {"prompt_tokens": 1, "total_tokens": 1}})

            def _send(self, code, obj):
                raw = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def server():
    s = Server()
    yield s
    s.close()


def test_vectors_are_unit_norm_in_input_order_and_batched(server):
    e = OpenAIEmbedder(model="test-embed", base_url=server.url, api_key="sk-test", batch_size=2, max_retries=0)
    texts = ["alpha", "beta", "gamma", "alpha", "delta"]
    m = e.embed(texts)
    assert isinstance(e, Embedder)
    assert m.shape == (5, DIM) and m.dtype == np.float32
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-6)
    for t, row in zip(texts, m):
        want = np.array(raw_vector(t), np.float32)
        assert np.allclose(row, want / np.linalg.norm(want), atol=1e-6)
    # 4 distinct texts in batches of 2; the duplicate is not sent again
    assert [r["input"] for r in server.requests] == [["alpha", "beta"], ["gamma", "delta"]]
    assert all(r["model"] == "test-embed" and r["encoding_format"] == "float" for r in server.requests)
    assert server.headers[0].get("authorization") == "Bearer sk-test"
    assert e.dim == DIM and e.name == "openai:test-embed"
    e.embed(["beta"])
    assert len(server.requests) == 2  # cached


def test_dim_of_unknown_model_comes_from_the_server(server):
    e = OpenAIEmbedder(model="test-embed", base_url=server.url, max_retries=0)
    assert e.dim == DIM
    assert len(server.requests) == 1


def test_known_model_dim_needs_no_request_but_the_server_is_believed(server):
    e = OpenAIEmbedder(model="text-embedding-3-small", base_url=server.url, max_retries=0)
    assert e.dim == 1536 and not server.requests
    e.embed(["x"])
    assert e.dim == DIM


def test_from_env(server, monkeypatch):
    from boundmem.config import Settings
    from boundmem.embed.registry import make_embedder

    monkeypatch.setenv("BOUNDMEM_EMBED_MODEL", "env-model")
    monkeypatch.setenv("BOUNDMEM_LLM_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    e = make_embedder("openai", Settings.from_env())
    e.embed(["hello"])
    assert server.requests[0]["model"] == "env-model"
    assert server.headers[0].get("authorization") == "Bearer sk-env"


@pytest.mark.parametrize("mode", ["short", "zero", "dim"])
def test_malformed_responses_raise_clear_errors(server, mode):
    e = OpenAIEmbedder(model="test-embed", base_url=server.url, max_retries=0)
    server.mode = mode
    with pytest.raises(EmbeddingError):
        e.embed(["one", "two"])
    assert not e._cache  # nothing half-cached from a bad response


def test_server_error_is_an_embedding_error_caused_by_the_sdk_error(server):
    import openai

    e = OpenAIEmbedder(model="test-embed", base_url=server.url, max_retries=0)
    server.mode = "error"
    with pytest.raises(EmbeddingError, match="test-embed") as err:
        e.embed(["one"])
    assert isinstance(err.value.__cause__, openai.APIStatusError)
