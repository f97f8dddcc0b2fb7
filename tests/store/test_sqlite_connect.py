"""Every SQLite file boundmem opens comes through store/sqlite_connect.connect, so the settings that carry a
guarantee (secure_delete for erasure, WAL for readers beside the writer, autocommit for explicit transactions)
hold for each: the store (and the job queue, whose table is the store's), CAIM's file and the token generations."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from boundmem.caim.store import CAIMStore
from boundmem.service.tokens import Generations
from boundmem.store.sqlite import SQLiteStore
from boundmem.store.sqlite_connect import connect

PKG = Path(__file__).resolve().parents[2] / "src" / "boundmem"


def _pragmas(con) -> dict:
    return {p: con.execute(f"PRAGMA {p}").fetchone()[0] for p in ("journal_mode", "secure_delete", "foreign_keys",
                                                                    "synchronous")}


def test_only_the_helper_calls_sqlite3_connect():
    callers = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "connect" and ast.unparse(node.value) == "sqlite3":
                callers.append(str(path.relative_to(PKG)))
    assert callers == ["store/sqlite_connect.py"], callers


def test_the_helper_sets_the_pragmas_on_a_file(tmp_path):
    con = connect(tmp_path / "a.db")
    assert _pragmas(con) == {"journal_mode": "wal", "secure_delete": 1, "foreign_keys": 1, "synchronous": 1}
    assert con.isolation_level is None
    assert _pragmas(connect(tmp_path / "b.db", durable=True))["synchronous"] == 2   # FULL
    assert _pragmas(connect(":memory:"))["journal_mode"] == "memory"


@pytest.mark.parametrize("opener", ["store", "caim", "tokens"])
def test_every_sqlite_file_has_the_settings(tmp_path, opener):
    path = tmp_path / f"{opener}.db"
    if opener == "store":
        con = SQLiteStore(path)._con()
    elif opener == "caim":
        con = CAIMStore(path)._con
    else:
        con = Generations(path)._con
    got = _pragmas(con)
    assert got["journal_mode"] == "wal" and got["secure_delete"] == 1 and got["foreign_keys"] == 1
