"""The recall gate is the default of every entry point: HTTP, Client/AsyncClient, MCP and the proxy return (inject)
nothing for an unrelated request and the right preference for a related one; gate/min_score give raw top-k."""
from __future__ import annotations

import asyncio

import anyio
import openai
import pytest
from fastapi.testclient import TestClient

from boundmem import AsyncClient, Client
from boundmem.extract.keyword import KeywordExtractor
from boundmem.maintain.rules import RuleMaintainer
from boundmem.memory import Memory
from boundmem.models import Candidate
from boundmem.proxy.app import MEMORY_HEADER, create_proxy
from boundmem.service.app import create_app
from boundmem.store.sqlite import SQLiteStore
from boundmem.user_id import namespaced
from llm.fake_openai import FakeOpenAI, content

from .conftest import KEY_A, KEYS

PREFS = [("Dietary Preferences", "Vegan", "I'm vegan, so no meat or dairy for me."),
         ("Favorite Genres", "Jazz", "I love listening to jazz."),
         ("Preferred Temperature", "21 degree Celcius", "I like it at 21 degrees in the car."),
         ("Preferred Restaurant Type", "Casual dining", "Casual dining places are my thing.")]
UNRELATED = "Navigate to the central station."
RELATED = "Put on some music."


@pytest.fixture()
def gated(tmp_path, schema, minilm):
    """A memory on MiniLM (what the gate was trained with) where acme's alice holds four preferences."""
    mem = Memory(schema=schema, store=SQLiteStore(tmp_path / "g.db"), extractor=KeywordExtractor(),
                 maintainer=RuleMaintainer(), embedder=minilm)
    mem.apply([Candidate(path=schema.resolve(d).path, attribute=a, sentence=s) for d, a, s in PREFS],
              namespaced("acme", "alice"), "c1")
    yield mem
    mem.store.close()


def test_http_and_clients_default_to_the_gate(gated):
    with TestClient(create_app(gated, KEYS)) as tc:
        r = tc.post("/v1/users/alice/recall", json={"utterance": UNRELATED}, headers={"Authorization": f"Bearer {KEY_A}"})
        assert r.status_code == 200 and r.json()["hits"] == []
        c = Client("http://testserver", KEY_A, http_client=tc)
        assert c.recall("alice", UNRELATED).hits == []
        hits = c.recall("alice", RELATED).hits
        assert hits[0].preference.attribute == "Jazz" and hits[0].relevance and hits[0].why.startswith("p=")
        raw = c.recall("alice", UNRELATED, k=3, gate=False).hits
        assert len(raw) == 3 and all(h.relevance is None for h in raw)
        cut = c.recall("alice", UNRELATED, k=4, min_score=raw[1].score).hits
        assert [h.preference.id for h in cut] == [h.preference.id for h in raw[:2]]
        bad = tc.post("/v1/users/alice/recall", json={"utterance": RELATED, "min_score": 3},
                      headers={"Authorization": f"Bearer {KEY_A}"})
        assert bad.status_code == 422 and "min_score" in bad.text


def test_the_async_client_defaults_to_the_gate(gated):
    app = create_app(gated, KEYS)

    async def run():
        import httpx

        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as h:
            c = AsyncClient("http://testserver", KEY_A, http_client=h)
            return (await c.recall("alice", UNRELATED)).hits, (await c.recall("alice", UNRELATED, gate=False)).hits

    none, raw = asyncio.run(run())
    assert none == [] and len(raw) == 4


def test_mcp_recall_defaults_to_the_gate(gated):
    pytest.importorskip("mcp")
    from boundmem.service.mcp import Binding, build_server

    server = build_server(gated, Binding(tenant="acme", user="alice"))

    def call(args):
        r = anyio.run(server.call_tool, "recall", args)
        return getattr(r, "structured_content", None) or getattr(r, "structuredContent", None) or r[1]

    assert call({"utterance": UNRELATED})["preferences"] == []
    got = call({"utterance": RELATED})
    assert got["preferences"][0]["attribute"] == "Jazz" and got["why"][0].startswith("p=")
    assert len(call({"utterance": UNRELATED, "gate": False, "k": 2})["preferences"]) == 2
    assert len(call({"utterance": UNRELATED, "min_score": -1.0, "k": 3})["preferences"]) == 3


def test_the_proxy_injects_nothing_for_an_unrelated_request_and_says_so(gated):
    with FakeOpenAI() as upstream, TestClient(create_proxy(gated, KEYS, upstream.base_url)) as tc:
        sdk = openai.OpenAI(base_url="http://testserver/v1", api_key=KEY_A, http_client=tc, max_retries=0)
        upstream.push(content("Starting navigation."), content("Here is some jazz."))
        r = sdk.chat.completions.with_raw_response.create(model="m", user="alice", messages=[
            {"role": "system", "content": "You are a car assistant."}, {"role": "user", "content": UNRELATED}])
        assert r.headers["x-boundmem-recall"] == "none" and r.headers["x-boundmem-recalled"] == "0"
        sent = upstream.requests[0].messages
        assert sent[0]["content"] == "You are a car assistant." and len(sent) == 2
        assert MEMORY_HEADER not in str(sent) and "Vegan" not in str(sent) and "Jazz" not in str(sent)
        r = sdk.chat.completions.with_raw_response.create(model="m", user="alice", messages=[
            {"role": "user", "content": RELATED}])
        assert r.headers["x-boundmem-recall"] != "none" and int(r.headers["x-boundmem-recall"]) >= 1
        system = upstream.requests[1].messages[0]["content"]
        assert MEMORY_HEADER in system and "Jazz" in system and "Vegan" not in system


def test_the_proxy_without_the_gate_injects_raw_top_k(gated):
    with FakeOpenAI() as upstream, TestClient(create_proxy(gated, KEYS, upstream.base_url, k=2, gate=False)) as tc:
        sdk = openai.OpenAI(base_url="http://testserver/v1", api_key=KEY_A, http_client=tc, max_retries=0)
        upstream.push(content("ok"))
        r = sdk.chat.completions.with_raw_response.create(model="m", user="alice", messages=[
            {"role": "user", "content": UNRELATED}])
        assert r.headers["x-boundmem-recall"] == "2" and MEMORY_HEADER in str(upstream.requests[0].messages)
