"""The smaller findings of the probes, each reproduced: keys that can never authenticate, loosely typed token
lifetimes, credentials and user ids in the logs, Retry-After per route, the tenant namespace in a job's error."""
from __future__ import annotations

import json
import logging
import sqlite3

import pytest
from fastapi.testclient import TestClient

from boundmem.service.app import create_app
from boundmem.service.auth import KeyRing, KeysFileError

from .conftest import KEY_A, KEYS, auth, conversation


@pytest.mark.parametrize("key, needle", [
    ("bmu1.looks-like-a-token-0123", "looks like a user token"),
    ("key-with-a-trailing-space-0123 ", "whitespace"),
    (" key-with-a-leading-space-0123", "whitespace"),
    ("key-with-a\ttab-inside-0123456", "whitespace"),
    ("key-with-a-newline-0123456789\n", "whitespace"),
    ("key-with-non-ascii-ü-0123456789", "non-ASCII"),
])
def test_a_key_no_client_could_ever_authenticate_with_is_refused_when_loaded(tmp_path, key, needle):
    with pytest.raises(KeysFileError, match=needle):
        KeyRing({key: "acme"})
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({key: "acme"}))
    with pytest.raises(KeysFileError, match=needle):
        KeyRing.load(path)


@pytest.mark.parametrize("ttl", [True, "60", 60.0, 1.5])
def test_a_token_lifetime_must_be_a_json_integer(client, ttl):
    r = client.post("/v1/users/alice/tokens", json={"ttl_seconds": ttl}, headers=auth(KEY_A))
    assert r.status_code == 422 and "ttl_seconds" in r.json()["message"], r.text
    assert client.post("/v1/users/alice/tokens", json={"ttl_seconds": 60}, headers=auth(KEY_A)).status_code == 201


def test_a_credential_in_the_query_string_never_reaches_the_access_log():
    from boundmem.service.accesslog import PseudonymousAccessLog

    f = PseudonymousAccessLog(b"k" * 32)
    out = f.redact(f"/v1/users/alice/preferences?api_key={KEY_A}&category=x&token=bmu1.a.b&access_token=zz")
    assert KEY_A not in out and "bmu1.a.b" not in out and "zz" not in out and "alice" not in out
    assert "category=x" in out and out.count("[redacted]") == 3


def test_the_error_log_pseudonymises_user_ids_like_the_access_log(memory, caplog):
    """the access log showed pseudonyms, the error log raw ids (paths and the store's 'tenant:user')."""
    from boundmem.service import accesslog

    f = accesslog.install()
    try:
        def boom(*a, **kw):
            from boundmem.errors import StoreError

            raise StoreError("store on fire for user 'acme:alice'")   # logged with its path and traceback

        memory.recall = boom
        with caplog.at_level(logging.WARNING), \
                TestClient(create_app(memory, KEYS), raise_server_exceptions=False) as c:
            r = c.post("/v1/users/alice/recall", json={"utterance": "hi"}, headers=auth(KEY_A))
            assert r.status_code == 500
            logging.getLogger("boundmem.jobs").warning("job %s failed: %s", "j1", "no user 'acme:alice'")
        text = "\n".join(rec.getMessage() + (rec.exc_text or "") for rec in caplog.records)
        assert "fire" in text and "j1" in text
        assert "alice" not in text and f.pseudonym("alice") in text, text
    finally:
        if getattr(f, "uninstall", None):
            f.uninstall()


def test_retry_after_is_the_same_on_every_route_for_the_same_busy_store(tmp_path, schema):
    """5 s on the synchronous routes (the store's hint), 2 s where SQLite itself said "locked"."""
    from boundmem.embed import HashEmbedder
    from boundmem.extract.keyword import KeywordExtractor
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.memory import Memory
    from boundmem.store.sqlite import SQLiteStore

    path = tmp_path / "busy.db"
    store = SQLiteStore(path, timeout=0.2)
    mem = Memory(schema=schema, store=store, extractor=KeywordExtractor(), maintainer=RuleMaintainer(),
                 embedder=HashEmbedder())
    other = sqlite3.connect(path, isolation_level=None)
    try:
        with TestClient(create_app(mem, KEYS)) as c:
            assert c.post("/v1/users/alice/conversations", json=conversation("c0", "I love Italian food."),
                          headers=auth(KEY_A)).status_code == 200
            other.execute("BEGIN IMMEDIATE")
            answers = [c.post("/v1/users/alice/conversations", json=conversation("c1", "Jazz please."), headers=auth(KEY_A)),
                       c.post("/v1/users/alice/conversations?async=true", json=conversation("c2", "Jazz please."),
                              headers=auth(KEY_A)),
                       c.delete("/v1/users/alice", headers=auth(KEY_A))]
            other.execute("ROLLBACK")
        assert [r.status_code for r in answers] == [503] * 3, [r.text for r in answers]
        assert {r.headers["Retry-After"] for r in answers} == {"2"}
    finally:
        other.close()
        mem.jobs.close()
        store.close()


def test_a_failed_jobs_error_never_shows_the_tenant_namespace(memory, monkeypatch):
    def broken(conversation, user, then=None):
        raise ValueError(f"cannot ingest for user {user!r}")

    monkeypatch.setattr(memory, "add", broken)
    with TestClient(create_app(memory, KEYS)) as c:
        job = c.post("/v1/users/alice/conversations?async=true", json=conversation("c1", "I love Italian food."),
                     headers=auth(KEY_A)).json()
        memory.jobs.wait(job["id"])
        r = c.get(job["url"], headers=auth(KEY_A)).json()
    assert r["status"] == "failed" and "'alice'" in r["error"] and "acme" not in r["error"]


def test_a_write_to_a_server_on_a_read_replica_is_a_503_naming_it(memory, monkeypatch):
    """A server pointed at a streaming replica answers reads; a write is refused in words, not a 500."""
    from boundmem.store.postgres import ReadOnlyReplica

    def refuse(*_a, **_k):
        raise ReadOnlyReplica("the store is a streaming replica (hot standby): it serves reads only")

    monkeypatch.setattr(memory, "add", refuse)
    with TestClient(create_app(memory, KEYS)) as c:
        r = c.post("/v1/users/alice/conversations", json=conversation("c0", "I love Italian food."), headers=auth(KEY_A))
        assert r.status_code == 503 and r.json()["code"] == "read_only_replica", r.text
        assert c.get("/v1/users/alice/preferences", headers=auth(KEY_A)).status_code == 200
