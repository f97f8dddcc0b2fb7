"""Broken object-level authorization (OWASP API1): tenant B, with its own valid key, must not see or change
anything of tenant A's, whichever user id or preference id it names."""
from __future__ import annotations

import pytest

from .conftest import KEY_A, KEY_B, auth, conversation

A, B = auth(KEY_A), auth(KEY_B)


@pytest.fixture()
def seeded(client, memory):
    """Tenant A's alice holds two preferences and one opt-out; returns (her preference ids, a snapshot of her data)."""
    r = client.post("/v1/users/alice/conversations", headers=A,
                    json=conversation("c1", "I love Italian food.", "Please play some Jazz while we drive."))
    assert r.status_code == 200
    assert client.put("/v1/users/alice/opt-outs/navigation_and_routing", headers=A).status_code == 200
    ids = [p.id for p in memory.store.preferences("acme:alice")]
    assert len(ids) == 2
    return ids, snapshot(memory)


def snapshot(memory):
    e = memory.store.export("acme:alice")
    return ([p.model_dump() for p in e.preferences], e.opt_outs, len(e.audit))


def test_b_listing_recalling_exporting_alice_sees_only_its_own_empty_user(client, memory, seeded):
    ids, before = seeded
    for r in (client.get("/v1/users/alice/preferences", headers=B),
              client.post("/v1/users/alice/recall", json={"utterance": "Italian food and Jazz", "k": 10}, headers=B),
              client.get("/v1/users/alice/export", headers=B), client.get("/v1/users/alice/opt-outs", headers=B)):
        assert r.status_code == 200
        assert not any(i in r.text for i in ids)
        assert "Italian" not in r.text and "Jazz" not in r.text and "navigation_and_routing" not in r.text
    assert snapshot(memory) == before


@pytest.mark.parametrize("b_user", ["alice", "bob"])
def test_b_cannot_delete_a_preference_of_a_through_any_of_its_own_user_paths(client, memory, seeded, b_user):
    ids, before = seeded
    for pid in ids:
        r = client.delete(f"/v1/users/{b_user}/preferences/{pid}", headers=B)
        assert r.status_code == 404
        assert "Italian" not in r.text and "acme" not in r.text
    assert snapshot(memory) == before


def test_b_forget_opt_out_opt_in_and_add_for_alice_leave_a_untouched(client, memory, seeded):
    _, before = seeded
    gone = client.delete("/v1/users/alice", headers=B)   # B holds no alice: not found, as in Memory and on the CLI
    assert gone.status_code == 404 and gone.json()["code"] == "not_found"
    assert "Italian" not in gone.text and "acme" not in gone.text
    assert client.put("/v1/users/alice/opt-outs/points_of_interest", headers=B).json()["purged"] == []
    assert client.delete("/v1/users/alice/opt-outs/navigation_and_routing", headers=B).json()["changed"] is False
    assert client.post("/v1/users/alice/conversations", json=conversation("c9", "I like Mexican food."), headers=B).status_code == 200
    assert snapshot(memory) == before
    assert [p.attribute for p in memory.store.preferences("globex:alice")] == []  # opted out of POI, so nothing kept
    # and A still sees exactly its own
    mine = client.get("/v1/users/alice/preferences", headers=A).json()["preferences"]
    assert {p["attribute"] for p in mine} == {"Italian", "Jazz"}


def test_b_user_schema_is_not_pruned_by_a_opt_outs(client, seeded):
    s = client.get("/v1/users/alice/schema", headers=B).json()
    assert "navigation_and_routing" in {m["key"] for m in s["mains"]}
    s = client.get("/v1/users/alice/schema", headers=A).json()
    assert "navigation_and_routing" not in {m["key"] for m in s["mains"]}


@pytest.mark.parametrize("path", ["/v1/users/acme:alice/preferences", "/v1/users/acme%3Aalice/preferences",
                                  "/v1/users/acme%3Aalice/export"])
def test_b_cannot_name_a_namespaced_user(client, seeded, path):
    r = client.get(path, headers=B)
    assert r.status_code == 422 and "user" in r.json()["message"]
    assert "Italian" not in r.text


@pytest.fixture()
def observed(client, memory):
    """Tenant A's alice holds one observation (a one-off choice); returns its id."""
    r = client.post("/v1/users/alice/conversations", headers=A, json=conversation("c1", "Play some Jazz."))
    assert r.status_code == 200 and len(r.json()["observed"]) == 1
    (o,) = memory.observations("acme:alice")
    return o.id


def test_b_sees_no_observation_of_a_and_cannot_confirm_or_dismiss_one(client, memory, observed):
    r = client.get("/v1/users/alice/observations", headers=B)
    assert r.status_code == 200 and r.json() == {"user": "alice", "observations": []}
    for b_user in ("alice", "bob"):
        for r in (client.post(f"/v1/users/{b_user}/observations/{observed}/confirm", headers=B),
                  client.delete(f"/v1/users/{b_user}/observations/{observed}", headers=B)):
            assert r.status_code == 404, r.text
            assert "Jazz" not in r.text and "acme" not in r.text
    assert [o.id for o in memory.observations("acme:alice")] == [observed]
    assert memory.store.preferences("acme:alice") == []
    assert not [u for u in memory.store.users() if u.startswith("globex:")]   # nothing written for B
    assert "Jazz" not in client.get("/v1/users/alice/export", headers=B).text


def test_another_user_of_the_same_tenant_cannot_reach_alices_observation(client, memory, observed):
    for r in (client.get("/v1/users/bob/observations", headers=A),
              client.post(f"/v1/users/bob/observations/{observed}/confirm", headers=A),
              client.delete(f"/v1/users/bob/observations/{observed}", headers=A)):
        assert r.status_code in (200, 404) and "Jazz" not in r.text
    assert [o.id for o in memory.observations("acme:alice")] == [observed]
