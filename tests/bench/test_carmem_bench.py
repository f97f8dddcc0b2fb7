"""The CarMem harness: metrics checked on hand-made cases, and a scripted run whose every number is known by hand.

Scores of the real extractors are not asserted here; `boundmem bench carmem` measures those.
"""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from boundmem_bench.carmem import CarMemConfig, Components, run_carmem
from boundmem_bench.carmem_data import CarMemDataError, load_carmem
from boundmem_bench.carmem_metrics import (MaintenanceRow, RetrievalRow, is_lost, label, maintenance_summary, micro_prf,
                                           retrieval_summary, same_attribute)
from boundmem.extract.base import Extraction, ExtractionError
from boundmem.maintain.base import Reconciliation
from boundmem.models import Candidate, Decision
from boundmem.schema.model import CategoryPath


def P(s: str) -> CategoryPath:
    m, sub, d = s.split("/")
    return CategoryPath(main=m, sub=sub, detail=d)


# --- metrics on hand-made cases --------------------------------------------------------------
def test_micro_prf_counts_extra_as_fp_and_none_as_fn():
    pairs = [("a", {"a"}), ("b", {"a", "b"}), ("c", set()), ("d", {"e"})]
    m = micro_prf(pairs)
    assert (m.tp, m.fp, m.fn, m.exact) == (2, 2, 2, 1)
    assert m.precision == pytest.approx(0.5) and m.recall == pytest.approx(0.5) and m.f1 == pytest.approx(0.5)
    assert m.subset_accuracy == pytest.approx(0.25)
    empty = micro_prf([("a", set())])
    assert empty.precision is None and empty.recall == 0


def test_songs_count_as_artists_only_at_detail_level():
    songs = P("entertainment_and_media/music/favorite_songs")
    assert label(songs, "detail") == "entertainment_and_media/music/favorite_artists_bands"
    assert label(songs, "detail", merge_songs=False) == str(songs)
    assert label(songs, "sub") == "entertainment_and_media/music" and label(songs, "main") == "entertainment_and_media"


def test_attribute_matching():
    assert same_attribute("Asphalt Anthems by Gritty Lyricist (Rap)", "asphalt anthems by gritty lyricist")
    assert same_attribute("22", "22 °C") and same_attribute("Wi-Fi availability", "wi fi availability")
    assert not same_attribute("not Italian", "Italian") and same_attribute("no Italian", "Not italian")
    assert not same_attribute("Italian", "American") and not same_attribute("AC", "HPC") and not same_attribute("", "x")


def test_maintenance_summary_by_hand():
    rows = [MaintenanceRow(multiple=True, utterance="equal", action="pass"),
            MaintenanceRow(multiple=True, utterance="equal", action="append"),
            MaintenanceRow(multiple=False, utterance="equal", action="update"),
            MaintenanceRow(multiple=True, utterance="negate", action="update"),
            MaintenanceRow(multiple=False, utterance="negate", action="pass"),
            MaintenanceRow(multiple=True, utterance="different", action="update", lost=True),
            MaintenanceRow(multiple=False, utterance="different", action="update")]
    s = maintenance_summary(rows)
    assert s["redundancy_reduction"] == pytest.approx(1 - 1 / 3)
    assert s["contradiction_reduction"] == pytest.approx(0.5)
    assert s["accuracy"] == pytest.approx(3 / 7)  # MP equal pass, MP negate update, MNP different update
    g = s["groups"]
    assert g["MP/equal"]["counts"]["append"] == 1 and g["MP/equal"]["accuracy"] == pytest.approx(0.5)
    assert g["MP/different"]["accuracy"] == 0 and g["MP/different"]["custom_accuracy"] == 1
    assert g["MNP/different"]["accuracy"] == 1 and g["MNP/negate"]["accuracy"] == 0
    assert s["lost"] == 1


def test_lost_preferences():
    assert is_lost(True, "different", "update", True)       # MP: the old one had to stay
    assert not is_lost(False, "different", "update", True)  # MNP: replacing is the point
    assert not is_lost(True, "negate", "update", True)      # the negated one goes
    assert is_lost(True, "negate", "update", False)         # another stored one went
    assert is_lost(False, "equal", "update", False) and not is_lost(False, "equal", "update", True)
    assert not is_lost(True, "equal", "pass", False)


def test_retrieval_summary_by_hand():
    rows = [RetrievalRow(relevant=[True, False], n=1, dynamic_hit=True, dynamic_k=1),
            RetrievalRow(relevant=[False, True, False], n=1, dynamic_hit=False, dynamic_k=2),
            RetrievalRow(relevant=[False, False, False, False, False, True], n=2),
            RetrievalRow(relevant=[False], n=0)]
    s = retrieval_summary(rows)
    assert s["hit@n"] == pytest.approx(1 / 4) and s["hit@n+1"] == pytest.approx(2 / 4)
    assert (s["hit@1"], s["hit@2"], s["hit@5"]) == (pytest.approx(.25), pytest.approx(.5), pytest.approx(.5))
    assert s["curve"][5] == pytest.approx(.75) and s["dynamic"] == pytest.approx(.25)
    assert s["no_gallery_in_subcategory"] == 1 and s["n_distribution"] == {"0": 1, "1": 2, "2": 1}


# --- data loader -----------------------------------------------------------------------------
def test_split_is_first_fifty_users(shared_data, schema):
    path = shared_data / "carmem" / "dataset.jsonl"
    lines = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    test, train = load_carmem(path, schema, "test"), load_carmem(path, schema, "train")
    assert [u.user for u in test] == [ln["user_uuid"] for ln in lines[:50]]
    assert [u.user for u in train] == [ln["user_uuid"] for ln in lines[50:]]
    assert sum(len(u.items) for u in test) == 500 and sum(it.multiple for u in test for it in u.items) == 205
    sub = load_carmem(path, schema, "test", users=2, conversations_per_user=3)
    assert [len(u.items) for u in sub] == [3, 3]
    assert sub[0].items[0].path == P("points_of_interest/restaurant/favorite_cuisine") and sub[0].items[0].attribute == "Italian"


def test_bad_dataset_names_line_and_field(tmp_path, shared_data, schema):
    first = json.loads((shared_data / "carmem" / "dataset.jsonl").read_text().splitlines()[0])
    del first["data"][2]["next_conversation_question"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(first) + "\n")
    with pytest.raises(CarMemDataError, match=r"line 1, field 'data\[2\]\.next_conversation_question'"):
        load_carmem(bad, schema)
    first["data"][2]["next_conversation_question"] = "q"
    first["data"][1]["user_preference"] = "Points of Interest; Restaurant; Favourite Planet; Mars"
    bad.write_text(json.dumps(first) + "\n")
    with pytest.raises(CarMemDataError, match=r"line 1, field 'data\[1\]\.user_preference'.*Favourite Planet"):
        load_carmem(bad, schema)


# --- a scripted run: every number known by hand ----------------------------------------------
class ScriptedExtractor:
    """Fixed outputs per conversation, filtered by the schema it is given (as a real extractor must)."""

    def __init__(self, script: dict, negate_ok: set[str]):
        self.script, self.negate_ok = script, negate_ok
        self.truth: dict[str, Candidate] = {}

    def extract(self, conversation, schema):
        cid = conversation.id
        if cid.endswith("#negate"):
            base = cid.removesuffix("#negate")
            return Extraction(candidates=[self.truth[base]] if base in self.negate_ok else [])
        cands, tries = self.script[cid]
        if tries is None:
            raise ExtractionError("scripted invalid output")
        if tries == "crash":
            raise ConnectionError("scripted network failure")
        return Extraction(candidates=[c for c in cands if schema.allows(c.path)], valid_at_try=tries)


class AlwaysAppend:
    def decide(self, candidate, existing, detail):
        return Reconciliation(decision=Decision(action="append", candidate=candidate, reason="scripted"))


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory, shared_data, schema):
    from boundmem.embed import HashEmbedder

    data = shared_data / "carmem" / "dataset.jsonl"
    (u0, u1) = load_carmem(data, schema, users=2, conversations_per_user=3)
    a, b, c = u0.items
    d, e, f = u1.items

    def gt(it):
        return Candidate(path=it.path, attribute=it.attribute, sentence=f"I like {it.attribute}.")

    bright = Candidate(path=P("vehicle_settings_and_comfort/lighting_and_ambience/interior_lighting_brightness_preferences"),
                       attribute="Bright", sentence="Keep it bright.")
    budget = Candidate(path=P("points_of_interest/restaurant/desired_price_range"), attribute="Budget", sentence="Cheap.")
    script = {a.id: ([gt(a)], 1),           # correct
              b.id: ([], None),             # invalid output
              c.id: ([gt(c), bright], 2),   # correct + an extra in another main category, after a retry
              d.id: ([], "crash"),          # the extractor crashes (e.g. network): counted invalid, run goes on
              e.id: ([budget], 1),          # wrong detail, same subcategory
              f.id: ([gt(f)], 1)}           # correct
    ex = ScriptedExtractor(script, negate_ok={a.id})
    ex.truth = {it.id: gt(it) for it in (a, b, c, d, e, f)}
    cfg = CarMemConfig(data=data, out=tmp_path_factory.mktemp("carmem") / "out", users=2, conversations_per_user=3, show_progress=False)
    res = run_carmem(cfg, Components(extractor=ex, maintainer=AlwaysAppend(), embedder=HashEmbedder(), schema=schema))
    assert (a.multiple, c.multiple, f.multiple) == (True, True, False)  # the by-hand numbers below rely on this
    return res, cfg.out, (a, b, c, d, e, f)


def test_scripted_extraction_numbers(scripted_run):
    res, _, _ = scripted_run
    ex = res["summary"]["extraction"]
    assert [(ex[lv]["tp"], ex[lv]["fp"], ex[lv]["fn"]) for lv in ("main", "sub", "detail")] == [(4, 1, 2), (4, 1, 2), (3, 2, 3)]
    assert ex["detail"]["precision"] == pytest.approx(.6) and ex["detail"]["recall"] == pytest.approx(.5)
    assert ex["detail"]["f1"] == pytest.approx(6 / 11) and ex["detail"]["subset_accuracy"] == pytest.approx(2 / 6)
    assert ex["main"]["subset_accuracy"] == pytest.approx(3 / 6)
    assert ex["attribute"] == {"detail_hits": 3, "attribute_correct": 3, "accuracy": 1.0}
    assert ex["one_pref"]["n"] == 3 and ex["one_pref"]["detail"] == pytest.approx(2 / 3)  # a, e (wrong detail), f
    assert ex["valid"] == {"n": 6, "first_try": 3, "after_retry": 1, "invalid": 2, "crashed": 1}
    for lv in ("main", "sub", "detail"):
        assert ex[lv]["tp"] + ex[lv]["fn"] == 6 == res["counts"]["conversations"]


def test_scripted_out_of_schema(scripted_run):
    res, _, items = scripted_run
    o = res["summary"]["out_of_schema"]
    assert (o["withheld"], o["invalid"], o["leaked_preferences"], o["leaks_same_main"], o["leaks_other_main"]) == (5, 2, 1, 0, 1)
    assert o["leaks_by_sub"] == {"vehicle_settings_and_comfort/lighting_and_ambience": 1}
    leaked = [r for r in res["items"]["out_of_schema"] if not r["withheld"]]
    assert [r["id"] for r in leaked] == [items[2].id]


def test_scripted_maintenance(scripted_run):
    res, _, (a, b, c, d, e, f) = scripted_run
    assert res["items"]["conditional_ids"] == sorted([a.id, f.id])
    cond = res["summary"]["maintenance"]["conditional"]
    assert cond["negate_dropped"] == 1 and cond["n_items"] == 2
    pn = cond["paper_negate_extracted"]  # MP item: all append; MNP item: append -> update; MNP negate dropped
    assert pn["n"] == 5 and pn["redundancy_reduction"] == pytest.approx(.5)
    assert pn["contradiction_reduction"] == 0 and pn["accuracy"] == pytest.approx(2 / 5) and pn["lost"] == 0
    cn = cond["negate_constructed"]
    assert cn["n"] == 6 and cn["contradiction_reduction"] == pytest.approx(.5) and cn["accuracy"] == pytest.approx(.5)
    e2e = res["summary"]["maintenance"]["end_to_end"]
    assert e2e["negate_dropped"] == 5
    # nothing stored at the truth's category for b, d, e -> insert; a, c (MP) append; f (MNP) update
    inserts = sum(g["counts"]["insert"] for g in e2e["negate_constructed"]["groups"].values())
    assert inserts == 3 * 3
    rows = res["items"]["maintenance"]["conditional"]
    assert len(rows) == 2 * 4 and {r["variant"] for r in rows} == {"equal", "different", "negate_constructed", "negate_extracted"}


def test_scripted_store_and_retrieval(scripted_run):
    res, _, _ = scripted_run
    a = res["summary"]["store_audit"]
    assert (a["stored"], a["correct"], a["wrong_attribute"], a["wrong_category"], a["truth_missing"]) == (5, 3, 0, 2, 3)
    r = res["summary"]["retrieval"]
    assert r["conditional/enriched"]["n_queries"] == 2 and r["conditional/enriched"]["hit@1"] == 1  # one pref per gallery
    e = r["end_to_end/enriched"]
    assert e["n_queries"] == 6 and e["hit@5"] == pytest.approx(.5) and e["no_gallery_in_subcategory"] == 0
    assert all(len(x["relevant"]) == x["gallery_size"] for x in res["items"]["retrieval"]["end_to_end/sentence"])


def test_scripted_outputs_written(scripted_run):
    res, out, _ = scripted_run
    disk = json.loads((out / "results.json").read_text())
    assert disk["summary"]["extraction"]["detail"]["tp"] == 3 and len(disk["items"]["extraction"]) == 6
    for png in ("confusion_sub.png", "confusion_detail.png", "hit_at_k.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "report.md").read_text()
    assert "| detail | 0.600 | 0.500 | 0.545 |" in md
    for paper in ("0.936", "0.905", "0.780", "75.2 %", "95 %", "93 %", ".87", ".75"):
        assert paper in md
    assert "2 cores" in md or "cores" in md


# --- the command -----------------------------------------------------------------------------
def test_cli_runs_and_rejects_bad_input(tmp_path, shared_data):
    from boundmem.cli.root import _mount, app

    _mount()
    data = shared_data / "carmem" / "dataset.jsonl"
    out = tmp_path / "cli"
    r = CliRunner().invoke(app, ["bench", "carmem", "--data", str(data), "--out", str(out), "--extractor", "keyword",
                                 "--maintainer", "rules", "--embedder", "hash", "--users", "2",
                                 "--conversations-per-user", "2", "--quiet"])
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    assert res["counts"]["conversations"] == 4 and res["config"]["extractor_class"] == "KeywordExtractor"
    r = CliRunner().invoke(app, ["bench", "carmem", "--data", str(data), "--extractor", "magic"])
    assert r.exit_code != 0 and "magic" in r.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    r = CliRunner().invoke(app, ["bench", "carmem", "--data", str(bad), "--out", str(tmp_path / "x"), "--embedder", "hash",
                                 "--extractor", "keyword", "--maintainer", "rules", "--quiet"])
    assert r.exit_code == 2 and "line 1" in r.output and "invalid JSON" in r.output
    assert not (tmp_path / "x" / "results.json").exists()


def test_extraction_both_ways_stored_or_observed_and_stored_at_once(scripted_run):
    from boundmem_bench.carmem_rows import ExtractionOutcome, ExtractionRecord, extraction_summary

    res, _, (a, b, c, d, e, f) = scripted_run
    s = res["summary"]
    assert s["extraction_stated"]["detail"] == s["extraction"]["detail"]  # the script has no observed candidate
    # a's truth only observed, c's truth stated: both extracted in the paper's protocol, only c stored at once
    obs = Candidate(path=a.path, attribute=a.attribute, sentence="play it", evidence="observed")
    outs = {a.id: ExtractionOutcome(candidates=[obs], valid_at_try=1),
            c.id: ExtractionOutcome(candidates=[Candidate(path=c.path, attribute=c.attribute)], valid_at_try=1)}
    both = extraction_summary([ExtractionRecord.score(it, outs[it.id]) for it in (a, c)])
    stated = extraction_summary([ExtractionRecord.score(it, outs[it.id].stated()) for it in (a, c)])
    assert (both["detail"]["tp"], both["detail"]["fn"], both["observed_total"]) == (2, 0, 1)
    assert (stated["detail"]["tp"], stated["detail"]["fn"], stated["observed_total"]) == (1, 1, 0)
