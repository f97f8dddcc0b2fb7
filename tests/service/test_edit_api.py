"""PATCH /v1/users/{user}/preferences/{id} and GET .../history, and the client's update/history: the edit is
the library's (audited, re-embedded, closed items, conflicts), scoped to the caller's tenant and user token."""
from __future__ import annotations

import pytest

from boundmem import Client, InputError, NotFoundError

from .conftest import KEY_A, KEY_B, auth, conversation

A, B = auth(KEY_A), auth(KEY_B)
U = "/v1/users/alice"


@pytest.fixture()
def italian(client):
    r = client.post(f"{U}/conversations", json=conversation("c1", "I love Italian food."), headers=A)
    assert r.status_code == 200, r.text
    return r.json()["stored"][0]


def test_patch_corrects_the_value_and_history_shows_it(client, memory, italian):
    r = client.patch(f"{U}/preferences/{italian['id']}", json={"attribute": "Mexican"}, headers=A)
    assert r.status_code == 200, r.text
    got = r.json()
    assert (got["id"], got["attribute"], got["sentence"], got["user"]) == (italian["id"], "Mexican",
                                                                         "I love Italian food.", "alice")
    assert got["edited"] is True and italian["edited"] is False   # the sentence is what was said before the edit
    listed = client.get(f"{U}/preferences", headers=A).json()["preferences"]
    assert [(p["attribute"], p["edited"]) for p in listed] == [("Mexican", True)]
    r = client.patch(f"{U}/preferences/{italian['id']}", json={"polarity": "dislike"}, headers=A)
    assert r.status_code == 200 and r.json()["attribute"] == "Mexican"
    assert memory.store.get("acme:alice", italian["id"]).polarity == "dislike"
    h = client.get(f"{U}/preferences/{italian['id']}/history", headers=A)
    assert h.status_code == 200, h.text
    body = h.json()
    assert body["user"] == "alice" and body["preference_id"] == italian["id"]
    assert [(e["op"], e["cause"]) for e in body["entries"]][1:] == [("update", "edited by the user")] * 2
    assert all(e["user"] == "alice" for e in body["entries"]) and "acme:" not in h.text


@pytest.mark.parametrize("body, status, says", [
    ({}, 422, "attribute"), ({"attribute": ""}, 422, "attribute"), ({"polarity": "love"}, 422, "polarity"),
    ({"attribute": "x", "sentence": "y"}, 422, "sentence"),
])
def test_bad_bodies_are_422_and_change_nothing(client, italian, body, status, says):
    r = client.patch(f"{U}/preferences/{italian['id']}", json=body, headers=A)
    assert r.status_code == status and says in r.text, r.text
    assert client.get(f"{U}/preferences", headers=A).json()["preferences"][0]["attribute"] == "Italian"


def test_a_duplicate_is_409_and_an_unknown_id_404(client, italian):
    client.post(f"{U}/conversations", json=conversation("c2", "I love Mexican food."), headers=A)
    r = client.patch(f"{U}/preferences/{italian['id']}", json={"attribute": "Mexican"}, headers=A)
    assert r.status_code == 409 and r.json()["code"] == "conflict"
    assert client.patch(f"{U}/preferences/nope", json={"attribute": "x"}, headers=A).status_code == 404
    assert client.get(f"{U}/preferences/nope/history", headers=A).status_code == 404


def test_another_tenant_or_users_token_reaches_nothing(client, italian):
    for path in (f"{U}/preferences/{italian['id']}", "/v1/users/bob/preferences/" + italian["id"]):
        assert client.patch(path, json={"attribute": "Mexican"}, headers=B).status_code == 404
        assert client.get(path + "/history", headers=B).status_code == 404
    bob = client.post("/v1/users/bob/tokens", headers=A).json()["token"]
    assert client.patch(f"{U}/preferences/{italian['id']}", json={"attribute": "Mexican"},
                        headers=auth(bob)).status_code == 403
    mine = client.post("/v1/users/alice/tokens", headers=A).json()["token"]
    assert client.patch(f"{U}/preferences/{italian['id']}", json={"attribute": "Thai"},
                        headers=auth(mine)).status_code == 200
    assert client.get(f"{U}/preferences", headers=A).json()["preferences"][0]["attribute"] == "Thai"


def test_client_update_and_history(client, italian):
    c = Client("http://testserver", KEY_A, http_client=client)
    assert c.update("alice", italian["id"], attribute="Mexican").attribute == "Mexican"
    assert c.update("alice", italian["id"], polarity="dislike").attribute == "Mexican"
    assert [e.op for e in c.history("alice", italian["id"]).entries] == ["insert", "update", "update"]
    with pytest.raises(NotFoundError):
        c.history("alice", "nope")
    with pytest.raises(InputError):
        c.update("alice", italian["id"])
