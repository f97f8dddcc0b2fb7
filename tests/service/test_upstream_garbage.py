"""An upstream that answers 200 with garbage (an embedding endpoint's HTML page was a 500 with
AttributeError, an LLM's undecodable bytes a 500 with UnicodeDecodeError): the documented 502 naming the upstream,
nothing stored, and the clients raise their UpstreamError branch."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from boundmem.embed.openai_compat import EmbeddingError, OpenAIEmbedder
from boundmem.errors import UpstreamError
from boundmem.llm.client import LLMClient
from boundmem.service.app import create_app
from llm.fake_openai import FakeOpenAI, raw

from .conftest import KEY_A, KEYS, auth, conversation
from .test_upstream import _memory

GARBAGE = {
    "an HTML page": (b"<html><body>502 Bad Gateway</body></html>", "text/html"),
    "undecodable bytes": (b"\x80\x81\x82\xff", "application/json"),
    "a UTF-16 mark and junk": (b"\xff\xfe\x00garbage", "application/json"),
    "JSON nested too deep": (b"[" * 5_000 + b"]" * 5_000, "application/json"),
    "JSON of another shape": (b'{"data": "x", "choices": [{"message": "x"}]}', "application/json"),
    "vectors of strings": (b'{"data": [{"index": 0, "embedding": "abc"}]}', "application/json"),
    "tool calls of strings": (b'{"choices": [{"message": {"content": null, "tool_calls": ["x"]}}]}', "application/json"),
}
WORDS = {"llm": "the extractor's model", "embedding": "the embedding endpoint"}   # the LLM's answer is invalid output


@pytest.mark.parametrize("garbage", GARBAGE)
@pytest.mark.parametrize("which", WORDS)
def test_garbage_from_an_upstream_is_a_502_naming_it_and_stores_nothing(tmp_path, schema, which, garbage):
    body, ctype = GARBAGE[garbage]
    with FakeOpenAI([raw(body, content_type=ctype) for _ in range(6)]) as fake:
        mem = _memory(which, fake.base_url, tmp_path, schema)
        try:
            with TestClient(create_app(mem, KEYS), raise_server_exceptions=False) as c:
                r = c.post("/v1/users/alice/conversations", headers=auth(KEY_A),
                           json=conversation("c1", "I love Italian food."))
            assert fake.requests, "the upstream was never asked"
            assert r.status_code == 502, (r.status_code, r.text)
            assert r.json()["upstream"] == WORDS[which], r.json()
            assert "127.0.0.1" not in r.text and "sk-test" not in r.text
            assert mem.store.users() == []
        finally:
            mem.store.close()


@pytest.mark.parametrize("garbage", GARBAGE)
def test_the_clients_raise_their_upstream_error_for_garbage(garbage):
    body, ctype = GARBAGE[garbage]
    with FakeOpenAI([raw(body, content_type=ctype), raw(body, content_type=ctype)]) as fake:
        with pytest.raises(EmbeddingError, match="not an embeddings response|vectors|sizes"):
            OpenAIEmbedder(base_url=fake.base_url, max_retries=0).embed(["hi"])
        with pytest.raises(UpstreamError):
            LLMClient("m", base_url=fake.base_url, max_retries=0).call_tool(
                [{"role": "user", "content": "hi"}], {"name": "t", "parameters": {"type": "object"}})
