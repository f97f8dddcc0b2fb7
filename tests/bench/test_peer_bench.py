"""Bench peer: the same gallery and questions for both systems; mem0 only where the benchmark's extra is installed."""
import json
import subprocess
import sys

import pytest

from boundmem.schema.load import builtin_schema
from boundmem_bench.peer import gallery, markdown


def test_the_gallery_holds_what_each_user_said(shared_data):
    items = gallery(shared_data / "carmem" / "dataset.jsonl", builtin_schema(), 3)
    assert len(items) == 30 and len({i.user for i in items}) == 3
    assert all(i.sentence and i.query for i in items)
    # the stated value is in the sentence both systems hold wherever the user said it in so many words
    assert sum(i.attribute.lower() in i.sentence.lower() for i in items) >= 15


def test_without_mem0_the_command_names_the_extra(shared_data, tmp_path):
    code = ("import sys; sys.modules['mem0'] = None\n"
            "from boundmem.cli import main\n"
            f"sys.argv = ['boundmem', 'bench', 'peer', '--data', {str(shared_data / 'carmem' / 'dataset.jsonl')!r}, "
            f"'--users', '1', '--rounds', '1', '--out', {str(tmp_path)!r}]\nmain()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 and "boundmem-bench[peer]" in r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr


def test_both_systems_answer_every_question_in_both_settings(shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("MEM0_TELEMETRY", "False")   # read when mem0 is first imported: a test never phones home
    pytest.importorskip("mem0")
    from boundmem_bench.peer import SETTINGS, SYSTEMS, run_peer

    res = run_peer(shared_data / "carmem" / "dataset.jsonl", users=2, rounds=1, work=tmp_path)
    for setting in SETTINGS:
        for s in SYSTEMS:
            r = res[setting][s]
            assert r["n"] == 20 and 0 <= r["hit@5"] <= 1 and 0 <= r["empty"] <= 1 and r["stored"] > 0
        assert res[setting]["mem0"]["hit@5"] > 0 and res[setting]["boundmem"]["hit@5"] > 0
    gold = res["gold text"]
    assert gold["boundmem"]["stored"] == gold["mem0"]["stored"] == 20 == gold["mem0"]["gold_held"]
    own = res["own ingestion"]
    assert own["mem0"]["stored"] > own["boundmem"]["stored"]   # mem0 keeps every turn, boundmem what it extracts
    assert own["boundmem, gate on"]["empty"] >= own["boundmem"]["empty"]
    md = markdown(res)
    assert "| own ingestion | mem0 |" in md and "| gold text | boundmem, gate on |" in md
    json.dumps(res)


def test_a_memory_answers_a_question_from_its_conversation_only():
    from boundmem_bench.peer import PeerItem, answers

    item = PeerItem("c1", "u", None, "Italian", "I love Italian food.", "Where to eat?")
    assert answers(item, "I love Italian food.", "c1") and answers(item, "italian", "c1")
    assert not answers(item, "I love Italian food.", "c2") and not answers(item, "Thai please", "c1")
