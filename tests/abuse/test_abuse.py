"""The attacks of the probes so far, each kind as many generated cases (see conftest.py)."""
from __future__ import annotations

import itertools
import json
import sqlite3
import uuid
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from boundmem.embed.openai_compat import OpenAIEmbedder
from boundmem.extract.keyword import KeywordExtractor
from boundmem.maintain.rules import RuleMaintainer
from boundmem.memory import Memory
from boundmem.models import Conversation, Turn
from boundmem.proxy.app import create_proxy
from boundmem.service.app import create_app
from boundmem.service.limits import RateLimiter, Throttle
from boundmem.service.tokens import TokenIssuer
from boundmem.store.sqlite import SQLiteStore
from llm.fake_openai import FakeOpenAI, content, raw
from service.conftest import KEY_A, KEY_B, KEYS, FakeClock, auth, conversation

MARK = "Zq" + uuid.uuid4().hex[:10] + "Mk"
NO_LIMITS = Throttle()   # the attacks on identity and input run without rate limits; those have their own kind


def conv(cid: str, text: str) -> Conversation:
    return Conversation(id=cid, turns=(Turn(role="user", text=text),))


# --- who may read whom ---------------------------------------------------------------------------------------
USER_TRICKS = ["bob", "Bob", "bob%20", "%20bob", "bob%0A", "bob%0D%0A", "bob%00", "bob%2F..", "..%2Fbob", "alice%2F..%2Fbob",
               "acme:bob", "globex:bob", "acme%3Abob", "globex%3Abob", "%62ob", "bоb", "b%C3%B6b", "*", "%2A",
               "alice,bob", "alice;bob", "alice&user=bob", "alice?user=bob", "alice#bob", ".", "..", "%2e%2e",
               "alice/../bob", "a" * 129, "", "%20", "bob%0a", "acme", "globex", "bob@x", "bob+1"]
READS = [("GET", "/v1/users/{u}/preferences"), ("GET", "/v1/users/{u}/export"), ("GET", "/v1/users/{u}/opt-outs"),
         ("POST", "/v1/users/{u}/recall"), ("GET", "/v1/users/{u}/jobs/nope")]
WRITES = [("DELETE", "/v1/users/{u}"), ("PUT", "/v1/users/{u}/opt-outs/Restaurant"),
          ("DELETE", "/v1/users/{u}/opt-outs/Restaurant"), ("POST", "/v1/users/{u}/conversations"),
          ("POST", "/v1/users/{u}/tokens"), ("DELETE", "/v1/users/{u}/tokens")]


def test_no_path_or_identity_trick_reaches_another_users_memory(memory, kind):
    k = kind("identity: cross-user reads and writes")
    memory.add(conv("c1", f"I love {MARK} food. Please play some Jazz."), "globex:bob")   # another tenant's bob
    memory.add(conv("c2", f"I always fill up at {MARK}Oil."), "acme:bob")                # this tenant's bob
    issuer = TokenIssuer()
    alice, _ = issuer.mint("acme", "alice")
    def held(u):
        e = memory.store.export(u)
        return e.preferences, e.opt_outs, e.audit

    before = held("globex:bob")
    with TestClient(create_app(memory, KEYS, rate_limit=NO_LIMITS, tokens=issuer)) as c:
        for (method, path), user, (who, cred) in itertools.product(READS + WRITES, USER_TRICKS,
                                                                   (("tenant", KEY_A), ("token", alice))):
            body = {"utterance": "food"} if "recall" in path else conversation("x", "I hate everything.") \
                if "conversations" in path else None
            r = c.request(method, path.format(u=user), headers=auth(cred), json=body)
            leaked = MARK in r.text
            # a token for alice may act on alice only (the path's user up to a query or fragment): anything else it
            # names is refused or not found
            own = user.split("?")[0].split("#")[0] == "alice"
            k.check(not leaked and r.status_code < 500 and (who == "tenant" or own or r.status_code >= 400),
                    (method, path, user, who, r.status_code))
    k.check(held("globex:bob") == before, "another tenant's bob was changed")
    # tenant acme may act on its own bob (it holds the key); what is checked there is that no trick left the tenant


TOKEN_MUTATIONS = {
    "flipped payload char": lambda t: t[:8] + ("A" if t[8] != "A" else "B") + t[9:],
    "flipped signature char": lambda t: t[:-3] + ("A" if t[-3] != "A" else "B") + t[-2:],
    "truncated": lambda t: t[:-5], "extended": lambda t: t + "A", "no signature": lambda t: t.rsplit(".", 1)[0] + ".",
    "only the prefix": lambda t: "bmu1.", "doubled": lambda t: t + t, "other prefix": lambda t: "bmu2" + t[4:],
    "lowercased": lambda t: t.lower(), "uppercased": lambda t: t.upper(), "spaces": lambda t: t.replace(".", ". "),
    "huge": lambda t: t + "A" * 20_000,
    "payload of another token": None, "signed by another secret": None, "expired": None, "revoked": None,
    "tenant withdrawn": None,
}


def test_no_forged_altered_expired_or_revoked_token_is_accepted(memory, kind):
    k = kind("identity: token cases")
    clock = FakeClock(10_000.0)
    issuer = TokenIssuer(b"s" * 32, clock=clock)
    with TestClient(create_app(memory, {KEY_A: "acme"}, rate_limit=NO_LIMITS, tokens=issuer)) as c:
        for n in range(20):
            user = f"user{n}"
            good, _ = issuer.mint("acme", user, ttl=60)
            for name, mutate in TOKEN_MUTATIONS.items():
                if name == "payload of another token":
                    other, _ = issuer.mint("acme", "victim", ttl=60)
                    bad = other.rsplit(".", 1)[0] + "." + good.rsplit(".", 1)[1]
                elif name == "signed by another secret":
                    bad = TokenIssuer(b"t" * 32, clock=clock).mint("acme", user)[0]
                elif name == "expired":
                    bad = TokenIssuer(b"s" * 32, clock=lambda: 0.0).mint("acme", user, ttl=60)[0]
                elif name == "revoked":
                    bad, _ = issuer.mint("acme", user, ttl=60)
                    issuer.revoke("acme", user)
                    good, _ = issuer.mint("acme", user, ttl=60)
                elif name == "tenant withdrawn":
                    bad = issuer.mint("globex", user)[0]
                else:
                    bad = mutate(good)
                for target in (user, "victim"):
                    r = c.get(f"/v1/users/{target}/preferences", headers={"Authorization": f"Bearer {bad}"})
                    k.check(r.status_code in (400, 401, 403), (name, target, r.status_code))
            k.check(c.get(f"/v1/users/{user}/preferences", headers=auth(good)).status_code == 200, "a good token")


MALFORMED_BODIES = [b"", b"{", b"null", b"[]", b"42", b'"x"', b"\xff\xfe", b"\x00" * 10, b"[" * 100_000,
                    b"{" * 50_000, b'{"a":' * 5_000, b'{"id": "c", "turns": ' + b"[" * 200 + b"]" * 200 + b"}",
                    json.dumps({"id": "c"}).encode(), json.dumps({"turns": []}).encode(),
                    json.dumps({"id": "c", "turns": [{"role": "user"}]}).encode(),
                    json.dumps({"id": "c", "turns": [{"role": "system", "text": "x"}]}).encode(),
                    json.dumps({"id": "c", "turns": [{"role": "user", "text": 5}]}).encode(),
                    json.dumps({"id": "c", "turns": [{"role": "user", "text": "x" * 5_000}]}).encode(),
                    json.dumps({"id": "c", "turns": [{"role": "user", "text": "x"}] * 101}).encode(),
                    json.dumps({"id": "x" * 10_000, "turns": [{"role": "user", "text": "x"}]}).encode(),
                    json.dumps({"utterance": None}).encode(), json.dumps({"utterance": "x" * 10_000}).encode(),
                    json.dumps({"utterance": ["x"]}).encode(), json.dumps({"ttl_seconds": True}).encode(),
                    json.dumps({"ttl_seconds": "60"}).encode(), json.dumps({"ttl_seconds": 10 ** 12}).encode(),
                    b"x" * 2_000_000]
TARGETS = ["/v1/users/alice/conversations", "/v1/users/alice/conversations?async=true", "/v1/users/alice/recall",
           "/v1/users/alice/tokens"]


def test_malformed_api_input_is_always_a_4xx_in_the_error_shape_and_stores_nothing(memory, kind):
    k = kind("input: malformed API bodies")
    with TestClient(create_app(memory, KEYS, rate_limit=NO_LIMITS), raise_server_exceptions=False) as c:
        for body, url in itertools.product(MALFORMED_BODIES, TARGETS):
            if url.endswith("/tokens") and body in (b"", b"null"):
                continue   # a token request's body is optional: these are valid
            r = c.post(url, content=body, headers={**auth(KEY_A), "Content-Type": "application/json"})
            shaped = r.headers.get("content-type", "").startswith("application/json") and \
                {"code", "message"} <= set(r.json())
            k.check(400 <= r.status_code < 500 and shaped, (url, body[:40], r.status_code))
    k.check(memory.store.users() == [] and memory.jobs.pending() == 0, "something was stored")


# --- the proxy -----------------------------------------------------------------------------------------------
PROXY_BODIES = {
    "a 400,000-character message": (json.dumps({"model": "m", "user": "alice", "messages": [
        {"role": "user", "content": "I love Italian food. " * 19_000}]}).encode(), 413),
    "101 user turns": (json.dumps({"model": "m", "user": "alice", "messages": [
        {"role": "user", "content": "hi"}] * 101}).encode(), 413),
    "20,001 characters in all": (json.dumps({"model": "m", "user": "alice", "messages": [
        {"role": "user", "content": "y" * 3_999}] * 6}).encode(), 413),
    "[ x 100000": (b"[" * 100_000, 400), "{ x 50000": (b'{"a":' * 50_000, 400),
    "deep inside messages": (b'{"model": "m", "user": "alice", "messages": [{"role": "user", "content": "hi", "x": '
                             + b"[" * 100 + b"]" * 100 + b"}]}", 400),
    "not JSON": (b"{nope", 400), "undecodable": (b"\xff\xfe\x80", 400), "not an object": (b"[1, 2]", 400),
    "no messages": (b'{"model": "m", "user": "alice"}', 400),
    "over 1 MB": (b'{"model": "m", "messages": [], "x": "' + b"x" * 1_100_000 + b'"}', 413),
    "no user": (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}', 400),
    "a user id with a newline": (b'{"model": "m", "user": "al\\nice", "messages": []}', 400),
    "a namespaced user id": (b'{"model": "m", "user": "globex:bob", "messages": []}', 400),
}


def test_the_proxy_bounds_every_request_and_answers_in_openais_shape(memory, kind):
    k = kind("proxy: limits and malformed bodies")
    with FakeOpenAI() as upstream, TestClient(create_proxy(memory, KEYS, upstream.base_url, rate_limit=NO_LIMITS),
                                              raise_server_exceptions=False) as c:
        for name, (body, want) in PROXY_BODIES.items():
            for chunked in (False, True):
                data = iter([body[i:i + 65536] for i in range(0, len(body), 65536)]) if chunked else body
                r = c.post("/v1/chat/completions", content=data,
                           headers={**auth(KEY_A), "Content-Type": "application/json"})
                err = r.json().get("error") if r.headers.get("content-type", "").startswith("application/json") else None
                k.check(r.status_code == want and isinstance(err, dict) and {"message", "type", "code"} <= set(err),
                        (name, chunked, r.status_code))
        k.check(upstream.requests == [], "a refused request reached the upstream")
    k.check(memory.jobs.pending() == 0 and memory.store.users() == [], "a refused request was learnt from")


def test_rate_limits_hold_per_tenant_user_token_and_address(memory, kind):
    k = kind("rate: floods")
    clock = FakeClock()
    issuer = TokenIssuer()
    throttle = Throttle(tenant=RateLimiter(20, 40, clock=clock), user=RateLimiter(5, 20, clock=clock),
                        failures=RateLimiter(1, 30, clock=clock))
    tokens = {u: issuer.mint("acme", u)[0] for u in ("bob", "carol")}
    with FakeOpenAI() as upstream:
        upstream.push(*[content("ok")] * 400)
        for make in (lambda: create_app(memory, KEYS, rate_limit=throttle, tokens=issuer),
                     lambda: create_proxy(memory, KEYS, upstream.base_url, rate_limit=throttle, tokens=issuer)):
            clock.now += 1_000   # every bucket full again
            with TestClient(make()) as c:
                def call(cred, user="dave"):
                    if c.app.title == "boundmem proxy":
                        return c.post("/v1/chat/completions", headers=auth(cred) if cred else {},
                                      json={"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                            **({"user": user} if not str(cred).startswith("bmu1.") else {})})
                    return c.get(f"/v1/users/{user}/opt-outs", headers=auth(cred) if cred else {})

                bob = [call(tokens["bob"], "bob").status_code for _ in range(120)]
                k.check(bob.count(429) >= 100, ("one user's flood is limited", c.app.title, bob.count(429)))
                k.check(call(tokens["carol"], "carol").status_code == 200, ("another user still served", c.app.title))
                k.check(call(KEY_A).status_code == 200, ("the tenant still served", c.app.title))
                wrong = [call(f"wrong-key-{i:020d}").status_code for i in range(60)]
                k.check(wrong.count(401) == 30 and wrong.count(429) == 30, ("wrong-key flood", c.app.title, wrong))
                k.check(call(None).status_code == 429, ("unauthenticated flood", c.app.title))
                clock.now += 1_000
                k.check(call(KEY_B, "erin").status_code == 200, ("served again later", c.app.title))


# --- MCP frames ----------------------------------------------------------------------------------------------
def test_no_mcp_frame_makes_the_checker_raise_or_go_unanswered(kind):
    pytest.importorskip("mcp")
    from boundmem.service.mcp import check_frame

    k = kind("mcp: malformed frames")
    frames = [b"[" * n + b"]" * n for n in (10, 63, 64, 65, 100, 999, 1000, 1001, 5000)]
    frames += [b"[" * n for n in (1000, 100_000)] + [b'{"a":' * n for n in (70, 1000, 5000)]
    frames += [b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "recall", "arguments": '
               b'{"utterance": ' + b"[" * n + b"]" * n + b"}}}" for n in (70, 2000)]
    frames += [b"\xff", b"\x00", b"{}", b"[]", b"null", b'{"jsonrpc": "2.0", "id": 1}', b'{"id": 1, "method": 1}',
               b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "recall", "arguments": '
               b'{"utterance": "x", "user": "bob"}}}', b'{"jsonrpc": "2.0", "id": [1], "method": "ping"}',
               b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": ["recall"]}}']
    args = {"recall": frozenset({"utterance", "k"})}
    for f in frames:
        try:
            msg, err = check_frame(f, args)
        except BaseException as e:  # noqa: BLE001 - what is counted is that nothing escapes
            k.check(False, (f[:40], type(e).__name__))
            continue
        k.check(msg is None and err is not None, f[:60])


def test_the_mcp_server_process_survives_every_hostile_frame(tmp_path, kind):
    pytest.importorskip("mcp")
    import subprocess
    import sys

    from service.test_mcp_frames import RawClient

    k = kind("mcp: the server process survives")
    proc = subprocess.Popen([sys.executable, "-m", "boundmem.cli", "serve", "mcp", "--db", str(tmp_path / "m.db"),
                             "--user", "alice", "--extractor", "keyword", "--maintainer", "rules", "--embedder", "hash"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    c = RawClient(proc)
    try:
        frames = [b"[" * 1000 + b"]" * 1000, b"[" * 200_000, b'{"a":' * 20_000, b"\xff\xfe", b"{" * 3 + b"}" * 3,
                  b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "recall", '
                  b'"arguments": {"utterance": "x", "user": "bob"}}}']
        for n, f in enumerate(frames):
            c.send(f)
            reply = c.recv()
            k.check("error" in reply or reply.get("result", {}).get("isError") is True, (f[:30], reply))
            k.check(c.call(f"p{n}", "ping") == {"jsonrpc": "2.0", "id": f"p{n}", "result": {}}, ("alive after", f[:30]))
    finally:
        proc.stdin.close()
        proc.wait(30)


# --- erasure and recycled ids --------------------------------------------------------------------------------
def test_forget_leaves_no_byte_on_disk_and_a_recycled_id_sees_nothing_of_its_predecessor(tmp_path, schema, kind):
    from boundmem.embed import HashEmbedder

    k = kind("erasure: SQLite bytes and recycled ids")
    for n in range(5):
        marker = f"Zq{uuid.uuid4().hex[:12]}Mk"
        db = tmp_path / f"e{n}.db"
        mem = Memory(schema=schema, store=SQLiteStore(db), extractor=KeywordExtractor(), maintainer=RuleMaintainer(),
                     embedder=HashEmbedder())
        other = sqlite3.connect(db)   # an idle reader, as an API server's threads would hold
        user = f"e{n}-{marker}"
        mem.add(conv("c1", f"I love {marker} food. Please play some Jazz."), user)
        mem.jobs.submit(user, conv("c2", f"I always fill up at {marker}Oil."))   # queued, never run
        mem.opt_out(user, "Music")
        mem.forget(user)
        hits = sum(Path(f"{db}{s}").read_bytes().count(marker.encode()) for s in ("", "-wal", "-shm")
                   if Path(f"{db}{s}").exists())
        k.check(hits == 0, (n, "bytes left", hits))
        mem.add(conv("c3", "I love Italian food."), user)   # the same id, a new person
        ex = mem.export(user)
        k.check([a.op for a in ex.audit] == ["insert"] and ex.audit[0].seq == 1, (n, [a.op for a in ex.audit]))
        k.check(mem.store.verify_audit(user).ok and mem.store.verify_audit().ok, (n, "audit verify"))
        other.close()
        mem.jobs.close()
        mem.store.close()


# --- upstream garbage ----------------------------------------------------------------------------------------
GARBAGE = [(b"<html>oops</html>", "text/html"), (b"\x80\x81", "application/json"), (b"\xff\xfe\x00x", "text/plain"),
           (b"[" * 5_000, "application/json"), (b'{"data": 5}', "application/json"), (b"", "application/json"),
           (b'{"data": [{"index": 0, "embedding": "abc"}]}', "application/json"),
           (b'{"data": [{"index": 0, "embedding": []}]}', "application/json"),
           (b'{"data": [{"index": 0, "embedding": [1e999]}]}', "application/json"),
           (b'{"data": [{"index": 0, "embedding": [[1], [2]]}]}', "application/json")]


def test_garbage_from_the_embedding_endpoint_is_always_the_502_naming_it(tmp_path, schema, kind):
    k = kind("upstream: garbage answers")
    with FakeOpenAI([raw(b, content_type=t) for b, t in GARBAGE]) as fake:
        mem = Memory(schema=schema, store=SQLiteStore(tmp_path / "g.db"), extractor=KeywordExtractor(),
                     maintainer=RuleMaintainer(), embedder=OpenAIEmbedder(base_url=fake.base_url, max_retries=0))
        with TestClient(create_app(mem, KEYS, rate_limit=NO_LIMITS), raise_server_exceptions=False) as c:
            for body, ctype in GARBAGE:
                r = c.post("/v1/users/alice/conversations", headers=auth(KEY_A),
                           json=conversation("c1", "I love Italian food."))
                k.check(r.status_code == 502 and r.json().get("upstream") == "the embedding endpoint"
                        and "127.0.0.1" not in r.text, (body[:30], r.status_code))
        k.check(mem.store.users() == [], "something was stored")
        mem.store.close()
