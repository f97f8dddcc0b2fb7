"""bench voice on a tiny CarMem-shaped file written here: every turn goes through the three pipelines, the speculative
one has its recall ready from the transcriptions, and the report names each pipeline."""
import json

import pytest
from typer.testing import CliRunner

pytest.importorskip("pipecat")

from boundmem_bench.voice import MODES, markdown, run_voice, voice_turns  # noqa: E402


def carmem_file(tmp_path):
    """50 test lines (never read) and one training user with two preferences and two next-conversation requests."""
    def conv(pref, said, ask):
        return {"user_preference": pref, "meta_info": {"position_user_preference_in_conv": "1"},
                "extraction_conversation": [{"USER": said}, {"ASSISTANT": "Noted."}], "next_conversation_question": ask}

    user = {"data": [conv("Points of Interest; Restaurant; Favorite Cuisine; Italian", "I love Italian food.",
                          "I'm hungry, where should we eat?"),
                     conv("Entertainment and Media; Music; Favorite Genres; Jazz", "Jazz is my thing.",
                          "Put on some music for the drive.")]}
    p = tmp_path / "carmem.jsonl"
    p.write_text("\n".join(["{}"] * 50 + [json.dumps(user)]) + "\n")
    return p


def test_each_turn_is_timed_in_every_pipeline_and_the_speculative_recall_is_ready(tmp_path):
    path = carmem_file(tmp_path)
    assert [asks for _, asks in voice_turns(path, 5)] == [["I'm hungry, where should we eat?",
                                                          "Put on some music for the drive."]]
    summary, rows, meta = run_voice(path, users=1, deadline=30.0, end_of_turn=0.0, mem0=False)
    assert len(rows) == 2 and all(r[f"held_{m}"] >= 0 for r in rows for m in MODES) and all(r["one_recall"] > 0 for r in rows)
    # the pipeline without the tap waits for its one recall: never less than that recall took
    assert all(0 < r["recall_in_turn"] <= r["held_at_context"] for r in rows)
    for mode in ("speculative", "at_context"):
        assert meta["counts"][mode]["turns"] == 2 and meta["counts"][mode]["late"] == 0
    assert meta["counts"]["speculative"]["speculative"] == 2 and meta["counts"]["at_context"]["speculative"] == 0
    assert meta["counts"]["speculative"]["injected"] >= 1
    assert summary["speculative"]["p95_within_deadline"] and summary["at_context"]["p95_within_deadline"]
    assert "mem0" not in summary
    report = markdown(summary, meta)
    assert "recall started on the transcriptions" in report and "without memory" in report


def test_a_missing_data_file_is_refused(tmp_path):
    from boundmem_bench.cli import app

    r = CliRunner().invoke(app, ["voice", "--carmem", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o")],
                           env={"COLUMNS": "400", "TERM": "dumb"})
    assert r.exit_code != 0 and "is not a file" in r.output
