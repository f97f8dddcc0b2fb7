"""The REST API's behaviour on one tenant: what is stored, shown, recalled, deleted, opted out, and refused."""
from __future__ import annotations

import pytest

from .conftest import KEY_A, auth, conversation

A = auth(KEY_A)
U = "/v1/users/alice"


def add(client, *texts, cid="c1", user=U):
    r = client.post(f"{user}/conversations", json=conversation(cid, *texts), headers=A)
    assert r.status_code == 200, r.text
    return r.json()


def test_add_then_list_shows_sentence_category_and_time(client, memory):
    r = add(client, "I love Italian food.", "Please play some Jazz while we drive.")
    assert sorted(d["action"] for d in r["decisions"]) == ["insert", "insert"]
    assert r["user"] == "alice"
    prefs = client.get(f"{U}/preferences", headers=A).json()["preferences"]
    by_attr = {p["attribute"]: p for p in prefs}
    assert set(by_attr) == {"Italian", "Jazz"}
    it = by_attr["Italian"]
    assert it["sentence"] == "I love Italian food."
    assert it["category"] == "Points of Interest > Restaurant > Favorite Cuisine" or it["category"].endswith("> Favorite Cuisine")
    assert it["path"] == {"main": "points_of_interest", "sub": "restaurant", "detail": "favorite_cuisine"}
    assert it["conversation_id"] == "c1" and it["created_at"] and it["user"] == "alice"
    # stored under the tenant's namespace, nowhere else
    assert {p.attribute for p in memory.store.preferences("acme:alice")} == {"Italian", "Jazz"}
    assert memory.store.preferences("alice") == []


def test_the_ingest_answer_carries_what_was_stored_as_the_list_shows_it(client):
    """A client (a voice assistant confirming "I'll remember that") needs no second request to learn what was kept."""
    r = add(client, "I love Italian food.", "Please play some Jazz while we drive.")
    listed = {p["id"]: p for p in client.get(f"{U}/preferences", headers=A).json()["preferences"]}
    assert {p["id"]: p for p in r["stored"]} == listed and len(listed) == 2
    again = add(client, "I love Italian food.", cid="c2")   # the same preference again: a pass, nothing stored
    assert [d["action"] for d in again["decisions"]] == ["pass"] and again["stored"] == []


def test_list_filtered_by_category(client):
    add(client, "I love Italian food.", "Please play some Jazz while we drive.")
    prefs = client.get(f"{U}/preferences", params={"category": "entertainment_and_media"}, headers=A).json()["preferences"]
    assert [p["attribute"] for p in prefs] == ["Jazz"]


def test_recall_returns_the_relevant_preference(client):
    add(client, "I love Italian food.", "I always fill up at PetroLux.")
    r = client.post(f"{U}/recall", json={"utterance": "any Italian food places nearby?", "k": 1, "gate": False}, headers=A)
    assert r.status_code == 200, r.text
    hits = r.json()["hits"]
    assert len(hits) == 1 and hits[0]["preference"]["attribute"] == "Italian"
    assert hits[0]["preference"]["sentence"] == "I love Italian food."
    dyn = client.post(f"{U}/recall", json={"utterance": "Italian food", "k": None, "gate": False}, headers=A)
    assert dyn.status_code == 200 and dyn.json()["hits"][0]["preference"]["attribute"] == "Italian"


def test_delete_one_preference(client, memory):
    add(client, "I love Italian food.", "Please play some Jazz while we drive.")
    prefs = client.get(f"{U}/preferences", headers=A).json()["preferences"]
    jazz = next(p for p in prefs if p["attribute"] == "Jazz")
    r = client.delete(f"{U}/preferences/{jazz['id']}", headers=A)
    assert r.status_code == 200 and r.json()["attribute"] == "Jazz"
    assert [p.attribute for p in memory.store.preferences("acme:alice")] == ["Italian"]
    again = client.delete(f"{U}/preferences/{jazz['id']}", headers=A)
    assert again.status_code == 404 and jazz["id"] in again.json()["detail"]


def test_export_is_complete_and_uses_the_callers_user_id(client):
    add(client, "I love Italian food.")
    client.put(f"{U}/opt-outs/entertainment_and_media", headers=A)
    e = client.get(f"{U}/export", headers=A).json()
    assert e["user"] == "alice" and e["opt_outs"] == ["entertainment_and_media"]
    assert [p["attribute"] for p in e["preferences"]] == ["Italian"]
    assert {a["op"] for a in e["audit"]} >= {"insert", "opt_out"}
    assert "acme" not in str(e)  # the tenant namespace is an implementation detail


def test_forget_erases_everything(client, memory):
    add(client, "I love Italian food.", "Please play some Jazz while we drive.")
    r = client.delete(U, headers=A)
    assert r.status_code == 200 and r.json() == {"user": "alice", "erased": 2}
    assert memory.store.preferences("acme:alice") == []
    assert client.get(f"{U}/preferences", headers=A).json()["preferences"] == []


def test_opt_out_purges_blocks_and_prunes_schema(client, memory):
    add(client, "I love Italian food.", "Please play some Jazz while we drive.")
    r = client.put(f"{U}/opt-outs/Music", headers=A)  # by display name
    assert r.status_code == 200, r.text
    assert r.json()["category"] == "entertainment_and_media/music"
    assert [p["attribute"] for p in r.json()["purged"]] == ["Jazz"]
    assert memory.store.opt_outs("acme:alice") == ["entertainment_and_media/music"]
    assert client.get(f"{U}/opt-outs", headers=A).json()["opt_outs"] == ["entertainment_and_media/music"]
    # a new conversation about music is not stored
    r2 = add(client, "Put on some Rock please.", cid="c2")
    assert r2["decisions"] == []  # the extractor only ever sees the pruned schema
    assert [p.attribute for p in memory.store.preferences("acme:alice")] == ["Italian"]
    # the user's schema no longer offers music; the operator's schema still does
    subs = lambda s: {f"{m['key']}/{x['key']}" for m in s["mains"] for x in m["subs"]}  # noqa: E731
    assert "entertainment_and_media/music" not in subs(client.get(f"{U}/schema", headers=A).json())
    assert "entertainment_and_media/music" in subs(client.get("/v1/schema", headers=A).json())
    # opt back in: only the exact rule is removed
    r3 = client.delete(f"{U}/opt-outs/entertainment_and_media/music", headers=A)
    assert r3.status_code == 200 and r3.json()["changed"] is True
    assert memory.store.opt_outs("acme:alice") == []
    assert client.delete(f"{U}/opt-outs/entertainment_and_media/music", headers=A).json()["changed"] is False


@pytest.mark.parametrize("method", ["put", "delete"])
def test_unknown_category_is_404_naming_it(client, memory, method):
    r = getattr(client, method)(f"{U}/opt-outs/teleportation", headers=A)
    assert r.status_code == 404 and "teleportation" in r.json()["detail"]
    assert memory.store.opt_outs("acme:alice") == []


def test_unknown_category_filter_is_422_naming_it(client):
    r = client.get(f"{U}/preferences", params={"category": "teleportation"}, headers=A)
    assert r.status_code == 422 and "teleportation" in r.json()["message"] and "category" in r.json()["message"]
    # the shape of FastAPI's own validation errors: the field named in the message and located in `detail`
    assert r.json()["message"].startswith("query field 'category':")
    assert [(d["loc"], d["type"]) for d in r.json()["detail"]] == [(["query", "category"], "unknown_category")]


@pytest.mark.parametrize("body,field", [
    ({"id": "c1"}, "turns"),
    ({"id": "c1", "turns": []}, "turns"),
    ({"id": "", "turns": [{"role": "user", "text": "I love Italian food."}]}, "id"),
    ({"id": "c1", "turns": [{"role": "robot", "text": "I love Italian food."}]}, "role"),
    ({"id": "c1", "turns": [{"role": "user", "text": ""}]}, "text"),
    ({"id": "c1", "turns": [{"role": "user", "text": "I love Italian food."}], "sneaky": 1}, "sneaky"),
])
def test_bad_conversation_is_422_naming_the_field_and_stores_nothing(client, memory, body, field):
    r = client.post(f"{U}/conversations", json=body, headers=A)
    assert r.status_code == 422
    assert field in r.json()["message"], r.json()
    assert memory.store.preferences("acme:alice") == [] and memory.store.users() == []


def test_malformed_json_is_422(client, memory):
    r = client.post(f"{U}/conversations", content=b'{"id": "c1", "turns": [', headers={**A, "Content-Type": "application/json"})
    assert r.status_code == 422 and "body" in r.json()["message"]
    assert memory.store.users() == []


@pytest.mark.parametrize("body,field", [({"utterance": ""}, "utterance"), ({"utterance": "hi", "k": 0}, "k"),
                                        ({"utterance": "hi", "k": "many"}, "k"), ({}, "utterance")])
def test_bad_recall_is_422_naming_the_field(client, body, field):
    r = client.post(f"{U}/recall", json=body, headers=A)
    assert r.status_code == 422 and field in r.json()["message"]


@pytest.mark.parametrize("user", ["acme:alice", "globex:bob", "a/b", " alice", "-x", "x" * 129])
def test_user_ids_that_could_escape_the_namespace_are_refused(client, memory, user):
    r = client.post(f"/v1/users/{user}/conversations", json=conversation("c1", "I love Italian food."), headers=A)
    assert r.status_code in (404, 422)  # "a/b" does not even route
    if r.status_code == 422:
        assert "user" in r.json()["message"]
    assert memory.store.users() == []


BAD_AUTH = [{}, {"Authorization": "Bearer wrong-key-wrong-key-123"}, {"Authorization": KEY_A}, {"Authorization": "Basic " + KEY_A}]


@pytest.mark.parametrize("method,path", [
    ("post", f"{U}/conversations"), ("post", f"{U}/recall"), ("get", f"{U}/preferences"), ("delete", f"{U}/preferences/x"),
    ("get", f"{U}/export"), ("delete", U), ("get", f"{U}/opt-outs"), ("put", f"{U}/opt-outs/music"),
    ("delete", f"{U}/opt-outs/music"), ("get", "/v1/schema"), ("get", f"{U}/schema")])
def test_every_endpoint_needs_a_valid_key(client, memory, method, path):
    kw = {"json": conversation("c1", "I love Italian food.")} if path.endswith("conversations") else {}
    for headers in BAD_AUTH:
        r = client.request(method.upper(), path, headers=headers, **kw)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", headers
    assert memory.store.users() == []


def test_openapi_documents_typed_models_and_bearer_auth(client):
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    assert set(paths["/v1/users/{user}/opt-outs/{category}"]) == {"put", "delete"}
    assert {"/v1/users/{user}/conversations", "/v1/users/{user}/recall", "/v1/users/{user}/preferences",
            "/v1/users/{user}/preferences/{pref_id}", "/v1/users/{user}/export", "/v1/users/{user}", "/v1/schema"} <= set(paths)
    schemas = spec["components"]["schemas"]
    assert set(schemas["RecallRequest"]["properties"]) == {"utterance", "k", "gate", "min_score"}
    assert "sentence" in schemas["PreferenceOut"]["properties"]
    assert any(s.get("scheme") == "bearer" for s in spec["components"]["securitySchemes"].values())


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_api_docs_load_nothing_from_outside(client, page):
    import re

    r = client.get(page)
    assert r.status_code == 200
    refs = re.findall(r"""(?:src|href)\s*[=:]\s*["']([^"']+)["']""", r.text)
    assert refs, "the docs page references its scripts"
    assert [u for u in refs if re.match(r"(?:https?:)?//", u)] == []
    for u in refs:
        assert client.get(u).status_code == 200, u


def test_page_is_served_with_a_strict_content_security_policy(client):
    r = client.get("/ui")
    assert r.status_code == 200 and "<script src=\"/ui/app.js\"" in r.text
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert client.get("/ui/app.js").status_code == 200
    assert client.get("/ui/..%2Fapp.py").status_code == 404


def test_failed_extraction_is_502_and_stores_nothing(memory):
    from fastapi.testclient import TestClient

    from boundmem.extract.base import ExtractionError
    from boundmem.service.app import create_app

    from .conftest import KEYS

    class Broken:
        def extract(self, conversation, schema):
            raise ExtractionError("model returned an invalid tool call twice")

    memory.extractor = Broken()
    with TestClient(create_app(lambda: memory, KEYS)) as c:  # also: a factory, not an instance
        r = c.post(f"{U}/conversations", json=conversation("c1", "I love Italian food."), headers=A)
    assert r.status_code == 502 and "invalid tool call" in r.json()["detail"]
    assert memory.store.users() == []


@pytest.mark.parametrize("method,path", [("delete", f"{U}/preferences/nope"), ("get", f"{U}/jobs/nope")])
def test_a_not_found_names_the_callers_user_id_never_the_stores(client, method, path):
    """The store says "for user 'acme:alice'"; the one handler for NotFoundError puts back the id the caller used."""
    r = getattr(client, method)(path, headers=A)
    body = r.json()
    assert r.status_code == 404 and body["code"] == "not_found" and "'nope'" in body["message"]
    assert "'alice'" in body["message"] and "acme" not in r.text
