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
