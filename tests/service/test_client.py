"""Boundmem.Client and AsyncClient against the real app: typed answers, the library's error types."""
from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi.testclient import TestClient

from boundmem import AsyncClient, Client, Conversation, Turn
from boundmem.api_models import IngestOut, JobOut, ObservationList, ObservationOut, PreferenceOut, RecallOut
from boundmem.client import (ApiError, AuthError, Busy, DimensionMismatch, ExtractionFailed, InvalidRequest,
                             LimitExceeded, NotFound)
from boundmem.extract.base import ExtractionError
from boundmem.models import UserExport
from boundmem.service.app import create_app
from boundmem.errors import NotFoundError
from boundmem.store.base import EmbeddingDimensionError, StoreBusy

from .conftest import KEY_A, KEY_B, KEYS

ITALIAN = Conversation(id="c1", turns=(Turn(role="user", text="I always go for Italian food."),))


@pytest.fixture()
def app(memory):
    return create_app(memory, KEYS)


@pytest.fixture()
def client(app):
    with TestClient(app) as tc:
        yield Client("http://testserver", KEY_A, http_client=tc)


def test_every_call_answers_the_servers_models(client):
    r = client.add("alice", ITALIAN)
    assert isinstance(r, IngestOut) and [d.action for d in r.decisions] == ["insert"]
    hits = client.recall("alice", "Where should we eat?", k=3, gate=False)
    assert isinstance(hits, RecallOut) and hits.hits[0].preference.attribute == "Italian"
    prefs = client.preferences("alice").preferences
    assert [p.sentence for p in prefs] == ["I always go for Italian food."]
    assert client.preferences("alice", category="Restaurant").preferences == prefs
    assert isinstance(client.export("alice"), UserExport)
    assert client.opt_out("alice", "Restaurant").purged[0].id == prefs[0].id
    assert client.opt_outs("alice").opt_outs == [client.opt_out("alice", "Restaurant").category]
    assert client.opt_in("alice", "Restaurant").changed is True
    assert client.schema().name == client.schema("alice").name
    assert client.whoami().kind == "tenant"
    tok = client.mint_token("alice", ttl_seconds=60)
    assert client.revoke_tokens("alice").revoked is True and tok.user == "alice"
    client.add("alice", {"id": "c2", "turns": [{"role": "user", "text": "I love Mexican food."}]})
    assert client.forget("alice").erased >= 1


def test_async_add_returns_a_job_to_follow(client):
    job = client.add("alice", ITALIAN, wait=False)
    assert isinstance(job, JobOut) and job.status == "pending"
    done = client.wait_job("alice", job.id, timeout=None)
    assert done.status == "done" and done.result["decisions"][0]["action"] == "insert"


def test_errors_are_the_librarys_types(client, memory, monkeypatch):
    with pytest.raises(NotFound) as e:
        client.delete("alice", "no-such-id")
    assert isinstance(e.value, NotFoundError) and e.value.status == 404 and e.value.code == "not_found"
    with pytest.raises(NotFoundError):
        client.job("alice", "nope")
    with pytest.raises(InvalidRequest) as e:   # the request model's own bound: 422 naming the field
        client.recall("alice", "x" * 4001)
    assert "utterance" in e.value.message and isinstance(e.value, ValueError)
    with pytest.raises(LimitExceeded) as e:
        client.add("alice", {"id": "c", "turns": [{"role": "user", "text": "x" * 5000}]})
    assert e.value.limit["name"] == "max_turn_chars"

    def busy(*a, **kw):
        raise StoreBusy("test: locked", retry_after=3)

    monkeypatch.setattr(memory, "recall", busy)
    with pytest.raises(StoreBusy) as e:
        client.recall("alice", "hi")
    assert isinstance(e.value, Busy) and e.value.retry_after == 3

    def other_dim(*a, **kw):
        raise EmbeddingDimensionError(384, 256, "store has 384-d vectors, got 256")

    monkeypatch.setattr(memory, "recall", other_dim)
    with pytest.raises(EmbeddingDimensionError) as e:
        client.recall("alice", "hi")
    assert isinstance(e.value, DimensionMismatch) and e.value.code == "embedding_dimension_mismatch"

    def broken(*a, **kw):
        raise ExtractionError("invalid tool call")

    monkeypatch.setattr(memory.extractor, "extract", broken)
    with pytest.raises(ExtractionError) as e:
        client.add("alice", ITALIAN)
    assert isinstance(e.value, ExtractionFailed) and e.value.status == 502


def test_auth_errors(app):
    with TestClient(app) as tc:
        with pytest.raises(AuthError) as e:
            Client("http://testserver", "wrong-key-0123456789abcdef", http_client=tc).whoami()
        assert e.value.status == 401 and isinstance(e.value, PermissionError)
        token = Client("http://testserver", KEY_A, http_client=tc).mint_token("bob").token
        bob = Client("http://testserver", token, http_client=tc)
        assert bob.whoami().user == "bob"
        with pytest.raises(AuthError) as e:
            bob.preferences("alice")
        assert e.value.status == 403
        with pytest.raises(ApiError):
            Client("http://testserver", KEY_B, http_client=tc).delete("alice", "x")


def test_async_client(app):
    async def scenario():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport) as http:
            c = AsyncClient("http://testserver", KEY_A, http_client=http)
            assert [d.action for d in (await c.add("alice", ITALIAN)).decisions] == ["insert"]
            hits = await c.recall("alice", "Where should we eat?", gate=False)
            assert hits.hits[0].preference.attribute == "Italian"
            job = await c.add("alice", {"id": "c2", "turns": [{"role": "user", "text": "I love Mexican food."}]},
                              wait=False)
            assert (await c.wait_job("alice", job.id, timeout=None)).status == "done"
            with pytest.raises(NotFoundError):
                await c.delete("alice", "nope")
            await c.aclose()

    asyncio.run(scenario())


def _say(cid: str, *texts: str) -> Conversation:
    return Conversation(id=cid, turns=tuple(Turn(role="user", text=t) for t in texts))


def test_polarity_and_observations_through_the_client(client):
    r = client.add("alice", _say("c1", "I can't stand Jazz.", "Play some Rock."))
    assert [(p.attribute, p.polarity, p.display) for p in r.stored] == [("Jazz", "dislike", "Dislikes: Jazz")]
    assert [(o.attribute, o.polarity) for o in r.observed] == [("Rock", "like")]
    (jazz,) = client.preferences("alice").preferences
    assert jazz.polarity == "dislike" and jazz.attribute == "Jazz"
    listed = client.observations("alice")
    assert isinstance(listed, ObservationList) and [o.id for o in listed.observations] == [r.observed[0].id]
    client.add("alice", _say("c2", "Play some Pop."))
    pop = next(o for o in client.observations("alice").observations if o.attribute == "Pop")
    gone = client.dismiss("alice", pop.id)
    assert isinstance(gone, ObservationOut) and gone.attribute == "Pop"
    rock = client.confirm("alice", r.observed[0].id)
    assert isinstance(rock, PreferenceOut) and (rock.attribute, rock.polarity) == ("Rock", "like")
    assert {p.attribute for p in client.preferences("alice").preferences} == {"Jazz", "Rock"}
    assert client.observations("alice").observations == []
    with pytest.raises(NotFound) as e:
        client.confirm("alice", pop.id)   # dismissed: no longer there
    assert pop.id in e.value.message and isinstance(e.value, NotFoundError)
    with pytest.raises(NotFoundError):
        client.dismiss("alice", "nope")


def test_async_client_observations(app):
    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:
            c = AsyncClient("http://testserver", KEY_A, http_client=http)
            r = await c.add("alice", _say("c1", "Play some Rock."))
            (o,) = (await c.observations("alice")).observations
            assert o.id == r.observed[0].id
            assert (await c.confirm("alice", o.id)).attribute == "Rock"
            await c.add("alice", _say("c2", "Play some Pop."))
            (pop,) = (await c.observations("alice")).observations
            assert (await c.dismiss("alice", pop.id)).id == pop.id
            with pytest.raises(NotFoundError):
                await c.confirm("alice", "nope")
            assert (await c.observations("alice")).observations == []

    asyncio.run(scenario())
