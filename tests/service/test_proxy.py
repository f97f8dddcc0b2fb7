"""`boundmem proxy`: the real `openai` SDK as the client, the scripted server in tests/llm as the upstream model."""
from __future__ import annotations

import json

import openai
import pytest
from fastapi.testclient import TestClient

from boundmem.models import Conversation, Turn
from boundmem.proxy.app import MEMORY_HEADER, create_proxy
from boundmem.user_id import namespaced
from llm.fake_openai import FakeOpenAI, content, raw, status

from .conftest import KEY_A, KEYS

UPSTREAM_KEY = "sk-upstream-secret-0123456789"


def conv(cid: str, text: str) -> Conversation:
    return Conversation(id=cid, turns=(Turn(role="user", text=text),))


def sse(*pieces: str) -> bytes:
    events = [{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": p}, "finish_reason": None}]}
              for p in pieces]
    events.append({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


@pytest.fixture()
def upstream():
    with FakeOpenAI() as srv:
        yield srv


@pytest.fixture()
def proxy(memory, upstream):
    # the hash embedder's memory: the gate would pass nothing, so these tests of injection see raw top-k
    app = create_proxy(memory, KEYS, upstream.base_url, upstream_key=UPSTREAM_KEY, gate=False)
    with TestClient(app) as tc:
        yield tc


def sdk(tc: TestClient, key: str = KEY_A) -> openai.OpenAI:
    return openai.OpenAI(base_url="http://testserver/v1", api_key=key, http_client=tc, max_retries=0)


def learnt(memory, user: str) -> list:
    """Wait for the exchange's job itself, however long the worker (at nice 10 on a loaded box) takes. The proxy
    queues it before its response ends, and TestClient's response closes only once the app, its background task
    included, has finished: so when the SDK call returns the job is in the queue, or the test fails here."""
    jobs = memory.jobs.of_user(user)
    assert jobs, "the exchange was not queued"
    return [memory.wait(j.id, timeout=None) for j in jobs]


def test_recall_goes_into_the_system_message_and_the_exchange_is_learnt(proxy, upstream, memory):
    alice = namespaced("acme", "alice")
    memory.add(conv("c0", "I always go for Italian food."), alice)
    upstream.push(content("How about Trattoria Roma?"))
    r = sdk(proxy).chat.completions.create(model="m", user="alice", messages=[
        {"role": "system", "content": "You are a car assistant."},
        {"role": "user", "content": "Where should we eat? I also love Mexican food, always have."}])
    assert r.choices[0].message.content == "How about Trattoria Roma?"
    sent = upstream.requests[0]
    system = sent.messages[0]["content"]
    assert system.startswith("You are a car assistant.") and MEMORY_HEADER in system and "Italian" in system
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"     # never the caller's key
    assert KEY_A not in json.dumps(sent.headers)
    assert len(sent.messages) == 2
    # after the reply, the exchange is queued and applied by the proxy's worker
    assert [j.status for j in learnt(memory, alice)] == ["done"]
    assert any(p.attribute == "Mexican" for p in memory.preferences(alice))
    assert memory.jobs.pending() == 0


def test_streaming_passes_chunks_through_and_learns_the_finished_exchange(proxy, upstream, memory):
    alice = namespaced("acme", "alice")
    memory.add(conv("c0", "I always go for Italian food."), alice)
    upstream.push(raw(sse("Try ", "the ", "pizzeria."), content_type="text/event-stream"))
    stream = sdk(proxy).chat.completions.create(model="m", user="alice", stream=True, messages=[
        {"role": "user", "content": "Any ideas for dinner? Mexican is my favourite cuisine."}])
    text = "".join(ch.choices[0].delta.content or "" for ch in stream if ch.choices)
    assert text == "Try the pizzeria."
    sent = upstream.requests[0]
    assert sent.messages[0]["role"] == "system" and "Italian" in sent.messages[0]["content"]
    assert sent.json["stream"] is True
    assert [j.status for j in learnt(memory, alice)] == ["done"]
    assert any(p.attribute == "Mexican" for p in memory.preferences(alice))


def test_who_the_user_is(proxy, upstream):
    client = sdk(proxy)
    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.AuthenticationError):
        sdk(proxy, key="wrong-key-0123456789abcdef").chat.completions.create(model="m", user="alice", messages=msgs)
    with pytest.raises(openai.BadRequestError, match="name the user"):
        client.chat.completions.create(model="m", messages=msgs)
    with pytest.raises(openai.BadRequestError, match="invalid user id"):
        client.chat.completions.create(model="m", user="alice\n", messages=msgs)
    upstream.push(content("hello"), content("hello again"))
    # the header names the user too
    r = client.chat.completions.create(model="m", messages=msgs, extra_headers={"X-Boundmem-User": "alice"})
    assert r.choices[0].message.content == "hello"
    assert len(upstream.requests) == 1


def test_a_user_token_acts_only_for_its_user(memory, upstream):
    from boundmem.service.tokens import TokenIssuer

    issuer = TokenIssuer()
    token, _ = issuer.mint("acme", "bob")
    with TestClient(create_proxy(memory, KEYS, upstream.base_url, tokens=issuer)) as tc:
        upstream.push(content("hi bob"))
        client = sdk(tc, key=token)
        assert client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}]
                                              ).choices[0].message.content == "hi bob"
        with pytest.raises(openai.PermissionDeniedError):
            client.chat.completions.create(model="m", user="alice", messages=[{"role": "user", "content": "hi"}])


def test_opt_outs_hold_on_recall_and_on_learning(proxy, upstream, memory):
    alice = namespaced("acme", "alice")
    memory.add(conv("c0", "I always go for Italian food."), alice)
    memory.opt_out(alice, "Restaurant")
    upstream.push(content("ok"))
    sdk(proxy).chat.completions.create(model="m", user="alice", messages=[
        {"role": "user", "content": "Where to eat? I love Mexican food."}])
    assert all("Italian" not in m["content"] for m in upstream.requests[0].messages)
    assert [j.status for j in learnt(memory, alice)] == ["done"]
    assert memory.preferences(alice) == []


def test_upstream_errors_pass_through_and_a_dead_upstream_is_502(proxy, upstream, memory):
    upstream.push(status(429, "slow down"))
    with pytest.raises(openai.RateLimitError):
        sdk(proxy).chat.completions.create(model="m", user="alice", messages=[{"role": "user", "content": "hi"}])
    with TestClient(create_proxy(memory, KEYS, "http://127.0.0.1:9/v1")) as dead:   # nothing listens there
        with pytest.raises(openai.InternalServerError, match="upstream"):
            sdk(dead).chat.completions.create(model="m", user="alice", messages=[{"role": "user", "content": "hi"}])
    # nothing queued from failed exchanges (not merely "nothing pending": a queued job may already have run)
    assert memory.jobs.of_user(namespaced("acme", "alice")) == [] and memory.jobs.pending() == 0


def test_a_failing_recall_never_breaks_the_reply(proxy, upstream, memory, monkeypatch):
    def broken(*a, **kw):
        raise RuntimeError("store on fire")

    monkeypatch.setattr(memory, "recall", broken)
    upstream.push(content("still here"))
    r = sdk(proxy).chat.completions.create(model="m", user="alice", messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content == "still here"
    assert upstream.requests[0].messages == [{"role": "user", "content": "hi"}]


def test_recall_time_is_reported(proxy, upstream):
    upstream.push(content("x"))
    raw_resp = sdk(proxy).chat.completions.with_raw_response.create(
        model="m", user="alice", messages=[{"role": "user", "content": "hi"}])
    assert float(raw_resp.headers["x-boundmem-recall-ms"]) >= 0
    assert raw_resp.headers["x-boundmem-recalled"] == "0"


def test_the_memory_block_words_a_dislike_as_one(memory):
    """The upstream model reads "Dislikes: Jazz", never a bare "Jazz" it would take for a liking."""
    from boundmem.models import Preference, RecallHit, utcnow
    from boundmem.proxy.app import memory_block
    from boundmem.schema.model import CategoryPath

    def hit(detail: str, sub: str, main: str, attribute: str, polarity: str) -> RecallHit:
        now = utcnow()
        return RecallHit(score=0.5, preference=Preference(
            id="p-" + attribute, user="acme:alice", path=CategoryPath(main=main, sub=sub, detail=detail),
            attribute=attribute, polarity=polarity, sentence=f"about {attribute}", created_at=now, updated_at=now))

    block = memory_block(memory, [hit("favorite_genres", "music", "entertainment_and_media", "Jazz", "dislike"),
                                  hit("avoidance_of_specific_road_types", "routing", "navigation_and_routing",
                                      "Highways", "like"),
                                  hit("favorite_cuisine", "restaurant", "points_of_interest", "Italian", "like")])
    assert '{"category": "Music / Favorite Genres", "memory": "Dislikes: Jazz", "they_said": "about Jazz"}' in block
    assert '"category": "Routing / Avoidance of Specific Road Types", "memory": "Avoids: Highways"' in block
    assert '{"category": "Restaurant / Favorite Cuisine", "memory": "Italian", "they_said"' in block
