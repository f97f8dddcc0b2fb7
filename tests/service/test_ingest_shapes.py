"""The SDK message list, a string and a Conversation, through Memory.add/submit, the HTTP route and the client."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from boundmem import Client, InputError
from boundmem.service.app import create_app

from .conftest import KEY_A, KEYS, auth

MESSAGES = [{"role": "system", "content": "You are a car assistant."},
            {"role": "user", "content": "I always go for Italian food."},
            {"role": "assistant", "content": "Noted."}]


def test_memory_add_takes_sdk_messages_and_a_string(memory):
    r = memory.add(MESSAGES, user="alice")
    assert r.conversation_id.startswith("conv-") and [p.attribute for p in r.stored] == ["Italian"]
    assert memory.preferences("alice")[0].conversation_id == r.conversation_id
    r2 = memory.add("I love Italian food.", user="bob", conversation_id="c-bob")
    assert r2.conversation_id == "c-bob" and memory.preferences("bob")[0].conversation_id == "c-bob"


@pytest.mark.parametrize("bad", [42, ["I like Italian food"], [{"role": "narrator", "content": "x"}]])
def test_memory_add_and_submit_refuse_other_shapes_before_anything_is_stored(memory, bad):
    with pytest.raises(InputError):
        memory.add(bad, user="alice")
    with pytest.raises(InputError):
        memory.submit(bad, user="alice", start_worker=False)
    assert memory.preferences("alice") == [] and memory.jobs.pending() == 0


def test_submit_takes_sdk_messages(memory):
    job = memory.submit(MESSAGES, user="alice", conversation_id="c9")
    assert memory.wait(job.id).status == "done"
    assert [(p.attribute, p.conversation_id) for p in memory.preferences("alice")] == [("Italian", "c9")]


def test_http_ingest_takes_messages_without_an_id(memory):
    with TestClient(create_app(memory, KEYS)) as c:
        r = c.post("/v1/users/alice/conversations", json={"messages": MESSAGES}, headers=auth(KEY_A))
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["conversation_id"].startswith("conv-") and [p["attribute"] for p in body["stored"]] == ["Italian"]
        r = c.post("/v1/users/bob/conversations", json={"id": "c2", "messages": "I love Italian food."},
                   headers=auth(KEY_A))
        assert r.status_code == 200 and r.json()["conversation_id"] == "c2"
        for bad in ({"messages": [{"role": "narrator", "content": "x"}]}, {"messages": [{"role": "system", "content": "x"}]},
                    {"id": "c3"}, {"messages": "hi", "turns": [{"role": "user", "text": "hi"}]}):
            r = c.post("/v1/users/carol/conversations", json=bad, headers=auth(KEY_A))
            assert r.status_code == 422 and r.json()["code"] == "invalid_request", (bad, r.text)
        assert "narrator" in c.post("/v1/users/carol/conversations", json={"messages": [{"role": "narrator", "content": "x"}]},
                                    headers=auth(KEY_A)).json()["message"]
        r = c.post("/v1/users/carol/conversations?async=true", json={"messages": MESSAGES}, headers=auth(KEY_A))
        assert r.status_code == 202


def test_client_takes_messages_and_checks_the_shape_before_sending(memory):
    with TestClient(create_app(memory, KEYS)) as tc:
        client = Client("http://testserver", KEY_A, http_client=tc)
        r = client.add("alice", MESSAGES, conversation_id="c5")
        assert r.conversation_id == "c5" and [p.attribute for p in r.stored] == ["Italian"]
        assert client.add("bob", "I love Italian food.").conversation_id.startswith("conv-")
        with pytest.raises(InputError, match="expected a Conversation"):
            client.add("alice", 42)
