"""`boundmem bench challenge`: metrics on hand-made cases, loader errors, and an end-to-end run on fixture files
with the model-free keyword extractor, whose every stored item and figure is worked out by hand below.

Scores of the real extractors are not asserted here; the command measures those.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from boundmem_bench.challenge import ChallengeConfig, run_challenge
from boundmem_bench.challenge_sets import (KINDS, SPLITS, STYLES, ChallengeDataError, available_sets, default_data_dir,
                                           load_file, load_set, load_slurp)
from boundmem_bench.challenge_metrics import (Pref, attribute_correct, pair_detail, score_conversation, slurp_summary,
                                              split_polarity, summarise)
from boundmem.schema.load import builtin_schema

FIXTURE = Path(__file__).parent / "challenge_fixture"
CUISINE = "points_of_interest/restaurant/favorite_cuisine"
DIET = "points_of_interest/restaurant/dietary_preferences"
GENRES = "entertainment_and_media/music/favorite_genres"
ROADS = "navigation_and_routing/routing/avoidance_of_specific_road_types"


def E(path: str, attribute: str, polarity: str = "like", accept: tuple[str, ...] = ()) -> Pref:
    return Pref(path=path, attribute=attribute, polarity=polarity, accept=accept)


def S(path: str, attribute: str) -> Pref:
    return Pref(path=path, attribute=attribute)


# --- metrics on hand-made cases --------------------------------------------------------------
def test_attribute_with_accept_and_polarity():
    italian = E(CUISINE, "Italian", accept=("italian food",))
    assert attribute_correct("italian", italian) and attribute_correct("Italian  Food!", italian)
    assert not attribute_correct("not Italian", italian) and not attribute_correct("Italian cuisine", italian)
    country = E(GENRES, "Country", "dislike", accept=("country music",))
    for good in ("not Country", "no country", "Never country music", "avoid  COUNTRY"):
        assert attribute_correct(good, country), good
    for bad in ("Country", "country music", "not Rock", "nothing"):
        assert not attribute_correct(bad, country), bad
    # a vocabulary item that starts with "No" is a like when it is literally what is expected
    green = E("points_of_interest/gas_station/willingness_to_pay_extra_for_green_fuel", "No (cheapest prefered)")
    assert attribute_correct("no (cheapest prefered)", green)
    assert split_polarity("never Highways") == ("Highways", "dislike") and split_polarity("Nothing") == ("Nothing", "like")
    assert split_polarity("not ") == ("not", "like")  # nothing after the cue: not a dislike of ""


def test_pairing_prefers_the_correct_partner():
    exp = [E(CUISINE, "Italian"), E(CUISINE, "Chinese")]
    assert pair_detail(exp, [S(CUISINE, "Chinese")]) == [(1, 0)]          # not Italian<->Chinese
    assert pair_detail(exp, [S(CUISINE, "Thai"), S(CUISINE, "Italian")]) == [(0, 1), (1, 0)]
    assert pair_detail(exp, [S(GENRES, "Italian")]) == []                  # other category: no match


def test_levels_attribute_and_dislike_as_like_by_hand():
    # conversation 1: two expected (cuisine Italian, genres not Country); stored cuisine Mexican, genres Country, diet Vegan
    c1 = score_conversation([E(CUISINE, "Italian"), E(GENRES, "Country", "dislike")],
                            [S(CUISINE, "Mexican"), S(GENRES, "Country"), S(DIET, "Vegan")])
    assert c1["levels"]["main"] == {"tp": 2, "fp": 0, "fn": 0}   # points_of_interest, entertainment_and_media
    assert c1["levels"]["sub"] == {"tp": 2, "fp": 0, "fn": 0}    # restaurant, music
    assert c1["levels"]["detail"] == {"tp": 2, "fp": 1, "fn": 0}  # diet is extra
    assert [p["correct"] for p in c1["pairs"]] == [False, False] and c1["dislike_as_like"] == 1
    assert c1["extra"] == [2]
    # conversation 2: expected road avoidance "Highways"; nothing stored
    c2 = score_conversation([E(ROADS, "Highways")], [])
    assert c2["levels"]["detail"] == {"tp": 0, "fp": 0, "fn": 1} and not c2["stored_any"]
    # conversations 3 and 4 expect nothing; 3 stores something, 4 does not
    c3 = score_conversation([], [S(GENRES, "Jazz")])
    c4 = score_conversation([], [])
    # conversation 5: a dislike stored right
    c5 = score_conversation([E(GENRES, "Country", "dislike")], [S(GENRES, "not country")])
    rows = [c | {"kind": k, "style": st} for c, k, st in
            ((c1, "two_in_one", "written"), (c2, "lasting", "spoken"), (c3, "one_off", "spoken"),
             (c4, "one_off", "written"), (c5, "negated", "written"))]
    s = summarise(rows, KINDS, STYLES)
    # detail: TP 2+0+0+0+1 = 3, FP 1+0+1+0+0 = 2, FN 0+1+0+0+0 = 1
    assert (s["detail"]["tp"], s["detail"]["fp"], s["detail"]["fn"]) == (3, 2, 1)
    assert s["detail"]["precision"] == pytest.approx(3 / 5) and s["detail"]["recall"] == pytest.approx(3 / 4)
    assert s["detail"]["f1"] == pytest.approx(2 * 3 / (2 * 3 + 2 + 1))
    # main: c1 TP 2; c2 FN 1; c3 FP 1; c5 TP 1 -> 3 / 1 / 1
    assert (s["main"]["tp"], s["main"]["fp"], s["main"]["fn"]) == (3, 1, 1)
    assert s["attribute"] == {"matches": 3, "correct": 1, "accuracy": pytest.approx(1 / 3)}
    assert s["dislike"] == {"matches": 2, "stored_as_like": 1, "correct": 1}
    assert s["false_store"] == {"n": 2, "stored": 1, "rate": 0.5}
    assert s["by_kind"]["one_off"]["false_store"] == {"n": 2, "stored": 1, "rate": 0.5}
    assert s["by_kind"]["lasting"]["detail_recall"] == 0 and s["by_kind"]["two_in_one"]["detail_recall"] == 1
    assert s["by_kind"]["two_in_one"]["stored_unexpected"] == 1 and s["by_kind"]["negated"]["stored_unexpected"] == 0
    assert s["by_kind"]["two_in_one"]["attribute_accuracy"] == 0 and s["by_kind"]["negated"]["attribute_accuracy"] == 1
    assert s["by_kind"]["question"]["n"] == 0 and s["by_kind"]["question"]["false_store"]["rate"] is None
    assert s["by_style"]["spoken"]["false_store"] == {"n": 1, "stored": 1, "rate": 1.0}
    assert s["by_style"]["written"]["false_store"] == {"n": 1, "stored": 0, "rate": 0.0}


def test_slurp_summary_excludes_preference_intents_and_sorts_worst_first():
    rows = [{"intent": "play_music", "stored": [1]}, {"intent": "play_music", "stored": []},
            {"intent": "iot_hue_lightchange", "stored": [1, 2]}, {"intent": "weather_query", "stored": []},
            {"intent": "music_likeness", "stored": [1]}]
    s = slurp_summary(rows, ("music_likeness", "music_dislikeness"))
    assert (s["n"], s["stored"], s["preferences_stored"]) == (4, 2, 3) and s["rate"] == pytest.approx(0.5)
    assert [d["intent"] for d in s["by_intent"]] == ["iot_hue_lightchange", "play_music", "weather_query"]
    assert s["by_intent"][1]["rate"] == pytest.approx(0.5)
    assert s["preference_intents"] == {"n": 1, "stored": 1}


# --- loader ----------------------------------------------------------------------------------
GOOD = {"id": "incar-0001", "split": "train", "style": "written", "kind": "lasting",
        "turns": [{"role": "user", "text": "I always go for Italian."}],
        "expected": [{"path": CUISINE, "attribute": "Italian", "polarity": "like"}]}


def _write(tmp_path: Path, *records: dict, name: str = "incar-positive.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return p


def _error(tmp_path: Path, bad: dict) -> ChallengeDataError:
    other = GOOD | {"id": "incar-0000"}
    p = _write(tmp_path, other, bad)  # the bad record is on line 2
    with pytest.raises(ChallengeDataError) as e:
        load_file(p, builtin_schema(), "incar")
    assert e.value.line == 2 and str(p) in str(e.value) and "line 2" in str(e.value)
    return e.value


def test_bad_path_names_line_and_field(tmp_path):
    e = _error(tmp_path, GOOD | {"expected": [GOOD["expected"][0] | {"path": "points_of_interest/restaurant/favourite_food"}]})
    assert e.field == "expected[0].path" and "favourite_food" in str(e)
    e = _error(tmp_path, GOOD | {"expected": [GOOD["expected"][0] | {"path": "Favorite Cuisine"}]})  # a name, not a path
    assert e.field == "expected[0].path"


def test_unknown_kind_style_split_and_polarity(tmp_path):
    assert _error(tmp_path, GOOD | {"kind": "preference"}).field == "kind"
    assert _error(tmp_path, GOOD | {"style": "typed"}).field == "style"
    assert _error(tmp_path, GOOD | {"split": "test"}).field == "split"
    assert _error(tmp_path, GOOD | {"expected": [GOOD["expected"][0] | {"polarity": "hate"}]}).field == "expected[0].polarity"


def test_empty_turn_and_no_user_turn(tmp_path):
    e = _error(tmp_path, GOOD | {"turns": [{"role": "user", "text": "hi"}, {"role": "assistant", "text": ""}]})
    assert e.field == "turns[1].text"
    assert _error(tmp_path, GOOD | {"turns": [{"role": "assistant", "text": "Hello."}]}).field == "turns"
    assert _error(tmp_path, GOOD | {"turns": []}).field == "turns"


def test_expected_count_per_kind_and_other_fields(tmp_path):
    assert _error(tmp_path, GOOD | {"kind": "one_off"}).field == "expected"            # must store nothing
    assert _error(tmp_path, GOOD | {"kind": "two_in_one"}).field == "expected"         # needs exactly 2
    assert _error(tmp_path, GOOD | {"expected": []}).field == "expected"               # lasting needs 1+
    assert _error(tmp_path, GOOD | {"id": "travel-0001"}).field == "id"
    assert _error(tmp_path, GOOD | {"extra": 1}).field == "extra"
    assert _error(tmp_path, GOOD | {"expected": [GOOD["expected"][0] | {"accept": "italian"}]}).field == "expected[0].accept"


def test_split_rule_every_third_of_a_kind_is_heldout(tmp_path):
    recs = [GOOD | {"id": f"incar-000{i}"} for i in range(1, 4)]
    with pytest.raises(ChallengeDataError) as e:   # the 3rd lasting conversation says train
        load_file(_write(tmp_path, *recs), builtin_schema(), "incar")
    assert (e.value.line, e.value.field) == (3, "split")
    recs[2] = recs[2] | {"split": "heldout"}
    other = GOOD | {"id": "incar-0009", "kind": "question", "expected": []}  # another kind counts on its own
    assert [i.split for i in load_file(_write(tmp_path, recs[0], other, recs[1], recs[2]), builtin_schema(), "incar")] \
        == ["train", "train", "train", "heldout"]


def test_set_level_checks(tmp_path):
    d = tmp_path / "data"
    shutil.copytree(FIXTURE, d)
    s = load_set("travel", d)   # its own schema: an in-car path is not in it
    assert s.schema.name == "travel" and s.zero_shot and [i.id for i in s.items] == ["travel-0001", "travel-0002"]
    bad = json.loads((d / "travel.jsonl").read_text().splitlines()[0]) | {"id": "travel-0003", "split": "train"}
    bad["expected"] = [{"path": CUISINE, "attribute": "Italian"}]
    with (d / "travel.jsonl").open("a") as f:
        f.write(json.dumps(bad) + "\n")
    with pytest.raises(ChallengeDataError) as e:
        load_set("travel", d)
    assert (e.value.line, e.value.field) == (3, "expected[0].path") and "travel" in str(e.value)
    (d / "travel.yaml").unlink()
    with pytest.raises(ChallengeDataError, match="schema"):
        load_set("travel", d)
    # ids are unique across a set's files
    dup = json.loads((d / "incar-negative.jsonl").read_text().splitlines()[0])
    with (d / "incar-positive.jsonl").open("a") as f:
        f.write(json.dumps(dup) + "\n")
    with pytest.raises(ChallengeDataError, match="duplicate id 'incar-0001'"):
        load_set("incar", d)
    # a set with one file present loads and names the missing one
    (d / "incar-positive.jsonl").unlink()
    (d / "travel.jsonl").unlink()
    s = load_set("incar", d)
    assert s.missing_files[0] == "incar-positive.jsonl" and len(s.items) == 6
    assert available_sets(d) == ["incar"]


def test_slurp_loader_and_split(tmp_path):
    items = load_slurp(FIXTURE / "slurp.jsonl")
    assert [(i.slurp_id, i.split) for i in items] == [(3, "heldout"), (4, "train"), (5, "train"), (7, "train")]
    p = tmp_path / "s.jsonl"
    p.write_text('{"slurp_id": 1, "sentence": "hi", "scenario": "x", "intent": "y"}\n{"slurp_id": "2", "sentence": "a"}\n')
    with pytest.raises(ChallengeDataError) as e:
        load_slurp(p)
    assert (e.value.line, e.value.field) == (2, "slurp_id")


def test_shipped_data_loads_and_validates():
    d = default_data_dir()
    assert (d / "FORMAT.md").is_file()
    names = available_sets(d)
    if not names:
        pytest.skip("no challenge data file shipped yet")
    for name in names:
        s = load_set(name, d)   # every line validated: fields, kinds, styles, split rule, paths in the set's schema
        assert s.items and {i.split for i in s.items} <= set(SPLITS)
        paths = {str(r.path) for r in s.schema.details()}
        assert all(str(e.path) in paths for i in s.items for e in i.expected)
        assert len({i.id for i in s.items}) == len(s.items)


# --- end to end on the fixture, keyword extractor ---------------------------------------------
@pytest.fixture(scope="module")
def keyword_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("challenge-out")
    cfg = ChallengeConfig(data_dir=FIXTURE, slurp=FIXTURE / "slurp.jsonl", out=out, extractor="keyword",
                          maintainer="rules", embedder="hash", show_progress=False)
    return run_challenge(cfg), out


def _stored(res: dict, set_name: str) -> dict[str, list[tuple[str, str]]]:
    return {r["id"]: sorted((s["path"], s["attribute"]) for s in r["stored"]) for r in res["sets"][set_name]["items"]}


def test_keyword_run_stores_what_the_vocabulary_matcher_finds(keyword_run):
    res, _ = keyword_run
    got = _stored(res, "incar")
    # the keyword extractor stores each schema vocabulary word found (whole word, case-insensitive) in a user turn
    assert got == {
        "incar-0001": [(GENRES, "Jazz")],
        "incar-0002": [],
        "incar-0003": [("vehicle_settings_and_comfort/lighting_and_ambience/interior_lightning_color_preferences", "Red")],
        "incar-0004": [],
        "incar-0005": [(CUISINE, "Mexican")],
        "incar-0006": [(GENRES, "Jazz"), (GENRES, "Rock")],      # multi-preference: both appended
        "incar-0101": [(CUISINE, "Italian")],
        "incar-0102": [(CUISINE, "Mexican")],                      # a dislike, stored as a like
        "incar-0103": [("navigation_and_routing/routing/priority_for_shortest_time_or_shortest_distance", "Shortest Distance")],
        "incar-0104": [(CUISINE, "Chinese"), (CUISINE, "Indian")],
        "incar-0105": [],
        "incar-0106": [(ROADS, "Toll roads")],
        "incar-0107": [("points_of_interest/gas_station/preferred_gas_station", "GasGlo")],  # not PetroLux: assistant turn
        "incar-0108": [(GENRES, "Country")],
    }
    by_id = {r["id"]: r for r in res["sets"]["incar"]["items"]}
    assert [s["sentence"] for s in by_id["incar-0107"]["stored"]] == ["The GasGlo then. In general I always pick the cheapest fuel."]
    assert by_id["incar-0107"]["turns"][0] == {"role": "assistant", "text": "There is a PetroLux and a GasGlo ahead."}
    assert _stored(res, "travel") == {"travel-0001": [("travel/flights/seat_preference", "Window")], "travel-0002": []}
    assert not any(r["error"] for r in by_id.values())


def test_keyword_run_figures_by_hand(keyword_run):
    res, _ = keyword_run
    s = res["sets"]["incar"]["summary"]
    a = s["all"]
    # detail: TP 0006 0101 0102 0103 0104 0106 0108 = 7; FP 0001 0003 0005 0107 = 4; FN 0105 0107 = 2
    assert (a["detail"]["tp"], a["detail"]["fp"], a["detail"]["fn"]) == (7, 4, 2)
    assert a["detail"]["f1"] == pytest.approx(14 / 20)
    # main and sub: the 9 conversations expecting something all match but 0105; 0107 too (gas station);
    # the three false stores are FP
    for lv in ("main", "sub"):
        assert (a[lv]["tp"], a[lv]["fp"], a[lv]["fn"]) == (8, 3, 1)
    # pairs: 0006 Jazz, 0101, 0103, 0104 x2, 0106 right; 0102 and 0108 dislikes stored as likes
    assert a["attribute"] == {"matches": 8, "correct": 6, "accuracy": pytest.approx(6 / 8)}
    assert a["dislike"] == {"matches": 2, "stored_as_like": 2, "correct": 0}
    assert a["false_store"] == {"n": 5, "stored": 3, "rate": pytest.approx(3 / 5)}
    k = a["by_kind"]
    assert k["one_off"]["false_store"] == {"n": 3, "stored": 2, "rate": pytest.approx(2 / 3)}
    assert k["question"]["false_store"]["rate"] == 0 and k["other_person"]["false_store"]["rate"] == 1
    assert k["other_person"]["detail_recall"] == 1 and k["implicit"]["detail_recall"] == 0
    assert k["principle_after_choice"]["stored_unexpected"] == 1 and k["lasting"]["detail_recall"] == 1
    assert k["other_person"]["stored_unexpected"] == 1   # 0006: the son's Rock beside the speaker's Jazz
    assert k["negated"]["attribute_accuracy"] == 0 and k["two_in_one"]["attribute_accuracy"] == 1
    assert a["by_style"]["spoken"]["false_store"] == {"n": 2, "stored": 1, "rate": 0.5}
    assert a["by_style"]["written"]["false_store"] == {"n": 3, "stored": 2, "rate": pytest.approx(2 / 3)}
    h, t = s["heldout"], s["train"]   # heldout: 0003 (false store), 0106 (right)
    assert (h["n"], h["detail"]["tp"], h["detail"]["fp"], h["detail"]["fn"]) == (2, 1, 1, 0)
    assert h["false_store"] == {"n": 1, "stored": 1, "rate": 1.0}
    assert (t["n"], t["detail"]["tp"], t["detail"]["fp"], t["detail"]["fn"]) == (12, 6, 3, 2)
    assert t["dislike"]["stored_as_like"] == 2
    tr = res["sets"]["travel"]["summary"]["all"]
    assert tr["detail"]["f1"] == 1 and tr["false_store"] == {"n": 1, "stored": 0, "rate": 0.0}


def test_keyword_run_slurp(keyword_run):
    res, _ = keyword_run
    sl = res["slurp"]["summary"]
    # train: 4 "play some jazz" stores Jazz, 7 nothing (5 is music_likeness: not counted); heldout: 3 nothing
    assert (sl["train"]["n"], sl["train"]["stored"]) == (2, 1) and (sl["heldout"]["n"], sl["heldout"]["stored"]) == (1, 0)
    assert [(d["intent"], d["stored"], d["n"]) for d in sl["all"]["by_intent"]] == [("play_music", 1, 1), ("weather_query", 0, 2)]
    assert sl["all"]["preference_intents"] == {"n": 1, "stored": 1}
    rock = next(r for r in res["slurp"]["items"] if r["slurp_id"] == 5)
    assert [(s["path"], s["attribute"]) for s in rock["stored"]] == [(GENRES, "Rock")]


def test_keyword_run_outputs(keyword_run):
    res, out = keyword_run
    data = json.loads((out / "results.json").read_text())
    assert len(data["sets"]["incar"]["items"]) == 14 and len(data["slurp"]["items"]) == 4
    assert data["config"]["extractor_class"] == "KeywordExtractor"
    md = (out / "report.md").read_text()
    for text in ("## Set `incar`", "## Set `travel`", "dislike stored as like", "## SLURP", "play_music",
                 "Music like/dislike intents", "incar-0102", "heldout"):
        assert text in md, text


def test_split_option_runs_one_split(tmp_path):
    res = run_challenge(ChallengeConfig(set="incar", split="heldout", data_dir=FIXTURE, out=tmp_path, extractor="keyword",
                                        maintainer="rules", embedder="hash", show_progress=False))
    assert list(res["sets"]) == ["incar"] and list(res["sets"]["incar"]["summary"]) == ["heldout"]
    assert [r["id"] for r in res["sets"]["incar"]["items"]] == ["incar-0003", "incar-0106"]


def test_cli(tmp_path):
    from boundmem.cli.root import _mount, app

    _mount()
    runner = CliRunner()
    args = ["bench", "challenge", "--data-dir", str(FIXTURE), "--extractor", "keyword", "--maintainer", "rules",
            "--embedder", "hash", "--no-progress", "--out", str(tmp_path / "o")]
    r = runner.invoke(app, args + ["--set", "travel"])
    assert r.exit_code == 0, r.output
    assert "travel all: detail F1 1.000" in r.output and (tmp_path / "o" / "report.md").is_file()
    assert runner.invoke(app, args + ["--set", "boats"]).exit_code == 2
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "travel.jsonl").write_text('{"id": "travel-0001"}\n')
    r = runner.invoke(app, ["bench", "challenge", "--data-dir", str(bad), "--extractor", "keyword", "--maintainer", "rules",
                            "--embedder", "hash", "--no-progress", "--out", str(tmp_path / "o2")])
    assert r.exit_code == 2 and "travel.yaml" in r.output
