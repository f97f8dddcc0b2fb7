"""`boundmem caim`: file validation, ingest -> thoughts/recall across processes, forget."""
import json
import subprocess
import sys

from typer.testing import CliRunner

from boundmem.cli.caim import app

run = CliRunner().invoke

HISTORY = {"2023-05-01": [{"query": "Hello!", "response": "Hi."},
                          {"query": "I watched the movie Titanic at the cinema, it was sad.", "response": "Oh."}],
           "2023-05-02": [{"query": "I love rock music, especially Queen.", "response": "Great band."}]}


def test_ingest_then_thoughts_and_recall_in_another_process(tmp_path):
    f = tmp_path / "h.json"
    f.write_text(json.dumps(HISTORY))
    db = str(tmp_path / "caim.db")
    r = run(app, ["ingest", str(f), "-u", "ann", "--db", db, "--embedder", "hash"])
    assert r.exit_code == 0, r.output
    out = subprocess.run([sys.executable, "-m", "boundmem.cli", "caim", "thoughts", "-u", "ann", "--db", db, "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    ts = json.loads(out.stdout)
    assert {s for t in ts for s in t["source_turn_ids"]} == {"2023-05-01#1", "2023-05-02#0"}
    r = run(app, ["recall", "What movie did I watch on May 1st?", "-u", "ann", "--db", db, "--embedder", "hash",
                  "--today", "2023-05-07", "--json"])
    assert r.exit_code == 0, r.output
    items = json.loads(r.output)["items"]
    assert items and items[0]["source_turn_ids"] == ["2023-05-01#1"]
    r = run(app, ["thoughts", "-u", "bob", "--db", db, "--json"])
    assert json.loads(r.output) == []


def test_bad_file_is_refused_and_nothing_stored(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps({"2023-05-01": [{"query": "I like tea."}], "2023-13-01": [{"query": "x"}]}))
    db = str(tmp_path / "caim.db")
    r = run(app, ["ingest", str(f), "-u", "ann", "--db", db, "--embedder", "hash"])
    assert r.exit_code == 2 and "2023-13-01" in r.output and "not an ISO date" in r.output
    f.write_text(json.dumps([{"date": "2023-05-01", "turns": [{"response": "no query"}]}]))
    r = run(app, ["ingest", str(f), "-u", "ann", "--db", db, "--embedder", "hash"])
    assert r.exit_code == 2 and "session 0 turns[0]" in r.output and "'query'" in r.output
    assert json.loads(run(app, ["thoughts", "-u", "ann", "--db", db, "--json"]).output) == []


def test_say_end_and_forget(tmp_path):
    db = str(tmp_path / "caim.db")
    assert run(app, ["say", "I bought a red dress today.", "-u", "ann", "--db", db, "--date", "2023-05-02"]).exit_code == 0
    r = run(app, ["end", "-u", "ann", "--db", db, "--embedder", "hash"])
    assert r.exit_code == 0 and "1 new" in r.output
    ts = json.loads(run(app, ["thoughts", "-u", "ann", "--db", db, "--json"]).output)
    assert len(ts) == 1 and "2023-05-02" in ts[0]["text"] and ts[0]["source_turn_ids"] == ["2023-05-02#0"]
    assert run(app, ["forget", "-u", "ann", "--db", db, "--yes"]).exit_code == 0
    assert json.loads(run(app, ["thoughts", "-u", "ann", "--db", db, "--json"]).output) == []


def test_forgetting_a_user_who_is_not_there_is_an_error(tmp_path):
    db = str(tmp_path / "caim.db")
    assert run(app, ["say", "I bought a red dress today.", "-u", "ann", "--db", db, "--date", "2023-05-02"]).exit_code == 0
    r = run(app, ["forget", "-u", "bob", "--db", db, "--yes"])
    assert r.exit_code != 0 and "bob" in r.output and "forgot" not in r.output


def test_the_one_user_id_rule(tmp_path):
    db = str(tmp_path / "caim.db")
    for bad in ("alice\n", "al ice", "", ":alice"):
        r = run(app, ["say", "I like tea.", "-u", bad, "--db", db, "--date", "2023-05-02"])
        assert r.exit_code == 2, (bad, r.output)
    assert run(app, ["say", "I like tea.", "-u", "acme:alice", "--db", db, "--date", "2023-05-02"]).exit_code == 0
