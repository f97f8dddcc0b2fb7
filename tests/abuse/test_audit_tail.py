"""Deleting a chain's last row, or a whole chain, passed `audit verify`. Each chain now has a
head record (its last seq and hash, sealed with the store's key) in `meta`, apart from the rows: a cut tail, a
removed chain, a removed or edited head record is found. What an attacker holding the file (and so the key, kept
in it) can still do is in README ("The audit log")."""
from __future__ import annotations

import shutil
import sqlite3

from typer.testing import CliRunner

from boundmem.cli.root import app
from boundmem.store.sqlite import SQLiteStore

TAMPERING = {
    "the last row of a chain": "DELETE FROM audit WHERE seq = (SELECT MAX(seq) FROM audit WHERE subject = :s)",
    "the last two rows": "DELETE FROM audit WHERE subject = :s AND useq >= (SELECT MAX(useq) - 1 FROM audit WHERE subject = :s)",
    "a whole chain": "DELETE FROM audit WHERE subject = :s",
    "the head record": "DELETE FROM meta WHERE key = 'audit_head:' || :s",
    "the head record, edited": "UPDATE meta SET value = '1' || substr(value, 2) WHERE key = 'audit_head:' || :s",
}


def _filled(path, memory_factory) -> str:
    mem = memory_factory(path)
    for i, text in enumerate(["I love Italian food.", "Please play some Jazz.", "I love Thai food."]):
        mem.add(text, "alice", conversation_id=f"c{i}")
    mem.add("I love sushi.", "bob", conversation_id="b1")
    assert mem.store.verify_audit().ok
    subject = mem.store.keys.subject("alice")
    mem.store.close()
    return subject


def test_a_cut_tail_or_a_removed_chain_is_found(tmp_path, schema, cue_extractor, kind):
    from boundmem.embed import HashEmbedder
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.memory import Memory

    k = kind("audit: sealed tail")
    make = lambda p: Memory(schema=schema, store=SQLiteStore(p), extractor=cue_extractor,   # noqa: E731
                            maintainer=RuleMaintainer(), embedder=HashEmbedder())
    good = tmp_path / "good.db"
    subject = _filled(good, make)
    for name, sql in TAMPERING.items():
        db = tmp_path / (name.replace(" ", "-").replace(",", "") + ".db")
        shutil.copy(good, db)
        con = sqlite3.connect(db)
        con.execute("DROP TRIGGER IF EXISTS audit_no_delete")   # an attacker with the file drops the guard first
        con.execute(sql, {"s": subject})
        con.commit()
        con.close()
        store = SQLiteStore(db)
        check = store.verify_audit()
        store.close()
        r = CliRunner().invoke(app, ["audit", "verify", "--db", str(db)])
        k.check(not check.ok and r.exit_code == 1, (name, check, r.exit_code, r.output[-200:]))
    store = SQLiteStore(good)   # the untouched copy still verifies
    k.check(store.verify_audit().ok and store.verify_audit("alice").ok, "the untouched store does not verify")
    store.close()
