"""The API's rate limits per user token (inside its tenant's) and per client address for failed authentication, and
its depth-bounded JSON. The proxy shares the code (service.deps.authenticate); tests/service/
test_proxy_limits.py checks it there."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from boundmem.service.app import create_app
from boundmem.service.limits import RateLimiter, Throttle

from .conftest import KEY_A, KEYS, FakeClock, auth

PREFS = "/v1/users/{}/preferences"


def token(c: TestClient, user: str) -> str:
    return c.post(f"/v1/users/{user}/tokens", headers=auth(KEY_A)).json()["token"]


def test_a_user_token_has_its_own_bucket_inside_the_tenants(memory):
    clock = FakeClock()
    throttle = Throttle(tenant=RateLimiter(20, 40, clock=clock), user=RateLimiter(5, 20, clock=clock))
    with TestClient(create_app(memory, KEYS, rate_limit=throttle)) as c:
        bob, carol = token(c, "bob"), token(c, "carol")
        codes = [c.get(PREFS.format("bob"), headers=auth(bob)).status_code for _ in range(120)]
        assert codes.count(200) == 20 and codes.count(429) == 100
        r = c.get(PREFS.format("bob"), headers=auth(bob))
        assert r.json()["code"] == "rate_limited" and "user token" in r.json()["message"]
        assert r.headers["Retry-After"] == "1"
        # the tenant's other users and its own key still get through: 2 + 20 taken of 40
        assert c.get(PREFS.format("carol"), headers=auth(carol)).status_code == 200
        assert c.get(PREFS.format("dave"), headers=auth(KEY_A)).status_code == 200
        clock.now += 1.0   # 5 more for bob after a second
        assert [c.get(PREFS.format("bob"), headers=auth(bob)).status_code for _ in range(6)] == [200] * 5 + [429]


def test_a_request_the_tenant_refuses_does_not_use_up_the_users_bucket(memory):
    clock = FakeClock()
    throttle = Throttle(tenant=RateLimiter(1, 3, clock=clock), user=RateLimiter(1, 2, clock=clock))
    with TestClient(create_app(memory, KEYS, rate_limit=throttle)) as c:
        bob = token(c, "bob")   # 1 of the tenant's 3
        assert c.get(PREFS.format("x"), headers=auth(KEY_A)).status_code == 200   # 2 of 3
        assert c.get(PREFS.format("bob"), headers=auth(bob)).status_code == 200   # 3 of 3; bob 1 of 2
        r = c.get(PREFS.format("bob"), headers=auth(bob))
        assert r.status_code == 429 and "tenant" in r.json()["message"]
        clock.now += 1.0   # one more for the tenant: bob still has his second
        assert c.get(PREFS.format("bob"), headers=auth(bob)).status_code == 200


def test_wrong_keys_and_forged_tokens_are_limited_per_client_address(memory):
    clock = FakeClock()
    with TestClient(create_app(memory, KEYS, rate_limit=Throttle(failures=RateLimiter(0.5, 4, clock=clock)))) as c:
        bad = [auth("wrong-key-0123456789abc"), auth("bmu1.e30.forged"), {}, auth("wrong-key-0123456789abc")]
        assert [c.get(PREFS.format("alice"), headers=h).status_code for h in bad] == [401] * 4
        r = c.get(PREFS.format("alice"), headers=auth(KEY_A))
        assert r.status_code == 429 and r.json()["code"] == "rate_limited" and r.headers["Retry-After"] == "2"
        assert "failed authentications" in r.json()["message"]
        clock.now += 2.0
        assert c.get(PREFS.format("alice"), headers=auth(KEY_A)).status_code == 200
        # good requests never count against the address
        assert {c.get(PREFS.format("alice"), headers=auth(KEY_A)).status_code for _ in range(10)} == {200}


def test_the_limits_are_on_by_default(memory):
    with TestClient(create_app(memory, KEYS)) as c:
        assert {c.get(PREFS.format("alice"), headers=auth("wrong-key-0123456789abc")).status_code
                for _ in range(40)} == {401, 429}
    with TestClient(create_app(memory, KEYS)) as c:
        bob = token(c, "bob")
        assert 429 in {c.get(PREFS.format("bob"), headers=auth(bob)).status_code for _ in range(30)}


@pytest.mark.parametrize("body", [b"[" * 100_000, b'{"id": "c1", "turns": ' + b"[" * 100 + b"]" * 100 + b"}"])
def test_a_deeply_nested_body_is_a_400_naming_the_depth_limit(client, memory, body):
    r = client.post("/v1/users/alice/conversations", content=body,
                    headers={**auth(KEY_A), "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["code"] == "max_json_depth"
    assert r.json()["limit"] == {"name": "max_json_depth", "value": 64}
    assert memory.store.users() == []
