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


def test_both_systems_answer_every_question(shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("MEM0_TELEMETRY", "False")   # read when mem0 is first imported: a test never phones home
    pytest.importorskip("mem0")
    from boundmem_bench.peer import run_peer

    res = run_peer(shared_data / "carmem" / "dataset.jsonl", users=2, rounds=1, work=tmp_path)
    for s in ("boundmem", "mem0"):
        assert res[s]["n"] == 20 and 0 < res[s]["hit@5"] <= 1 and res[s]["bytes_per_preference"] > 0
    assert "| mem0 |" in markdown(res)
    json.dumps(res)
