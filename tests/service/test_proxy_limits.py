"""The proxy under abuse: the API's content and size limits, a depth-bounded JSON parser, rate limits per
tenant, per user token and per client address for failed authentication, OpenAI-shaped errors for all of them; and
what it sends upstream: no end-user id unless configured, the model list passed through."""
from __future__ import annotations

import json
import sqlite3

import openai
import pytest
from fastapi.testclient import TestClient

from boundmem.proxy.app import create_proxy
from boundmem.service.limits import ContentLimits, RateLimiter, Throttle
from boundmem.service.tokens import TokenIssuer
from llm.fake_openai import FakeOpenAI, content, raw

from .conftest import KEY_A, KEY_B, KEYS, FakeClock, auth

CHAT = "/v1/chat/completions"


@pytest.fixture()
def upstream():
    with FakeOpenAI() as srv:
        yield srv


def sdk(tc: TestClient, key: str = KEY_A) -> openai.OpenAI:
    return openai.OpenAI(base_url="http://testserver/v1", api_key=key, http_client=tc, max_retries=0)


def chat(*user_texts: str, **extra) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": t} for t in user_texts], **extra}


def openai_error(r, status: int, code: str) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "code"} and err["code"] == code, err
    return err


def jobs_queued(memory) -> int:
    con = sqlite3.connect(memory.store.path)
    try:
        return con.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
    finally:
        con.close()


@pytest.fixture()
def proxy(memory, upstream):
    with TestClient(create_proxy(memory, KEYS, upstream.base_url), raise_server_exceptions=False) as tc:
        yield tc


def test_a_huge_user_message_is_413_naming_the_limit_and_reaches_neither_upstream_nor_memory(proxy, upstream, memory):
    """The issue's case: a 400,000-character message was forwarded, ingested and stored as one sentence."""
    r = proxy.post(CHAT, json=chat("I love Italian food. " * 19_000, user="alice"), headers=auth(KEY_A))
    err = openai_error(r, 413, "max_turn_chars")
    assert "max_turn_chars=4000" in err["message"]
    with pytest.raises(openai.APIStatusError) as e:   # the SDK reads it as an error, not a reply
        sdk(proxy).chat.completions.create(model="m", user="alice",
                                           messages=[{"role": "user", "content": "x" * 5000}])
    assert e.value.status_code == 413
    assert upstream.requests == [] and jobs_queued(memory) == 0


def test_turn_count_and_total_characters_are_bounded_like_the_api(memory, upstream):
    limits = ContentLimits(max_turn_chars=50, max_turns=3, max_total_chars=100)
    with TestClient(create_proxy(memory, KEYS, upstream.base_url, limits=limits)) as tc:
        openai_error(tc.post(CHAT, json=chat(*["hi"] * 4, user="alice"), headers=auth(KEY_A)), 413, "max_turns")
        openai_error(tc.post(CHAT, json=chat("x" * 45, "y" * 45, "z" * 45, user="alice"), headers=auth(KEY_A)),
                     413, "max_total_chars")
        # system and assistant messages are the client's business with its model: only the body size bounds them
        upstream.push(content("ok"))
        body = {"model": "m", "user": "alice", "messages": [{"role": "system", "content": "s" * 5000},
                                                            {"role": "user", "content": "hi"}]}
        assert tc.post(CHAT, json=body, headers=auth(KEY_A)).status_code == 200
    assert len(upstream.requests) == 1


def test_a_body_over_the_size_limit_is_an_openai_shaped_413(memory, upstream):
    with TestClient(create_proxy(memory, KEYS, upstream.base_url, max_body_bytes=2_000)) as tc:
        data = json.dumps(chat("word " * 500, user="alice")).encode()
        for body in (data, iter([data[i:i + 300] for i in range(0, len(data), 300)])):   # declared and chunked
            openai_error(tc.post(CHAT, content=body, headers={**auth(KEY_A), "Content-Type": "application/json"}),
                         413, "max_body_bytes")
    assert upstream.requests == []


@pytest.mark.parametrize("body", [b"[" * 100_000, b'{"messages": ' + b"[" * 2_000 + b"]" * 2_000 + b"}",
                                  b'{"model": "m", "user": "alice", "messages": [{"role": "user", "content": "hi", '
                                  b'"x": ' + b"[" * 70 + b"]" * 70 + b"}]}"])
def test_a_deeply_nested_body_is_an_openai_shaped_400_not_a_plain_500(proxy, upstream, body):
    r = proxy.post(CHAT, content=body, headers={**auth(KEY_A), "Content-Type": "application/json"})
    err = openai_error(r, 400, "max_json_depth")
    assert "64" in err["message"] and err["type"] == "invalid_request_error"
    assert upstream.requests == []


def test_not_json_is_400_and_an_unexpected_error_is_an_openai_shaped_500(proxy, monkeypatch):
    openai_error(proxy.post(CHAT, content=b"{nope", headers={**auth(KEY_A), "Content-Type": "application/json"}),
                 400, "invalid_json")
    import boundmem.proxy.app as proxy_app

    monkeypatch.setattr(proxy_app, "message_text", lambda c: 1 / 0)
    r = proxy.post(CHAT, json=chat("hi", user="alice"), headers=auth(KEY_A))
    assert openai_error(r, 500, "internal_error")["type"] == "api_error"
    assert r.headers["content-type"].startswith("application/json")


def test_a_tenant_over_its_rate_gets_an_openai_shaped_429_with_retry_after(memory, upstream):
    clock = FakeClock()
    with TestClient(create_proxy(memory, KEYS, upstream.base_url,
                                 rate_limit=RateLimiter(0.5, burst=3, clock=clock))) as tc:
        upstream.push(*[content("ok")] * 3)
        codes = [tc.post(CHAT, json=chat("hi", user="alice"), headers=auth(KEY_A)).status_code for _ in range(5)]
        assert codes == [200, 200, 200, 429, 429]
        r = tc.post(CHAT, json=chat("hi", user="alice"), headers=auth(KEY_A))
        assert openai_error(r, 429, "rate_limit_exceeded") and int(r.headers["Retry-After"]) == 2
        with pytest.raises(openai.RateLimitError):
            sdk(tc).chat.completions.create(model="m", user="alice", messages=[{"role": "user", "content": "hi"}])
        upstream.push(content("other tenant"))
        assert tc.post(CHAT, json=chat("hi", user="bob"), headers=auth(KEY_B)).status_code == 200
    assert len(upstream.requests) == 4


def test_one_users_token_cannot_lock_the_other_users_of_its_tenant_out(memory, upstream):
    """The issue's case: 120 requests with one user's token, and another user of the tenant got 429."""
    clock, issuer = FakeClock(), TokenIssuer()
    throttle = Throttle(tenant=RateLimiter(20, 40, clock=clock), user=RateLimiter(5, 20, clock=clock))
    bob, _ = issuer.mint("acme", "bob")
    carol, _ = issuer.mint("acme", "carol")
    with TestClient(create_proxy(memory, KEYS, upstream.base_url, tokens=issuer, rate_limit=throttle)) as tc:
        upstream.push(*[content("ok")] * 60)
        codes = [tc.post(CHAT, json=chat("hi"), headers=auth(bob)).status_code for _ in range(120)]
        assert codes.count(200) == 20 and codes.count(429) == 100
        assert tc.post(CHAT, json=chat("hi"), headers=auth(carol)).status_code == 200
        assert tc.post(CHAT, json=chat("hi", user="dave"), headers=auth(KEY_A)).status_code == 200


def test_a_flood_of_wrong_keys_is_limited_per_client_address(memory, upstream):
    clock = FakeClock()
    throttle = Throttle(failures=RateLimiter(1, 5, clock=clock))
    with TestClient(create_proxy(memory, KEYS, upstream.base_url, rate_limit=throttle)) as tc:
        codes = [tc.post(CHAT, json=chat("hi", user="alice"), headers=auth(f"guess-{i:020d}")).status_code
                 for i in range(8)]
        assert codes == [401] * 5 + [429] * 3
        assert tc.post(CHAT, json=chat("hi", user="alice")).status_code == 429   # no key at all: the same budget
        # the address waits, whatever it sends (a guessed key that happens to be right is not even checked)
        openai_error(tc.post(CHAT, json=chat("hi", user="alice"), headers=auth(KEY_A)), 429, "rate_limit_exceeded")
        clock.now += 1.0
        upstream.push(content("ok"))
        assert tc.post(CHAT, json=chat("hi", user="alice"), headers=auth(KEY_A)).status_code == 200


def test_the_end_users_id_is_not_sent_upstream_unless_configured(memory, upstream):
    upstream.push(content("a"), content("b"))
    with TestClient(create_proxy(memory, KEYS, upstream.base_url)) as tc:
        sdk(tc).chat.completions.create(model="m", user="alice", messages=[{"role": "user", "content": "hi"}])
    with TestClient(create_proxy(memory, KEYS, upstream.base_url, forward_user=True)) as tc:
        sdk(tc).chat.completions.create(model="m", user="alice", messages=[{"role": "user", "content": "hi"}])
    assert "user" not in upstream.requests[0].json and "alice" not in upstream.requests[0].body.decode()
    assert upstream.requests[1].json["user"] == "alice"


def test_models_are_listed_and_looked_up_through_the_proxy_with_a_key_or_a_user_token(memory, upstream):
    issuer = TokenIssuer()
    token, _ = issuer.mint("acme", "bob")
    listing = {"object": "list", "data": [{"id": "m1", "object": "model", "created": 1, "owned_by": "me"}]}
    upstream.push(raw(json.dumps(listing).encode()), raw(json.dumps(listing).encode()),
                  raw(json.dumps(listing["data"][0]).encode()))
    with TestClient(create_proxy(memory, KEYS, upstream.base_url, tokens=issuer)) as tc:
        assert [m.id for m in sdk(tc).models.list()] == ["m1"]
        assert [m.id for m in sdk(tc, key=token).models.list()] == ["m1"]
        assert sdk(tc).models.retrieve("m1").id == "m1"
        openai_error(tc.get("/v1/models"), 401, "invalid_api_key")
    assert [r.path for r in upstream.requests] == ["/v1/models", "/v1/models", "/v1/models/m1"]
    assert all(r.method == "GET" for r in upstream.requests)


def test_an_upstreams_deeply_nested_answer_passes_through_without_breaking_the_proxy(proxy, upstream, memory):
    deep = b"[" * 5_000 + b"]" * 5_000
    upstream.push(raw(deep), raw(b"data: " + deep + b"\n\ndata: [DONE]\n\n", content_type="text/event-stream"))
    r = proxy.post(CHAT, json=chat("I love Mexican food.", user="alice"), headers=auth(KEY_A))
    assert r.status_code == 200 and r.content == deep
    r = proxy.post(CHAT, json=chat("I love Mexican food.", user="alice", stream=True), headers=auth(KEY_A))
    assert r.status_code == 200 and deep in r.content
