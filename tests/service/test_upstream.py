"""An upstream that fails during ingestion (the extractor's LLM endpoint, the embedding endpoint), end to end: the
API served by uvicorn on a real socket, the upstream a scripted OpenAI-compatible server (tests/llm/fake_openai.py)
that times out or answers 500. The answer is a 502 in the one error shape, naming which upstream failed and not
its address, and nothing is stored; `boundmem.Client` raises it as an `UpstreamError`."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import httpx
import pytest

from boundmem import Client, UpstreamError
from boundmem.embed import HashEmbedder
from boundmem.embed.openai_compat import OpenAIEmbedder
from boundmem.extract.keyword import KeywordExtractor
from boundmem.extract.llm import LLMExtractor
from boundmem.llm.client import LLMClient
from boundmem.maintain.rules import RuleMaintainer
from boundmem.memory import Memory
from boundmem.service.app import create_app
from boundmem.store.sqlite import SQLiteStore
from llm.fake_openai import FakeOpenAI, delay, status

from .conftest import KEY_A, KEYS, auth, conversation


@contextmanager
def serving(app):
    """The app on a free port of 127.0.0.1, in a thread, for as long as the block runs."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the API server did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


FAILURES = {"timeout": lambda: delay(30), "http 500": lambda: status(500)}
UPSTREAMS = {  # which part talks to the fake server; the code and the words the API answers with
    "llm": ("llm_unavailable", "the language model endpoint"),
    "embedding": ("embedding_unavailable", "the embedding endpoint"),
}


def _memory(which: str, base_url: str, tmp_path, schema) -> Memory:
    store = SQLiteStore(tmp_path / "up.db")
    if which == "llm":
        llm = LLMClient(model="test-model", base_url=base_url, api_key="sk-test-secret-0123456789", timeout=0.5,
                        max_retries=1, backoff_base=0.01, backoff_max=0.02)
        return Memory(schema=schema, store=store, extractor=LLMExtractor(llm), maintainer=RuleMaintainer(),
                      embedder=HashEmbedder())
    embedder = OpenAIEmbedder(model="text-embedding-3-small", base_url=base_url, api_key="sk-test-secret-0123456789",
                              timeout=0.5, max_retries=0)
    return Memory(schema=schema, store=store, extractor=KeywordExtractor(), maintainer=RuleMaintainer(),
                  embedder=embedder)


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("which", UPSTREAMS)
def test_an_upstream_failing_during_ingest_is_a_502_naming_it_and_stores_nothing(tmp_path, schema, which, failure):
    code, words = UPSTREAMS[which]
    with FakeOpenAI([FAILURES[failure]() for _ in range(4)]) as fake:
        mem = _memory(which, fake.base_url, tmp_path, schema)
        try:
            with serving(create_app(mem, KEYS)) as url:
                r = httpx.post(f"{url}/v1/users/alice/conversations", headers=auth(KEY_A), timeout=30,
                               json=conversation("c1", "I love Italian food."))
                with pytest.raises(UpstreamError) as err, Client(url, KEY_A, timeout=30) as client:
                    client.add("alice", conversation("c2", "I love Mexican food."))
            assert fake.requests, "the upstream was never asked"
            body = r.json()
            assert r.status_code == 502, (r.status_code, body)
            assert body["code"] == code and body["upstream"] == words and words in body["message"]
            assert body["detail"] == body["message"] and "nothing was stored" in body["message"]
            assert "127.0.0.1" not in r.text and "sk-test" not in r.text
            assert err.value.status == 502 and err.value.code == code
            assert mem.store.users() == []
        finally:
            mem.store.close()
