"""Oversized request bodies are refused with 413 before anything is parsed or stored, however they are sent."""
from __future__ import annotations

import json

import pytest

from .conftest import KEYS, KEY_A, FakeClock, auth, conversation

LIMIT = 2_000
URL = "/v1/users/alice/conversations"


@pytest.fixture()
def small_client(memory):
    from fastapi.testclient import TestClient

    from boundmem.service.app import create_app

    with TestClient(create_app(memory, KEYS, max_body_bytes=LIMIT)) as c:
        yield c


def big_body() -> bytes:
    body = json.dumps(conversation("c1", "I love Italian food. " * 200)).encode()
    assert len(body) > LIMIT
    return body


def test_declared_length_over_the_limit_is_413_and_stores_nothing(small_client, memory):
    r = small_client.post(URL, content=big_body(), headers={**auth(KEY_A), "Content-Type": "application/json"})
    assert r.status_code == 413
    assert str(LIMIT) in r.json()["message"]
    assert memory.store.users() == []


def test_chunked_body_over_the_limit_is_413_and_stores_nothing(small_client, memory):
    """No Content-Length (chunked): the bytes actually received are counted."""
    data = big_body()

    def chunks():
        for i in range(0, len(data), 500):
            yield data[i:i + 500]

    r = small_client.post(URL, content=chunks(), headers={**auth(KEY_A), "Content-Type": "application/json"})
    assert r.status_code == 413
    assert memory.store.users() == []


def test_bodies_under_the_limit_still_work_chunked_or_not(small_client, memory):
    data = json.dumps(conversation("c1", "I love Italian food.")).encode()
    assert len(data) < LIMIT
    r = small_client.post(URL, content=data, headers={**auth(KEY_A), "Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    r = small_client.post(URL, content=iter([data[:10], data[10:]]),
                          headers={**auth(KEY_A), "Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    prefs = small_client.get("/v1/users/alice/preferences", headers=auth(KEY_A)).json()["preferences"]
    assert [p["sentence"] for p in prefs] == ["I love Italian food."]


def test_the_limit_must_be_positive(memory):
    from boundmem.service.app import create_app
    from fastapi.testclient import TestClient

    with pytest.raises(ValueError, match="max_bytes"):
        with TestClient(create_app(memory, KEYS, max_body_bytes=0)) as c:
            c.get("/ui")


@pytest.fixture()
def limited(memory):
    from fastapi.testclient import TestClient

    from boundmem.service.app import create_app
    from boundmem.service.limits import RateLimiter

    clock = FakeClock()
    with TestClient(create_app(memory, KEYS, rate_limit=RateLimiter(0.5, burst=3, clock=clock))) as c:
        yield c, clock


def test_a_tenant_over_its_rate_gets_429_with_retry_after(limited, memory):
    from .conftest import KEY_B

    c, clock = limited
    ok = [c.post(URL, json=conversation(f"c{i}", "I love Italian food."), headers=auth(KEY_A)).status_code
          for i in range(3)]
    assert ok == [200, 200, 200]
    r = c.post(URL, json=conversation("c9", "I prefer covered parking."), headers=auth(KEY_A))
    assert r.status_code == 429
    assert "'acme'" in r.json()["detail"] and int(r.headers["Retry-After"]) == 2   # 1 token at 0.5/s
    assert [p.attribute for p in memory.preferences("acme:alice")] == ["Italian"]  # the refused add stored nothing
    # another tenant has its own bucket
    assert c.get("/v1/users/bob/preferences", headers=auth(KEY_B)).status_code == 200
    # the bucket refills with time: one request per 2 s
    clock.now += 2.0
    assert c.get("/v1/users/alice/preferences", headers=auth(KEY_A)).status_code == 200
    assert c.get("/v1/users/alice/preferences", headers=auth(KEY_A)).status_code == 429


def test_requests_without_a_valid_key_do_not_use_a_tenants_budget(limited):
    c, _ = limited
    for _ in range(5):
        assert c.get("/v1/users/alice/preferences", headers=auth("wrong-key-000000000000")).status_code == 401
    assert c.get("/v1/users/alice/preferences", headers=auth(KEY_A)).status_code == 200


@pytest.mark.parametrize("rate, burst", [(0, None), (-1, None), (1.0, 0)])
def test_rate_limit_settings_are_checked(rate, burst):
    from boundmem.service.limits import RateLimiter

    with pytest.raises(ValueError, match="per_second|burst"):
        RateLimiter(rate, burst)


# --- what one conversation may hold --------------------------------------------------------------
@pytest.fixture()
def capped(memory):
    from fastapi.testclient import TestClient

    from boundmem.service.app import create_app
    from boundmem.service.limits import ContentLimits

    with TestClient(create_app(memory, KEYS, limits=ContentLimits(max_turn_chars=50, max_turns=3, max_total_chars=100,
                                                                  max_utterance_chars=40))) as c:
        yield c


@pytest.mark.parametrize("texts,limit,value", [
    (["I love Italian food."] * 4, "max_turns", 3),
    (["I love Italian food. " * 3], "max_turn_chars", 50),
    (["I love Italian food, really, truly.", "Please play some Jazz while we drive ok.", "I always fill up at PetroLux, yes indeed."],
     "max_total_chars", 100),
])
def test_a_conversation_over_a_content_limit_is_413_naming_it_and_stores_nothing(capped, memory, texts, limit, value):
    r = capped.post(URL, json=conversation("c1", *texts), headers=auth(KEY_A))
    assert r.status_code == 413
    body = r.json()
    assert body["code"] == limit and body["limit"] == {"name": limit, "value": value}
    assert f"{limit}={value}" in body["message"] and body["detail"] == body["message"]
    assert memory.store.users() == []


def test_recall_utterance_limit_and_conversations_under_the_limits(capped):
    assert capped.post(URL, json=conversation("c1", "I love Italian food.", "Jazz please."), headers=auth(KEY_A)).status_code == 200
    r = capped.post("/v1/users/alice/recall", json={"utterance": "Italian " * 6}, headers=auth(KEY_A))
    assert r.status_code == 413 and r.json()["code"] == "max_utterance_chars"
    assert capped.post("/v1/users/alice/recall", json={"utterance": "Italian"}, headers=auth(KEY_A)).status_code == 200


def test_default_limits_refuse_the_expensive_request(client, memory):
    """The issue's case: a body under 1 MB of long turns, which cost ~73 s of CPU before; now refused at once."""
    import time

    from boundmem.service.limits import ContentLimits

    d = ContentLimits()
    assert (d.max_turn_chars, d.max_turns, d.max_total_chars) == (4_000, 100, 20_000)
    t0 = time.monotonic()
    r = client.post(URL, json=conversation("c1", *(["I love Italian food. " * 200] * 20)), headers=auth(KEY_A))
    assert r.status_code == 413 and r.json()["code"] == "max_turn_chars"
    r = client.post(URL, json=conversation("c1", *(["I love Italian food. " * 50] * 101)), headers=auth(KEY_A))
    assert r.status_code == 413 and r.json()["code"] == "max_turns"
    r = client.post(URL, json=conversation("c1", *(["I love Italian food. " * 190] * 6)), headers=auth(KEY_A))
    assert r.status_code == 413 and r.json()["code"] == "max_total_chars"
    assert time.monotonic() - t0 < 5 and memory.store.users() == []


@pytest.mark.parametrize("bad", [{"max_turns": 0}, {"max_turn_chars": -1}, {"max_total_chars": 1.5}])
def test_content_limit_settings_are_checked(bad):
    from boundmem.service.limits import ContentLimits

    with pytest.raises(ValueError, match=next(iter(bad))):
        ContentLimits(**bad)


# --- rate limit on by default -------------------------------------------------------------------
def test_a_default_rate_limit_is_on_and_can_be_turned_off(memory):
    from fastapi.testclient import TestClient

    from boundmem.service.app import create_app

    with TestClient(create_app(memory, KEYS)) as c:
        codes = [c.get("/v1/users/alice/opt-outs", headers=auth(KEY_A)).status_code for _ in range(80)]
    assert codes[:40] == [200] * 40 and 429 in codes
    with TestClient(create_app(memory, KEYS, rate_limit=None)) as c:
        assert {c.get("/v1/users/alice/opt-outs", headers=auth(KEY_A)).status_code for _ in range(80)} == {200}


def test_serve_has_a_rate_limit_unless_told_otherwise(tmp_path, monkeypatch):
    """`boundmem serve` builds the app with a limiter by default and without one for --rate-limit 0."""
    from typer.testing import CliRunner

    import boundmem.service.app as app_mod
    from boundmem.cli.serve import app as serve_app

    seen = []
    monkeypatch.setattr(app_mod, "create_app", lambda *a, **kw: seen.append(kw["rate_limit"]) or app_mod.FastAPI())
    monkeypatch.setattr("uvicorn.Server.run", lambda *a, **kw: None)
    keys = tmp_path / "k.json"
    keys.write_text(json.dumps({KEY_A: "acme"}))
    base = ["--keys", str(keys), "--db", str(tmp_path / "x.db"), "--lazy", "--embedder", "hash", "--port", "0"]
    assert CliRunner().invoke(serve_app, base).exit_code == 0
    assert CliRunner().invoke(serve_app, [*base, "--rate-limit", "0"]).exit_code == 0
    assert seen[0].tenant is not None and (seen[0].tenant.rate, seen[0].tenant.burst) == (20.0, 40)
    assert (seen[0].user.rate, seen[0].user.burst) == (5.0, 20)
    assert seen[1].tenant is None and seen[1].failures is not None   # failed authentications stay limited


# --- a busy store -----------------------------------------------------------------------------
def test_a_locked_store_answers_503_json_with_retry_after_and_stores_nothing(tmp_path, schema):
    import sqlite3
    import time

    from fastapi.testclient import TestClient

    from boundmem.extract.keyword import KeywordExtractor
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.memory import Memory
    from boundmem.embed import HashEmbedder
    from boundmem.service.app import create_app
    from boundmem.store.sqlite import SQLiteStore

    path = tmp_path / "busy.db"
    store = SQLiteStore(path, timeout=0.3)
    mem = Memory(schema=schema, store=store, extractor=KeywordExtractor(), maintainer=RuleMaintainer(), embedder=HashEmbedder())
    other = sqlite3.connect(path, isolation_level=None)   # another process holding the write lock
    try:
        with TestClient(create_app(mem, KEYS)) as c:
            assert c.post(URL, json=conversation("c0", "I love Italian food."), headers=auth(KEY_A)).status_code == 200
            other.execute("BEGIN IMMEDIATE")
            t0 = time.monotonic()
            for r in (c.post(URL, json=conversation("c1", "Please play some Jazz while we drive."), headers=auth(KEY_A)),
                      c.delete("/v1/users/alice", headers=auth(KEY_A))):
                assert r.status_code == 503, r.text
                assert r.headers["Retry-After"].isdigit() and int(r.headers["Retry-After"]) >= 1
                assert r.headers["content-type"].startswith("application/json")
                assert r.json()["code"] == "store_busy" and "retry" in r.json()["message"]
            assert time.monotonic() - t0 < 10
            other.execute("ROLLBACK")
            prefs = c.get("/v1/users/alice/preferences", headers=auth(KEY_A)).json()["preferences"]
            assert [p["attribute"] for p in prefs] == ["Italian"]
    finally:
        other.close()
        store.close()


def test_every_error_has_the_same_json_shape(client):
    for r in (client.get("/v1/users/alice/preferences"),                                        # 401
              client.post("/v1/users/alice/tokens", headers=auth(client.post("/v1/users/alice/tokens", headers=auth(KEY_A)).json()["token"])),  # 403
              client.delete("/v1/users/alice/preferences/nope", headers=auth(KEY_A)),           # 404
              client.get("/v1/users/a:b/preferences", headers=auth(KEY_A)),                     # 422
              client.post(URL, json=conversation("c1", "x" * 5000), headers=auth(KEY_A))):      # 413
        body = r.json()
        assert r.status_code >= 400 and set(body) >= {"detail", "message", "code"}, (r.status_code, body)
        assert isinstance(body["message"], str) and body["message"] and isinstance(body["code"], str)


def test_an_embedder_dimension_mismatch_is_409_naming_both_dimensions(tmp_path, schema):
    """A user whose memory was filled with another embedder: a JSON error that says so, not a bare 500."""
    from fastapi.testclient import TestClient

    from boundmem.extract.keyword import KeywordExtractor
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.memory import Memory
    from boundmem.embed import HashEmbedder
    from boundmem.service.app import create_app
    from boundmem.store import base
    from boundmem.store.sqlite import SQLiteStore

    if getattr(base, "EmbeddingDimensionError", None) is None:
        pytest.skip("the store does not raise EmbeddingDimensionError yet")
    store = SQLiteStore(tmp_path / "dim.db")
    try:
        def mem(dim):
            return Memory(schema=schema, store=store, extractor=KeywordExtractor(), maintainer=RuleMaintainer(),
                          embedder=HashEmbedder(dim=dim))

        with TestClient(create_app(mem(256), KEYS)) as c:
            assert c.post(URL, json=conversation("c1", "I love Italian food."), headers=auth(KEY_A)).status_code == 200
        with TestClient(create_app(mem(128), KEYS)) as c:
            for r in (c.post("/v1/users/alice/recall", json={"utterance": "Italian food"}, headers=auth(KEY_A)),
                      c.post(URL, json=conversation("c2", "Please play some Jazz while we drive."), headers=auth(KEY_A))):
                assert r.status_code == 409, r.text
                body = r.json()
                assert body["code"] == "embedding_dimension_mismatch"
                assert "256" in body["message"] and "128" in body["message"] and "acme" not in r.text
        assert [p.attribute for p in store.preferences("acme:alice")] == ["Italian"]
    finally:
        store.close()


@pytest.mark.parametrize("raised,status,code", [("timeout", 502, "llm_unavailable"), ("crash", 500, "internal_error")])
def test_upstream_failures_and_crashes_keep_the_json_shape(tmp_path, schema, raised, status, code):
    """An LLM endpoint that fails is a 502 that does not echo the endpoint; a bug is a JSON 500, not text."""
    from fastapi.testclient import TestClient

    from boundmem.llm.errors import LLMTimeout
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.memory import Memory
    from boundmem.embed import HashEmbedder
    from boundmem.service.app import create_app
    from boundmem.store.sqlite import SQLiteStore

    class Failing:
        def extract(self, conversation, schema):
            if raised == "timeout":
                raise LLMTimeout("timed out talking to http://10.1.2.3:8080/v1", endpoint="http://10.1.2.3:8080/v1")
            raise RuntimeError("bug at /srv/secret/path")

    store = SQLiteStore(tmp_path / "f.db")
    mem = Memory(schema=schema, store=store, extractor=Failing(), maintainer=RuleMaintainer(), embedder=HashEmbedder())
    try:
        with TestClient(create_app(mem, KEYS), raise_server_exceptions=False) as c:
            r = c.post(URL, json=conversation("c1", "I love Italian food."), headers=auth(KEY_A))
        assert r.status_code == status and r.json()["code"] == code and r.json()["message"]
        assert "10.1.2.3" not in r.text and "/srv/secret" not in r.text
        assert store.users() == []
    finally:
        store.close()
