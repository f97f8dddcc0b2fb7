"""Oversized request bodies are refused with 413 before anything is parsed or stored, however they are sent."""
from __future__ import annotations

import json

import pytest

from .conftest import KEYS, KEY_A, auth, conversation

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


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


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
