"""Users under a tenant on the CLI: `ingest` and `recall` take --tenant like the other commands, and `recall`
of a user the store does not hold is an error naming the tenant form, never "nothing stored for this user"."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from boundmem.cli import app

FAST = ["--extractor", "keyword", "--maintainer", "rules", "--embedder", "hash"]


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_ingest_and_recall_for_a_tenant_user(tmp_path):
    db, conv = tmp_path / "m.db", tmp_path / "c.json"
    conv.write_text(json.dumps({"id": "c1", "turns": [{"role": "user", "text": "I love Italian food."}]}))
    assert run("ingest", conv, "--tenant", "acme", "-u", "dana", "--db", db, *FAST).exit_code == 0
    r = run("recall", "food", "--tenant", "acme", "-u", "dana", "--db", db, "--embedder", "hash", "--no-gate")
    assert r.exit_code == 0 and "Italian" in r.output
    r = run("recall", "food", "-u", "dana", "--db", db, "--embedder", "hash")
    assert r.exit_code == 2 and "--tenant acme" in r.output and "nothing stored" not in r.output
    r = run("recall", "food", "-u", "nobody", "--db", db, "--embedder", "hash")
    assert r.exit_code == 2 and "no user 'nobody'" in r.output
    r = run("prefs", "list", "-u", "acme:dana", "--db", db, "--json")
    assert [p["attribute"] for p in json.loads(r.output)] == ["Italian"]
