"""Per-user access: the tenant key mints short-lived tokens for one user; a token reads, changes and forgets only
that user, cannot mint tokens, and stops working when it expires or is revoked."""
from __future__ import annotations

import pytest

from .conftest import KEY_A, KEY_B, KEYS, FakeClock, auth, conversation

A = auth(KEY_A)


@pytest.fixture()
def clock():
    return FakeClock(1_800_000_000.0)


@pytest.fixture()
def tc(memory, clock):
    from fastapi.testclient import TestClient

    from boundmem.service.app import create_app
    from boundmem.service.tokens import TokenIssuer

    issuer = TokenIssuer(b"k" * 32, clock=clock, default_ttl=600, max_ttl=3600)
    with TestClient(create_app(memory, KEYS, tokens=issuer)) as c:
        yield c


def mint(c, user: str, headers=A, **body) -> str:
    r = c.post(f"/v1/users/{user}/tokens", headers=headers, json=body or None)
    assert r.status_code == 201, r.text
    return r.json()["token"]


@pytest.fixture()
def two_users(tc, memory):
    for user, texts in (("alice", ["I love Italian food."]),
                        ("bob", ["Please play some Jazz while we drive.", "Play some Rock."])):   # + an observation
        assert tc.post(f"/v1/users/{user}/conversations", headers=A, json=conversation("c1", *texts)).status_code == 200
    assert tc.put("/v1/users/bob/opt-outs/navigation_and_routing", headers=A).status_code == 200
    return memory.store.export("acme:bob").model_dump(exclude={"exported_at"})


def test_minted_token_and_page_link(tc):
    r = tc.post("/v1/users/alice/tokens", headers=A, json={"ttl_seconds": 120})
    assert r.status_code == 201
    d = r.json()
    assert d["user"] == "alice" and d["token"].startswith("bmu1.")
    assert d["page_url"].endswith("/ui#token=" + d["token"])
    assert KEY_A not in d["page_url"] and KEY_A not in r.text   # the tenant key never goes into a URL
    me = tc.get("/v1/whoami", headers=auth(d["token"])).json()
    assert me["kind"] == "user" and me["user"] == "alice" and me["expires_at"]
    assert tc.get("/v1/whoami", headers=A).json() == {"kind": "tenant", "user": None, "expires_at": None}


def test_a_token_for_alice_reads_and_changes_only_alice(tc, memory, two_users):
    bob_before = two_users
    t = auth(mint(tc, "alice"))
    mine = tc.get("/v1/users/alice/preferences", headers=t)
    assert mine.status_code == 200 and [p["attribute"] for p in mine.json()["preferences"]] == ["Italian"]
    assert tc.get("/v1/users/alice/export", headers=t).status_code == 200
    assert tc.get("/v1/schema", headers=t).status_code == 200
    bob_pref = memory.store.preferences("acme:bob")[0].id
    bob_obs = memory.observations("acme:bob")[0].id
    for method, path, body in (("GET", "/v1/users/bob/preferences", None), ("GET", "/v1/users/bob/export", None),
                               ("GET", "/v1/users/bob/opt-outs", None), ("GET", "/v1/users/bob/schema", None),
                               ("POST", "/v1/users/bob/recall", {"utterance": "Jazz music", "k": 5}),
                               ("POST", "/v1/users/bob/conversations", conversation("x", "I like Mexican food.")),
                               ("DELETE", f"/v1/users/bob/preferences/{bob_pref}", None),
                               ("DELETE", f"/v1/users/alice/preferences/{bob_pref}", None),
                               ("PUT", "/v1/users/bob/opt-outs/entertainment_and_media", None),
                               ("DELETE", "/v1/users/bob/opt-outs/navigation_and_routing", None),
                               ("DELETE", "/v1/users/bob", None),
                               ("GET", "/v1/users/bob/observations", None),
                               ("POST", f"/v1/users/bob/observations/{bob_obs}/confirm", None),
                               ("DELETE", f"/v1/users/bob/observations/{bob_obs}", None),
                               ("POST", f"/v1/users/alice/observations/{bob_obs}/confirm", None),
                               ("DELETE", f"/v1/users/alice/observations/{bob_obs}", None)):
        r = tc.request(method, path, headers=t, json=body)
        assert r.status_code in (403, 404), (method, path, r.status_code)
        assert "Jazz" not in r.text and "Rock" not in r.text
        assert r.json()["code"] in ("forbidden", "not_found") and r.json()["message"]
    assert memory.store.export("acme:bob").model_dump(exclude={"exported_at"}) == bob_before
    # and it can forget its own user
    assert tc.delete("/v1/users/alice", headers=t).json()["erased"] == 1


def test_a_user_token_cannot_mint_or_revoke_tokens(tc):
    t = auth(mint(tc, "alice"))
    for user in ("alice", "bob"):
        r = tc.post(f"/v1/users/{user}/tokens", headers=t)
        assert r.status_code == 403 and r.json()["code"] == "forbidden"
        assert tc.delete(f"/v1/users/{user}/tokens", headers=t).status_code == 403


def test_expired_tokens_are_refused(tc, clock):
    t = auth(mint(tc, "alice", ttl_seconds=60))
    clock.now += 59
    assert tc.get("/v1/users/alice/preferences", headers=t).status_code == 200
    clock.now += 1
    r = tc.get("/v1/users/alice/preferences", headers=t)
    assert r.status_code == 401 and "expired" in r.json()["message"] and r.json()["code"] == "unauthorized"
    r = tc.post("/v1/users/alice/tokens", headers=A, json={"ttl_seconds": 3601})   # over the server's maximum
    assert r.status_code == 422 and "3600" in r.json()["message"]
    assert r.json()["detail"][0]["loc"] == ["body", "ttl_seconds"] and "ttl_seconds" in r.json()["message"]


def test_revoked_tokens_are_refused_and_new_ones_work(tc):
    old1, old2 = auth(mint(tc, "alice")), auth(mint(tc, "alice"))
    bobs = auth(mint(tc, "bob"))
    assert tc.delete("/v1/users/alice/tokens", headers=A).json() == {"user": "alice", "revoked": True}
    for t in (old1, old2):
        r = tc.get("/v1/users/alice/preferences", headers=t)
        assert r.status_code == 401 and "revoked" in r.json()["message"]
    assert tc.get("/v1/users/bob/preferences", headers=bobs).status_code == 200   # only alice's were revoked
    assert tc.get("/v1/users/alice/preferences", headers=auth(mint(tc, "alice"))).status_code == 200


def test_forged_altered_and_foreign_tokens_are_refused(tc, memory):
    import base64
    import json

    from boundmem.service.tokens import TokenIssuer

    token = mint(tc, "alice")
    head, payload, sig = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["u"] = "bob"
    forged_payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    other_secret, _ = TokenIssuer(b"z" * 32).mint("acme", "bob")
    for bad in (f"{head}.{forged_payload}.{sig}", token[:-3] + "abc", other_secret, "bmu1.garbage", "bmu1...",
                f"{head}.{payload}.{sig[:-1]}\u00e9", f"{head}.\u00e9{payload}.{sig}", f"{token}.x"):
        r = tc.get("/v1/users/bob/preferences", headers={"Authorization": f"Bearer {bad}".encode("latin-1")})
        assert r.status_code == 401 and r.json()["code"] == "unauthorized", bad


def test_tokens_belong_to_their_tenant(memory, clock):
    """Tenant B mints for 'alice' and gets its own alice; a token outlives no withdrawn tenant key."""
    from fastapi.testclient import TestClient

    from boundmem.service.app import create_app
    from boundmem.service.tokens import TokenIssuer

    issuer = TokenIssuer(b"k" * 32, clock=clock)
    with TestClient(create_app(memory, KEYS, tokens=issuer)) as c:
        c.post("/v1/users/alice/conversations", headers=A, json=conversation("c1", "I love Italian food."))
        b_alice = auth(mint(c, "alice", headers=auth(KEY_B)))
        assert c.get("/v1/users/alice/preferences", headers=b_alice).json()["preferences"] == []
        a_alice = mint(c, "alice")
    with TestClient(create_app(memory, {KEY_B: "globex"}, tokens=issuer)) as c:   # acme's key withdrawn
        assert c.get("/v1/users/alice/preferences", headers=auth(a_alice)).status_code == 401
