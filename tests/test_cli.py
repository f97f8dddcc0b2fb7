"""The CLI composes: ingest -> prefs list/export -> opt-out -> forget, and the demo of the quick start works."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from boundmem.cli import app

runner = CliRunner()
FAST = ["--extractor", "keyword", "--maintainer", "rules", "--embedder", "hash"]


def run(*args):
    r = runner.invoke(app, [str(a) for a in args])
    return r


def test_schema_show_validate_and_tool(tmp_path, shared_data):
    r = run("schema", "validate", shared_data / "carmem" / "categories_v4.csv")
    assert r.exit_code == 0 and "4 main, 11 sub, 41 detail" in r.output
    r = run("schema", "show", "--tool", "--opt-out", "Music")
    tool = json.loads(r.output)
    assert tool["function"]["name"] == "extract_user_preferences" and "favorite_genres" not in r.output
    bad = tmp_path / "bad.csv"
    bad.write_text("Main Category#Subcategory#Preference Type#Detail Category#Attributes\nA#B#ZZ#C#d\n")
    r = run("schema", "validate", bad)
    assert r.exit_code == 2 and "line 2" in r.output and "Preference Type" in r.output
    assert run("schema", "show", "--opt-out", "Karaoke").exit_code == 2


def test_ingest_list_export_optout_forget(tmp_path):
    db = tmp_path / "m.db"
    f = tmp_path / "c.jsonl"
    f.write_text("\n".join(json.dumps({"id": f"c{i}", "turns": [{"role": "user", "text": t}]}) for i, t in enumerate(
        ["Italian food is my favourite, always.", "I want the Jazz genre whenever we drive."])) + "\n")
    assert run("ingest", f, "-u", "al", "--db", db, *FAST).exit_code == 0
    r = run("prefs", "list", "-u", "al", "--db", db, "--json")
    prefs = json.loads(r.output)
    assert sorted(p["attribute"] for p in prefs) == ["Italian", "Jazz"]
    assert {p["conversation_id"] for p in prefs} == {"c0", "c1"}
    r = run("opt-out", "Music", "-u", "al", "--db", db)
    assert r.exit_code == 0 and "purged 1" in r.output
    assert [p["attribute"] for p in json.loads(run("prefs", "list", "-u", "al", "--db", db, "--json").output)] == ["Italian"]
    out = tmp_path / "export.json"
    assert run("prefs", "export", "-u", "al", "--db", db, "-o", out).exit_code == 0
    exp = json.loads(out.read_text())
    assert exp["opt_outs"] == ["entertainment_and_media/music"] and len(exp["preferences"]) == 1
    # the purge is audited, but the purged preference is erased from the log too
    assert any(a["op"] == "delete" and a["category"] == "entertainment_and_media/music/favorite_genres" for a in exp["audit"])
    assert "Jazz" not in out.read_text()
    # re-ingesting the music conversation stores nothing there now
    run("ingest", f, "-u", "al", "--db", db, *FAST)
    assert [p["attribute"] for p in json.loads(run("prefs", "list", "-u", "al", "--db", db, "--json").output)] == ["Italian"]
    assert run("prefs", "forget", "-u", "al", "--db", db, "--yes").exit_code == 0
    r = run("prefs", "list", "-u", "al", "--db", db, "--json")   # a forgotten user is not "0 preference(s)"
    assert r.exit_code == 2 and "forgotten" in r.output


def test_delete_by_id_prefix(tmp_path):
    db = tmp_path / "m.db"
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"id": "c", "turns": [{"role": "user", "text": "Italian food is my favourite, always."}]}))
    run("ingest", f, "-u", "al", "--db", db, *FAST)
    pid = json.loads(run("prefs", "list", "-u", "al", "--db", db, "--json").output)[0]["id"]
    assert run("prefs", "delete", pid[:8], "-u", "bob", "--db", db).exit_code == 2  # not bob's
    assert run("prefs", "delete", pid[:8], "-u", "al", "--db", db).exit_code == 0
    assert json.loads(run("prefs", "list", "-u", "al", "--db", db, "--json").output) == []


def test_demo_on_embedded_defaults(tmp_path, minilm):
    db = tmp_path / "demo.db"
    r = run("demo", "--db", db)
    assert r.exit_code == 0, r.output
    from boundmem.store.sqlite import SQLiteStore

    prefs = SQLiteStore(db).preferences("demo-driver")
    cats = {str(p.path) for p in prefs}
    assert "points_of_interest/restaurant/favorite_cuisine" in cats
    assert not any(p.conversation_id == "demo-4" for p in prefs)  # "Navigate to the office" is no preference
    assert "Italian" in r.output.split("recall")[-1]  # the lunch question recalls the cuisine


def _seed(db, cue_extractor, user: str, *conversations: tuple[str, ...]) -> None:
    """Fill a store for `user` the way a server with an observing extractor would (dislikes, one-off choices)."""
    from boundmem.embed import HashEmbedder
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.memory import Memory
    from boundmem.models import Conversation, Turn
    from boundmem.schema import builtin_schema
    from boundmem.store.sqlite import SQLiteStore

    store = SQLiteStore(db)
    mem = Memory(schema=builtin_schema(), store=store, extractor=cue_extractor, maintainer=RuleMaintainer(),
                 embedder=HashEmbedder())
    try:
        for i, texts in enumerate(conversations):
            mem.add(Conversation(id=f"c{i}", turns=tuple(Turn(role="user", text=t) for t in texts)), user)
    finally:
        store.close()


def test_prefs_list_shows_polarity(tmp_path, cue_extractor, monkeypatch):
    from boundmem.cli import root as cli

    db = tmp_path / "m.db"
    _seed(db, cue_extractor, "al", ("I can't stand Jazz.", "I always avoid Highways."))
    prefs = json.loads(run("prefs", "list", "-u", "al", "--db", db, "--json").output)
    assert sorted((p["attribute"], p["polarity"]) for p in prefs) == [("Highways", "like"), ("Jazz", "dislike")]
    monkeypatch.setattr(cli.console, "width", 200)   # one row per preference
    r = run("prefs", "list", "-u", "al", "--db", db)
    assert r.exit_code == 0 and "Dislikes: Jazz" in r.output and "Avoids: Highways" in r.output
    assert "not Jazz" not in r.output


def test_prefs_observed_confirm_dismiss(tmp_path, cue_extractor, monkeypatch):
    from boundmem.cli import root as cli

    db = tmp_path / "m.db"
    _seed(db, cue_extractor, "acme:al", ("I love Italian food.",), ("Play some Jazz.",), ("Play some Rock.",))
    obs = json.loads(run("prefs", "list", "--observed", "-u", "acme:al", "--db", db, "--json").output)
    assert sorted(o["attribute"] for o in obs) == ["Jazz", "Rock"]
    monkeypatch.setattr(cli.console, "width", 200)
    r = run("prefs", "list", "--observed", "-u", "al", "--tenant", "acme", "--db", db)
    assert r.exit_code == 0 and "you chose Jazz" in r.output and "Play some Rock." in r.output
    jazz = next(o["id"] for o in obs if o["attribute"] == "Jazz")
    rock = next(o["id"] for o in obs if o["attribute"] == "Rock")

    r = run("prefs", "confirm", jazz[:8], "-u", "al", "--tenant", "acme", "--db", db, "--embedder", "hash")
    assert r.exit_code == 0, r.output
    assert "Jazz" in r.output
    prefs = json.loads(run("prefs", "list", "-u", "acme:al", "--db", db, "--json").output)
    assert sorted(p["attribute"] for p in prefs) == ["Italian", "Jazz"]
    r = run("prefs", "dismiss", rock, "-u", "acme:al", "--db", db)
    assert r.exit_code == 0 and "dismissed" in r.output
    assert json.loads(run("prefs", "list", "--observed", "-u", "acme:al", "--db", db, "--json").output) == []

    for cmd in (("confirm", "nope1234", "--embedder", "hash"), ("dismiss", "nope1234"), ("dismiss", rock)):
        r = run("prefs", *cmd[:2], "-u", "acme:al", "--db", db, *cmd[2:])
        assert r.exit_code == 2 and cmd[1] in r.output and "Traceback" not in r.output, r.output
    r = run("prefs", "dismiss", jazz, "-u", "al", "--db", db)   # the user is acme:al: named, not "0 dismissed"
    assert r.exit_code == 2 and "--tenant acme" in r.output
    assert [p["attribute"] for p in json.loads(run("prefs", "list", "-u", "acme:al", "--db", db, "--json").output)
            if p["attribute"] == "Jazz"] == ["Jazz"]
