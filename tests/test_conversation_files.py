"""Conversation files: accepted layouts, and malformed files rejected with line/field before anything is stored."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from boundmem.cli import app
from boundmem.conversation import ConversationFileError, read_conversations
from boundmem.store.sqlite import SQLiteStore


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_reads_json_jsonl_and_carmem_layout(tmp_path, shared_data):
    j = write(tmp_path, "a.json", json.dumps({"id": "x", "turns": [{"role": "user", "text": "hi"}]}))
    assert read_conversations(j)[0].id == "x"
    jl = write(tmp_path, "b.jsonl", "\n".join(json.dumps({"id": f"c{i}", "turns": [{"role": "user", "text": "hi"},
                                                                                    {"role": "assistant", "text": "yo"}]})
                                              for i in range(3)) + "\n")
    convs = read_conversations(jl)
    assert [c.id for c in convs] == ["c0", "c1", "c2"] and convs[0].turns[1].role == "assistant"
    first_user = (shared_data / "carmem" / "dataset.jsonl").open().readline()
    cm = write(tmp_path, "user.jsonl", first_user)
    convs = read_conversations(cm)
    raw = json.loads(first_user)["data"]
    assert [c.id for c in convs] == [d["conversation_uuid"] for d in raw]
    assert convs[0].turns[0].text == raw[0]["extraction_conversation"][0]["USER"]


@pytest.mark.parametrize("name,text,line,field", [
    ("bad.jsonl", '{"id": "a", "turns": [{"role": "user", "text": "hi"}]}\n{"id": "b", "turns": [\n', 2, None),
    ("bad.jsonl", '{"id": "a", "turns": [{"role": "user", "text": "hi"}]}\n{"id": "b", "turns": [{"role": "robot", "text": "x"}]}\n', 2, "turns[0].role"),
    ("bad.jsonl", '{"id": "a", "turns": []}\n', 1, "turns"),
    ("bad.jsonl", '{"id": "a", "turns": [{"role": "user", "text": "  "}]}\n', 1, "turns[0].text"),
    ("bad.jsonl", '{"id": "a", "messages": []}\n', 1, "turns"),
    ("bad.json", '{"id": "a", "turns": [{"role": "user", "text": "hi"}]', 1, None),
])
def test_malformed_files_name_line_and_field(tmp_path, name, text, line, field):
    p = write(tmp_path, name, text)
    with pytest.raises(ConversationFileError) as e:
        read_conversations(p)
    assert e.value.line == line and e.value.field == field and str(p) in str(e.value)


def test_duplicate_ids_rejected(tmp_path):
    t = json.dumps({"id": "same", "turns": [{"role": "user", "text": "hi"}]})
    with pytest.raises(ConversationFileError, match="duplicate conversation id 'same'"):
        read_conversations(write(tmp_path, "d.jsonl", t + "\n" + t + "\n"))


def test_cli_ingest_of_malformed_file_changes_nothing(tmp_path):
    db = tmp_path / "m.db"
    good = json.dumps({"id": "g", "turns": [{"role": "user", "text": "I always want Italian food."}]})
    bad = write(tmp_path, "mixed.jsonl", good + "\n" + '{"id": "b", "turns": [{"role": "user"}]}\n')
    r = CliRunner().invoke(app, ["ingest", str(bad), "-u", "alice", "--db", str(db), "--extractor", "keyword",
                                 "--maintainer", "rules", "--embedder", "hash"])
    assert r.exit_code == 2
    assert "line 2" in r.output and "turns[0].text" in r.output
    store = SQLiteStore(db)
    assert store.preferences("alice") == [] and store.audit("alice") == []
    # the good line alone goes in
    ok = write(tmp_path, "good.jsonl", good + "\n")
    r = CliRunner().invoke(app, ["ingest", str(ok), "-u", "alice", "--db", str(db), "--extractor", "keyword",
                                 "--maintainer", "rules", "--embedder", "hash"])
    assert r.exit_code == 0, r.output
    assert [p.attribute for p in store.preferences("alice")] == ["Italian"]
