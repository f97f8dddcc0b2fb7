"""Polarity and observations over HTTP: a dislike is answered as data and worded as a dislike; a one-off
choice is an observation the user lists, confirms (it becomes a preference) or dismisses (erased)."""
from __future__ import annotations

from .conftest import KEY_A, auth, conversation

A = auth(KEY_A)


def _add(client, cid: str, *texts: str) -> dict:
    r = client.post("/v1/users/alice/conversations", headers=A, json=conversation(cid, *texts))
    assert r.status_code == 200, r.text
    return r.json()


def test_preferences_carry_polarity_and_read_as_the_user_meant(client):
    body = _add(client, "c1", "I can't stand Jazz.", "I always avoid Highways.", "I love Italian food.")
    by_value = {p["attribute"]: p for p in body["stored"]}
    assert set(by_value) == {"Jazz", "Highways", "Italian"}   # the value, never "not Jazz"
    assert by_value["Jazz"]["polarity"] == "dislike" and by_value["Jazz"]["display"] == "Dislikes: Jazz"
    assert by_value["Highways"]["polarity"] == "like" and by_value["Highways"]["display"] == "Avoids: Highways"
    assert by_value["Italian"]["display"] == "Italian" and by_value["Italian"]["label"] == "Favorite Cuisine"
    listed = {p["attribute"]: p for p in client.get("/v1/users/alice/preferences", headers=A).json()["preferences"]}
    assert {k: (v["polarity"], v["display"]) for k, v in listed.items()} == {
        k: (v["polarity"], v["display"]) for k, v in by_value.items()}
    hits = client.post("/v1/users/alice/recall", headers=A, json={"utterance": "some Jazz music?", "k": 3, "gate": False}).json()["hits"]
    assert any(h["preference"]["attribute"] == "Jazz" and h["preference"]["polarity"] == "dislike" for h in hits)
    exported = {p["attribute"]: p["polarity"] for p in client.get("/v1/users/alice/export", headers=A).json()["preferences"]}
    assert exported == {"Jazz": "dislike", "Highways": "like", "Italian": "like"}


def test_categories_are_answered_in_labels(client):
    body = _add(client, "c1", "I always want the lights Blue.")   # a listed colour of the typo'd lighting category
    (p,) = [p for p in body["stored"] if p["path"]["detail"] == "interior_lightning_color_preferences"]
    assert p["label"] == "Interior Lighting Color Preferences"
    assert p["category"].endswith("> Interior Lighting Color Preferences") and "Lightning" not in p["category"]


def test_a_one_off_choice_is_an_observation_listed_confirmed_or_dismissed(client, memory):
    first = _add(client, "c1", "Play some Jazz.")
    assert first["stored"] == [] and first["promoted"] == []
    (obs,) = first["observed"]
    assert (obs["attribute"], obs["polarity"], obs["user"], obs["display"]) == ("Jazz", "like", "alice", "you chose Jazz")
    assert obs["sentence"] == "Play some Jazz." and obs["conversation_id"] == "c1"
    _add(client, "c2", "Play Rock now.")
    listed = client.get("/v1/users/alice/observations", headers=A).json()
    assert listed["user"] == "alice" and {o["attribute"] for o in listed["observations"]} == {"Jazz", "Rock"}
    assert client.get("/v1/users/alice/preferences", headers=A).json()["preferences"] == []   # not preferences
    assert client.post("/v1/users/alice/recall", headers=A, json={"utterance": "Jazz or Rock?", "gate": False}).json()["hits"] == []

    rock = next(o for o in listed["observations"] if o["attribute"] == "Rock")
    r = client.post(f"/v1/users/alice/observations/{rock['id']}/confirm", headers=A)
    assert r.status_code == 200, r.text
    pref = r.json()
    assert (pref["attribute"], pref["polarity"], pref["user"]) == ("Rock", "like", "alice")
    assert [p["id"] for p in client.get("/v1/users/alice/preferences", headers=A).json()["preferences"]] == [pref["id"]]
    left = client.get("/v1/users/alice/observations", headers=A).json()["observations"]
    assert [o["attribute"] for o in left] == ["Jazz"]

    r = client.delete(f"/v1/users/alice/observations/{obs['id']}", headers=A)
    assert r.status_code == 200 and r.json()["id"] == obs["id"] and r.json()["attribute"] == "Jazz"
    assert client.get("/v1/users/alice/observations", headers=A).json()["observations"] == []
    assert [a.op for a in memory.store.audit("acme:alice")].count("dismiss") == 1


def test_unknown_observation_ids_are_not_found_naming_the_id(client):
    _add(client, "c1", "Play some Jazz.")
    for r in (client.post("/v1/users/alice/observations/nope-123/confirm", headers=A),
              client.delete("/v1/users/alice/observations/nope-123", headers=A)):
        assert r.status_code == 404, r.text
        assert r.json()["code"] == "not_found" and "nope-123" in r.json()["message"]
        assert "acme:" not in r.text
    assert len(client.get("/v1/users/alice/observations", headers=A).json()["observations"]) == 1


def test_a_choice_repeated_in_enough_conversations_is_promoted_in_the_answer(client):
    for cid in ("c1", "c2"):
        assert _add(client, cid, "Play some Jazz.")["promoted"] == []
    third = _add(client, "c3", "Play some Jazz.")
    (p,) = third["promoted"]
    assert (p["attribute"], p["polarity"], p["user"]) == ("Jazz", "like", "alice")
    assert p["id"] in {s["id"] for s in third["stored"]}
    assert [x["attribute"] for x in client.get("/v1/users/alice/preferences", headers=A).json()["preferences"]] == ["Jazz"]


def test_export_holds_the_observations_under_the_callers_user_id(client):
    _add(client, "c1", "Play some Jazz.")
    e = client.get("/v1/users/alice/export", headers=A).json()
    assert [(o["attribute"], o["user"]) for o in e["observations"]] == [("Jazz", "alice")]
    assert "acme:alice" not in str(e["observations"])


def test_forget_and_opt_out_erase_observations_over_http(client):
    _add(client, "c1", "Play some Jazz.")
    assert client.put("/v1/users/alice/opt-outs/entertainment_and_media/music", headers=A).status_code == 200
    assert client.get("/v1/users/alice/observations", headers=A).json()["observations"] == []
    assert client.delete("/v1/users/alice/opt-outs/entertainment_and_media/music", headers=A).status_code == 200
    _add(client, "c2", "Play some Jazz.")
    assert client.delete("/v1/users/alice", headers=A).status_code == 200
    assert client.get("/v1/users/alice/observations", headers=A).json()["observations"] == []
