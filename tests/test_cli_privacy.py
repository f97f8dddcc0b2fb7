"""CLI privacy commands: a user that does not exist is an error naming it (never "0 erased"), users
created through the API are reached with --tenant, and `boundmem audit verify` checks the hash chains."""
from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
from typer.testing import CliRunner

from boundmem.cli import app
from boundmem.schema.model import CategoryPath
from boundmem.store.sqlite import SQLiteStore, pack_payload, unpack_payload

CUISINE = CategoryPath(main="points_of_interest", sub="restaurant", detail="favorite_cuisine")


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture()
def db(tmp_path):
    """One store with a local user "carol" and a user "alice" created through the API by tenant acme."""
    path = tmp_path / "m.db"
    s = SQLiteStore(path)
    for user in ("carol", "acme:alice"):
        with s.transaction(user) as tx:
            tx.insert(CUISINE, "Italian", "I love Italian food", np.ones(8), "c1", "insert from c1")
    s.close()
    return path


@pytest.mark.parametrize("cmd", [["prefs", "forget", "--yes"], ["prefs", "export"], ["prefs", "delete", "abc"]])
def test_a_user_that_does_not_exist_is_an_error_naming_it(db, cmd):
    r = run(*cmd, "-u", "nobody", "--db", db)
    assert r.exit_code != 0 and "nobody" in r.output and "0 preference" not in r.output, r.output
    assert "no user" in r.output


@pytest.mark.parametrize("cmd", [["prefs", "forget", "--yes"], ["prefs", "export"]])
def test_an_api_user_named_without_its_tenant_is_an_error_that_points_to_it(db, cmd):
    r = run(*cmd, "-u", "alice", "--db", db)
    assert r.exit_code != 0 and "alice" in r.output and "--tenant acme" in r.output, r.output
    assert SQLiteStore(db).preferences("acme:alice") != []  # nothing was erased


def test_cli_reaches_api_users_with_tenant(db, tmp_path):
    out = tmp_path / "e.json"
    r = run("prefs", "export", "-u", "alice", "--tenant", "acme", "--db", db, "-o", out)
    assert r.exit_code == 0, r.output
    assert [p["attribute"] for p in json.loads(out.read_text())["preferences"]] == ["Italian"]
    pid = SQLiteStore(db).preferences("acme:alice")[0].id
    assert run("opt-out", "Music", "-u", "alice", "--tenant", "acme", "--db", db).exit_code == 0
    assert SQLiteStore(db).opt_outs("acme:alice") == ["entertainment_and_media/music"]
    assert run("prefs", "delete", pid[:8], "-u", "alice", "--tenant", "acme", "--db", db).exit_code == 0
    r = run("prefs", "forget", "-u", "alice", "--tenant", "acme", "--db", db, "--yes")
    assert r.exit_code == 0 and "0 preference(s) erased" in r.output  # the user existed; the delete had emptied it
    # forgotten: a second forget is an error that says so; the opt-out stays until opt-in
    r = run("prefs", "forget", "-u", "alice", "--tenant", "acme", "--db", db, "--yes")
    assert r.exit_code != 0 and "forgotten" in r.output
    assert SQLiteStore(db).opt_outs("acme:alice") == ["entertainment_and_media/music"]
    assert run("opt-in", "Music", "-u", "alice", "--tenant", "acme", "--db", db).exit_code == 0
    assert SQLiteStore(db).opt_outs("acme:alice") == []
    assert SQLiteStore(db).preferences("carol") != []


def test_audit_verify_passes_then_names_the_edited_entry(db):
    r = run("audit", "verify", "--db", db)
    assert r.exit_code == 0 and "ok" in r.output, r.output
    assert run("prefs", "forget", "-u", "carol", "--db", db, "--yes").exit_code == 0
    assert run("audit", "verify", "--db", db).exit_code == 0
    assert run("audit", "verify", "-u", "carol", "--db", db).exit_code == 0
    assert run("audit", "verify", "-u", "alice", "--tenant", "acme", "--db", db).exit_code == 0
    assert run("audit", "verify", "-u", "nobody", "--db", db).exit_code != 0
    # someone with the file edits alice's first entry behind the store's back, in the store's own payload format
    subject = SQLiteStore(db).keys.subject("acme:alice")
    con = sqlite3.connect(db)
    con.execute("DROP TRIGGER audit_erase_only")
    (after,) = con.execute("SELECT after FROM audit WHERE subject=? AND useq=1", (subject,)).fetchone()
    edited = json.loads(json.dumps(unpack_payload(after)).replace("Italian", "Greek"))
    assert edited != unpack_payload(after)
    con.execute("UPDATE audit SET after=? WHERE subject=? AND useq=1", (pack_payload(edited), subject))
    con.commit()
    r = run("audit", "verify", "--db", db)
    assert r.exit_code == 1 and "acme:alice" in r.output and "seq 1" in r.output, r.output
    r = run("audit", "verify", "-u", "alice", "--tenant", "acme", "--db", db)
    assert r.exit_code == 1 and "seq 1" in r.output
    assert run("audit", "verify", "-u", "carol", "--db", db).exit_code == 0
    # or garbles its bytes into text that is not UTF-8: named the same way, not a crash
    con.execute("DROP TRIGGER audit_erase_only")  # opening the store put it back
    con.execute("UPDATE audit SET after=CAST(X'01FFFE' || after AS TEXT) WHERE subject=? AND useq=1", (subject,))
    con.commit()
    con.close()
    r = run("audit", "verify", "--db", db)
    assert r.exit_code == 1 and "acme:alice" in r.output and "seq 1" in r.output, r.output


def test_tenant_and_user_are_each_checked(db):
    for args in (["-u", "acme:alice", "--tenant", "acme"], ["-u", "alice", "--tenant", "bad tenant"]):
        r = run("prefs", "export", *args, "--db", db)
        assert r.exit_code != 0 and "invalid" in r.output, r.output
    r = run("prefs", "export", "-u", "acme:alice", "--db", db)  # the TENANT:USER spelling reaches the same user
    assert r.exit_code == 0 and "Italian" in r.output
