"""One user-id rule on every surface (boundmem.user_id, matched whole): a trailing newline, a ':' or a space is
refused by the API, the CLI and the MCP server alike, so nothing is ever stored under an id another surface
cannot reach. (The MCP side: tests/service/test_mcp.py and test_mcp_frames.py.)"""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from boundmem.user_id import (InvalidUserId, check_store_user_id, check_user_id, namespaced, valid_tenant,
                              valid_user_id)

BAD = ["alice\n", "alice\r\n", "\nalice", "alice ", " alice", "al ice", "a:b", "", "-alice", "a" * 129, "alïce",
       "alice\x00", "alice/x", "..", "alice\u2028"]
GOOD = ["alice", "a", "A.b_c-d+e@f.example", "7", "a" * 128]


@pytest.mark.parametrize("user", BAD)
def test_bad_user_ids_are_refused(user):
    assert not valid_user_id(user)
    with pytest.raises(InvalidUserId, match="invalid user id"):
        check_user_id(user)
    with pytest.raises(InvalidUserId):
        namespaced("acme", user)


@pytest.mark.parametrize("user", GOOD)
def test_good_user_ids_pass(user):
    assert valid_user_id(user) and check_user_id(user) == user and namespaced("acme", user) == f"acme:{user}"


def test_tenant_rule_and_store_ids():
    assert valid_tenant("acme") and not valid_tenant("acme\n") and not valid_tenant("a:b") and not valid_tenant(None)
    assert check_store_user_id("acme:alice") == "acme:alice" and check_store_user_id("alice") == "alice"
    for bad in ("acme:alice\n", "acme\n:alice", "acme:", ":alice", "a:b:c", 5):
        with pytest.raises(InvalidUserId):
            check_store_user_id(bad)


# --- API -----------------------------------------------------------------------------------------
def test_api_refuses_a_user_id_with_a_trailing_newline(tmp_path, schema):
    from fastapi.testclient import TestClient

    from boundmem.extract.keyword import KeywordExtractor
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.memory import Memory
    from boundmem.embed import HashEmbedder
    from boundmem.service.app import create_app
    from boundmem.store.sqlite import SQLiteStore

    key = "key-tenant-a-0123456789abcdef"
    h = {"Authorization": f"Bearer {key}"}
    store = SQLiteStore(tmp_path / "api.db")
    mem = Memory(schema=schema, store=store, extractor=KeywordExtractor(), maintainer=RuleMaintainer(), embedder=HashEmbedder())
    try:
        with TestClient(create_app(mem, {key: "acme"})) as c:
            body = {"id": "c1", "turns": [{"role": "user", "text": "I love Italian food."}]}
            for enc in ("alice%0A", "alice%0D%0A", "%0Aalice", "alice%20", "acme%3Aalice"):
                for r in (c.post(f"/v1/users/{enc}/conversations", headers=h, json=body),
                          c.get(f"/v1/users/{enc}/preferences", headers=h),
                          c.post(f"/v1/users/{enc}/tokens", headers=h)):
                    assert r.status_code == 422, (enc, r.status_code)
                    assert "user" in r.json()["message"] and r.json()["code"] == "invalid_request"
        assert store.users() == []
    finally:
        store.close()


# --- CLI -----------------------------------------------------------------------------------------
def test_cli_refuses_a_user_id_with_a_trailing_newline(tmp_path):
    from boundmem.cli import app
    from boundmem.store.sqlite import SQLiteStore

    db = str(tmp_path / "cli.db")
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"id": "c", "turns": [{"role": "user", "text": "I love Italian food."}]}))
    runner = CliRunner()
    for user in ("alice\n", "acme:alice\n", "a b", "acme:"):
        for args in (["ingest", str(f), "-u", user, "--extractor", "keyword", "--maintainer", "rules", "--embedder", "hash"],
                     ["prefs", "list", "-u", user], ["prefs", "export", "-u", user], ["prefs", "forget", "--yes", "-u", user],
                     ["recall", "Italian", "-u", user, "--embedder", "hash"], ["opt-out", "points_of_interest", "-u", user]):
            r = runner.invoke(app, [*args, "--db", db])
            assert r.exit_code == 2 and "invalid user id" in r.output, (user, args, r.output)
    store = SQLiteStore(db)
    try:
        assert store.users() == []
    finally:
        store.close()
    r = runner.invoke(app, ["ingest", str(f), "-u", "acme:alice", "--extractor", "keyword", "--maintainer", "rules",
                            "--embedder", "hash", "--db", db])
    assert r.exit_code == 0, r.output
