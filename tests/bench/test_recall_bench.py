"""Bench recall on tiny fixtures written here (no real data): the sets' splits, and what each entry point injected."""
import json

import pytest
from typer.testing import CliRunner

from boundmem_bench.recall_sets import (EXPLICIT_FRESH, cases, part_of, related_requests, slurp_requests,
                                        smarthome_users, unrelated_requests)


def carmem_file(tmp_path):
    """A CarMem-shaped file: 50 test lines (never read by the sets) and two training users."""
    def conv(pref, said):
        return {"user_preference": pref, "meta_info": {"position_user_preference_in_conv": "1"},
                "extraction_conversation": [{"USER": said}, {"ASSISTANT": "Noted."}]}

    users = [{"data": [conv("Points of Interest; Restaurant; Favorite Cuisine; Italian", "I love Italian food."),
                       conv("Entertainment and Media; Music; Favorite Genres; Jazz", "Jazz is my thing.")]},
             {"data": [conv("Vehicle Settings and Comfort; Climate Control; Preferred Temperature; 21 degree Celcius",
                            "21 degrees is right for me.")]}]
    p = tmp_path / "carmem.jsonl"
    p.write_text("\n".join(["{}"] * 50 + [json.dumps(u) for u in users]) + "\n")
    return p


def slurp_file(tmp_path):
    p = tmp_path / "slurp.jsonl"
    rows = [("wake me up at ten", "alarm"), ("what's the weather like", "weather"), ("call mom", "social"),
            ("turn off the kitchen lights", "iot"), ("play hey jude", "play"), ("how tall is everest", "qa")]
    p.write_text("".join(json.dumps({"slurp_id": i, "sentence": s, "scenario": c, "intent": c}) + "\n"
                         for i, (s, c) in enumerate(rows)))
    return p


def test_every_set_has_a_held_out_part_of_users_and_templates():
    for reqs, want in ((unrelated_requests(), {"visible", "held_out", "held_out_2"}), (related_requests(), {"visible", "held_out"})):
        parts = {r.part for r in reqs}
        assert parts == want
        # a template is on one side only: a held-out request is worded by a template the model never saw
        side = {}
        for r in reqs:
            assert side.setdefault(r.template, r.part) == r.part
    users = smarthome_users()
    assert {u.part for u in users} == {"visible", "held_out"} and all(2 <= len(u.prefs) <= 5 for u in users)
    assert part_of("x") == part_of("x")
    cs = cases(related_requests(), users)
    assert cs and all(c.request.part == c.user.part and c.user.holds(c.request.targets) for c in cs)


def test_the_second_held_out_part_is_only_fresh_explicit_commands_asked_by_held_out_users():
    fresh = [r for r in unrelated_requests() if r.part == "held_out_2"]
    assert fresh and {r.family for r in fresh} == set(EXPLICIT_FRESH)
    assert not {r.text for r in fresh} & {r.text for r in unrelated_requests() + related_requests() if r.part != "held_out_2"}
    cs = cases(fresh, smarthome_users())
    assert cs and all(c.part == "held_out_2" and c.user.part == "held_out" for c in cs)


def test_slurp_commands_are_split_by_id(tmp_path):
    rs = slurp_requests(slurp_file(tmp_path))
    assert len(rs) == 6 and all(r.kind == "slurp" and r.template.startswith("slurp:") for r in rs)


def test_the_bench_reports_each_entry_point_per_part(tmp_path):
    from boundmem_bench.recall import run_recall

    summary, rows, meta = run_recall(carmem_file(tmp_path), slurp_file(tmp_path), embedder="hash", per_request=1,
                                     limit=60)
    assert rows and meta["cases"] == len(rows)
    for r in rows:   # the three entry points saw the same request and agree on whether anything came back
        assert r["http"] == r["library"] and r["proxy"] == len(r["library"])
        assert (r["proxy_header"] == "none") == (not r["library"]) and r["tokens_added"] >= 0
        assert (r["tokens_added"] > 0) == bool(r["library"])
    parts = {p for p, res in summary.items() if res}
    assert parts <= {"visible", "held_out", "held_out_2"} and parts
    for res in summary.values():
        for kind, s in res.items():
            assert set(s["none"]) == {"library", "http", "proxy"} and all(0 <= v <= 1 for v in s["none"].values())
            assert (kind == "related") == ("hit@1" in s)


@pytest.mark.parametrize("missing", ["--carmem", "--slurp"])
def test_a_missing_file_is_named(tmp_path, missing):
    from boundmem_bench.cli import app

    args = {"--carmem": str(carmem_file(tmp_path)), "--slurp": str(slurp_file(tmp_path))}
    args[missing] = str(tmp_path / "nope.jsonl")
    r = CliRunner().invoke(app, ["recall", *[x for kv in args.items() for x in kv], "--out", str(tmp_path)])
    assert r.exit_code != 0 and missing in r.output
