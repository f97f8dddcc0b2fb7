"""mem0's names on boundmem's API: `user_id=` wherever `user` is (Memory, AsyncMemory, Client, AsyncClient), the
aliases `search` / `get_all` / `delete_all`, and a record id given in the user's place refused with the argument
named instead of a misleading answer ("nothing to change", "not found")."""
from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from boundmem import AsyncMemory, InputError, NotFoundError
from boundmem.client import AsyncClient, Client
from boundmem.user_id import InvalidUserId

MSGS = [{"role": "user", "content": "I love Italian food."}]


def test_memory_takes_user_id_in_mem0_order(keyword_memory):
    m = keyword_memory
    stored = m.add(MSGS, user_id="alice").stored
    assert [p.attribute for p in stored] == ["Italian"]
    assert m.get_all(user_id="alice") == m.preferences("alice") == stored
    assert m.search("Where should we eat tonight?", user_id="alice", gate=False)[0].preference == stored[0]
    pid = stored[0].id
    assert m.update(pid, "Mexican", user_id="alice").attribute == "Mexican"     # mem0's update(memory_id, data)
    assert [a.op for a in m.history(pid, user_id="alice")][-1] == "update"
    assert m.delete_all(user_id="alice") == 1
    assert m.get_all(user_id="alice") == []
    with pytest.raises(NotFoundError):
        m.delete_all(user_id="alice")


def test_a_preference_id_in_the_users_place_is_named(keyword_memory):
    m = keyword_memory
    pid = m.add(MSGS, user="alice").stored[0].id
    with pytest.raises(InvalidUserId, match=r"argument 'user' is '[0-9a-f]{32}', which looks like a preference id"
                       r".*'preference_id' is 'Vegan'.*user_id=") as e:
        m.update(pid, "Vegan")
    assert e.value.argument == "user"
    with pytest.raises(InvalidUserId, match="Memory.delete takes the user first"):
        m.delete(pid, "alice")
    assert m.preferences("alice")[0].attribute == "Italian"     # nothing was changed
    with pytest.raises(NotFoundError):                           # a wrong id in the right place stays "not found"
        m.update("alice", "nope", attribute="Vegan")


def test_user_and_user_id_together_or_too_many_arguments_are_errors(keyword_memory):
    with pytest.raises(InputError, match="user= or user_id="):
        keyword_memory.preferences(user="a", user_id="b")
    with pytest.raises(TypeError, match="positional"):
        keyword_memory.recall("q", 5, True, user_id="a")
    with pytest.raises(TypeError, match="multiple values for argument 'utterance'"):
        keyword_memory.recall("q", utterance="r", user_id="a")


def test_async_memory_takes_user_id(keyword_memory):
    am = AsyncMemory(keyword_memory)

    async def go():
        await am.add(MSGS, user_id="bob")
        return await am.get_all(user_id="bob"), await am.search("Where should we eat?", user_id="bob", gate=False)

    prefs, hits = asyncio.run(go())
    assert [p.attribute for p in prefs] == ["Italian"] and hits[0].preference == prefs[0]


def _recording_transport(seen: list):
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path, json.loads(request.content or b"null")))
        return httpx.Response(200, json={"user": "alice", "erased": 0})
    return httpx.MockTransport(handle)


def test_the_clients_read_user_id_whatever_their_argument_order():
    """The client takes the user first (the URL's order); with `user_id=` the positional arguments are the others,
    so mem0's `add(messages, user_id=)` sends the same request as `add("alice", messages)`."""
    seen: list = []
    c = Client("http://x", "k", http_client=httpx.Client(transport=_recording_transport(seen)))
    for call in (lambda: c.delete_all(user_id="alice"), lambda: c.forget("alice")):
        call()
    with pytest.raises(Exception):
        c.add(MSGS, user_id="alice")   # the recording server's answer is no IngestOut; the request is what matters
    assert [s[:2] for s in seen] == [("DELETE", "/v1/users/alice")] * 2 + [("POST", "/v1/users/alice/conversations")]
    assert "I love Italian food." in json.dumps(seen[-1][2])

    aseen: list = []
    ac = AsyncClient("http://x", "k", http_client=httpx.AsyncClient(transport=_recording_transport(aseen)))
    asyncio.run(ac.delete_all(user_id="bob"))
    assert aseen[0][:2] == ("DELETE", "/v1/users/bob")


def test_a_client_call_with_a_record_id_first_is_named():
    c = Client("http://x", "k", http_client=httpx.Client(transport=_recording_transport([])))
    with pytest.raises(InvalidUserId, match="_Ops.update takes the user first"):
        c.update("0123456789abcdef0123456789abcdef", "Vegan")
