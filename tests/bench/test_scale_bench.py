"""`bench scale` fills the store's own tables in bulk: the store must read what the fill wrote, user by user."""
from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from boundmem.store.sqlite import SQLiteStore
from boundmem_bench.scale import fill_sqlite


def test_the_bulk_fill_is_what_the_store_reads(tmp_path):
    db = tmp_path / "s.db"
    SQLiteStore(db).close()
    fill_sqlite(db, 0, 30, 4, np.random.default_rng(0), batch=7)
    s = SQLiteStore(db)
    try:
        prefs = s.preferences("user-12")
        assert [p.attribute for p in prefs] == [f"attribute {j}" for j in range(4)]
        hits = s.search("user-12", s.vectors("user-12")[1][2], 2)
        assert hits[0][0].id == prefs[2].id and all(p.user == "user-12" for p, _ in hits)
        with s.transaction("user-12") as tx:  # the store goes on in the user's block
            tx.insert(prefs[0].path, "one more", "", np.ones(384), None, "t")
        assert [p.attribute for p in s.preferences("user-12")][-1] == "one more"
        assert len(s.preferences("user-13")) == 4
    finally:
        s.close()


def test_bench_scale_reports_each_tier(tmp_path):
    from boundmem_bench.cli import app

    r = CliRunner().invoke(app, ["scale", "--users", "20,60", "--per-user", "3", "--queries", "20", "--out",
                                 str(tmp_path / "out"), "--work", str(tmp_path)])
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [t["users"] for t in res["sqlite"]] == [20, 60] and res["bytes_per_preference"]["total"] > 0
    assert "| sqlite | as written | 60 |" in (tmp_path / "out" / "report.md").read_text()
