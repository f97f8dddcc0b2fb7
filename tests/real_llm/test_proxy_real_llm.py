"""`boundmem proxy` in front of the real local model (0.5B, llama.cpp): the openai SDK's answers come through,
streaming and not, with the user's memory in the system message, and the exchange is learnt afterwards."""
from __future__ import annotations


import openai
import pytest
from fastapi.testclient import TestClient

from boundmem.memory import Memory
from boundmem.models import Conversation, Turn
from boundmem.proxy.app import create_proxy
from boundmem.user_id import namespaced

pytestmark = pytest.mark.real_llm

KEY = "real-llm-proxy-key-0123456789"


@pytest.fixture()
def mem(schema, sqlite_store, hash_embedder):
    from boundmem.extract.keyword import KeywordExtractor
    from boundmem.maintain.rules import RuleMaintainer

    m = Memory(schema=schema, store=sqlite_store, extractor=KeywordExtractor(), maintainer=RuleMaintainer(),
               embedder=hash_embedder)
    yield m
    m.close_jobs()


def test_proxy_in_front_of_the_real_model(real_endpoint, mem):
    url, model = real_endpoint
    alice = namespaced("acme", "alice")
    mem.add(Conversation(id="c0", turns=(Turn(role="user", text="I always go for Italian food."),)), alice)
    with TestClient(create_proxy(mem, {KEY: "acme"}, url, timeout=600)) as tc:
        client = openai.OpenAI(base_url="http://testserver/v1", api_key=KEY, http_client=tc, max_retries=0,
                               timeout=600)
        msgs = [{"role": "user", "content": "Where should we eat tonight? I also love Mexican food."}]
        raw = client.chat.completions.with_raw_response.create(model=model, user="alice", messages=msgs,
                                                               max_tokens=40)
        assert raw.headers["x-boundmem-recalled"] != "0"          # the memory went into the system message
        r = raw.parse()
        assert r.choices[0].message.content.strip()
        # streaming passes through to the end (a busy llama.cpp server may send only keep-alive pings: not asserted)
        stream = client.chat.completions.create(model=model, user="alice", messages=msgs, max_tokens=20, stream=True)
        assert isinstance("".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices), str)
        jobs = mem.jobs.of_user(alice)   # queued before the response closed (the stream's only if it finished)
        assert jobs and all(mem.wait(j.id, timeout=None).finished for j in jobs)
        assert any(p.attribute == "Mexican" for p in mem.preferences(alice))
