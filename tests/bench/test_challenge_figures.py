"""The figures of `bench challenge` (fabricated values, polarity flips, exact/final-state shares, promotion,
fragments) on hand-made cases, the multi-conversation format's loader errors, and a run on a tiny fixture."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from boundmem_bench.challenge import ChallengeConfig, ingest, run_challenge
from boundmem_bench.challenge_sets import ChallengeDataError, load_file, load_set
from boundmem_bench.challenge_metrics import (Pref, exact, fabricated, final_state_right, fragment,
                                              observations_right, polarity_flips, said, score_case,
                                              summarise_values)
from boundmem.models import Conversation, Turn
from boundmem.schema.load import builtin_schema

FIXTURE = Path(__file__).parent / "challenge_fixture" / "values"
GEN = "entertainment_and_media/music/favorite_genres"
SUP = "points_of_interest/grocery_shopping/preferred_supermarket_chains"
TEMP = "vehicle_settings_and_comfort/climate_control/preferred_temperature"
BRIGHT = "vehicle_settings_and_comfort/lighting_and_ambience/interior_lighting_brightness_preferences"
TEMPS = tuple(f"{n} degree Celcius" for n in range(18, 26))
CLOSED = {TEMP: TEMPS, BRIGHT: ("Low", "Medium", "High")}


def P(path: str, attribute: str, polarity: str = "like", accept: tuple[str, ...] = ()) -> Pref:
    return Pref(path=path, attribute=attribute, polarity=polarity, accept=accept)


def test_fabricated_values():
    text = "I always shop at Trader Joe's and I like it at 22 degrees; keep the lights dim."
    stored = [P(SUP, "Trader Joe's"),         # said
              P(SUP, "BasketBounty Markets"),  # a list item never said: fabricated
              P(TEMP, "22 degree Celcius"),    # the distinctive word "22" said ("degree celcius" every item shares)
              P(TEMP, "24 degree Celcius"),    # "24" never said: fabricated
              P(BRIGHT, "Low"),                # not said, but the closed item the gold says "dim" implies
              P(GEN, "Rock")]                  # fabricated
    gold = [P(BRIGHT, "Low")]
    assert fabricated(stored, gold, text, CLOSED) == [1, 3, 5]
    assert fabricated(stored, [], text, CLOSED) == [1, 3, 4, 5]   # no gold implying Low: fabricated too
    # a dislike stored with polarity as data, or as a legacy "not X": its value is what must have been said
    assert fabricated([P(GEN, "country", "dislike"), P(GEN, "not country")], [], "I can't stand country music", {}) == []
    assert said("podcasts", "I love podcast shows") and not said("podcasts", "I love the radio")


def test_polarity_flips_and_exact():
    gold = [P(GEN, "country", "dislike", ("country music",)), P(GEN, "jazz")]
    assert polarity_flips(gold, [P(GEN, "Country Music"), P(GEN, "jazz")]) == 1          # a dislike stored as a like
    assert polarity_flips(gold, [P(GEN, "country", "dislike"), P(GEN, "jazz", "dislike")]) == 1
    assert polarity_flips(gold, [P(GEN, "not country"), P(GEN, "rock", "dislike")]) == 0  # legacy form read right
    assert exact(gold, [P(GEN, "jazz"), P(GEN, "country", "dislike")])
    assert not exact(gold, [P(GEN, "jazz"), P(GEN, "country", "dislike"), P(SUP, "Aldi")])  # something extra
    assert not exact(gold, [P(GEN, "jazz")]) and exact([], []) and not exact([], [P(GEN, "jazz")])


def test_change_of_mind_final_state():
    gold = [P(GEN, "jazz", "dislike"), P(GEN, "house")]
    assert final_state_right(gold, [P(GEN, "house")])                          # the old like gone: right
    assert final_state_right(gold, [P(GEN, "house"), P(GEN, "jazz", "dislike"), P(SUP, "Aldi")])  # other category
    assert not final_state_right(gold, [P(GEN, "house"), P(GEN, "jazz")])      # jazz still a favourite
    assert not final_state_right(gold, [P(GEN, "jazz", "dislike")])            # the new like missing
    assert final_state_right([], []) and not final_state_right([], [P(GEN, "jazz")])


def test_observations_right():
    exp = [P(GEN, "rock"), P(GEN, "pop")]
    assert observations_right(exp, [P(GEN, "Rock"), P(GEN, "pop"), P(GEN, "pop")])
    assert not observations_right(exp, [P(GEN, "rock")]) and not observations_right(exp, [*exp, P(GEN, "jazz")])
    assert observations_right([], []) and not observations_right([], [P(GEN, "jazz")])


def test_fragments():
    for bad in ("not living", "your watch", "to live", "it", "my", "jazz and", "the"):
        assert fragment(bad), bad
    for good in ("The Guardian", "jazz", "Trader Joe's", "drum and bass", "No (cheapest prefered)"):
        assert not fragment(good, ("No (cheapest prefered)",)), good
    assert fragment("No (cheapest prefered)")  # not listed here: starts with a negation word


def test_summary_by_hand():
    def case(kind, gold, stored, text, **kw):
        return score_case(kind, gold, stored, text, CLOSED, {}, **kw)

    cases = [
        case("open_value", [P(SUP, "Aldi")], [P(SUP, "Aldi")], "I shop at Aldi"),                       # right
        case("open_value", [P(SUP, "Aldi")], [P(SUP, "PantryPulse Retail")], "I shop at Aldi"),         # fabricated
        case("no_value", [], [], "play my favourite podcast"),
        case("no_value", [], [P(GEN, "Rock")], "play my favorite music"),                               # fabricated
        case("negation", [P(GEN, "jazz", "dislike")], [P(GEN, "jazz")], "I don't like jazz"),           # a flip
        case("negation", [], [], "I don't mind reggae"),                                                # right
        case("change_of_mind", [P(TEMP, "19 degree Celcius", accept=("19",))], [P(TEMP, "19 degree Celcius")],
             "I like 21 degrees\nI prefer 19 now"),                                                     # right
        case("repeated_choice", [P(GEN, "jazz")], [P(GEN, "jazz")], "jazz\njazz\njazz",
             promoted=[P(GEN, "jazz")], observed=[], expected_observed=[]),
        case("repeated_choice", [P(GEN, "blues")], [], "blues\nblues\nblues",
             promoted=[], observed=[P(GEN, "blues")], expected_observed=[]),                            # not promoted
        case("mixed_choices", [], [P(GEN, "rock")], "rock\nrock\npop",
             promoted=[P(GEN, "rock")], observed=[P(GEN, "pop")], expected_observed=[P(GEN, "rock"), P(GEN, "pop")]),
    ]
    s = summarise_values(cases)
    assert s["fabricated"] == {"n": 2, "cases": 2} and s["polarity_flips"] == 1
    assert s["open_values_right"] == {"n": 2, "right": 1, "rate": .5}
    assert s["no_value_nothing_stored"] == {"n": 2, "right": 1, "rate": .5}
    assert s["negation_right"] == {"n": 2, "right": 1, "rate": .5}
    assert s["change_of_mind_right"] == {"n": 1, "right": 1, "rate": 1.0}
    pro = s["promotion"]
    assert (pro["promoted"], pro["right"], pro["expected"], pro["found"]) == (2, 1, 2, 1)
    assert pro["precision"] == .5 and pro["recall"] == .5 and pro["single_or_mixed_promoted"] == 1
    assert s["observations_right"] == {"n": 3, "right": 1, "rate": pytest.approx(1 / 3)}
    # without observations (a memory that keeps none) promotion is not measured, not zero
    assert summarise_values(cases[:7])["promotion"] is None


# --- the multi-conversation format ------------------------------------------------------------
MULTI = {"id": "incar-0001", "split": "train", "style": "written", "kind": "repeated_choice",
         "conversations": [[{"role": "user", "text": "Play some jazz."}], [{"role": "user", "text": "Jazz again."}]],
         "expected": [], "expected_observed": [{"path": GEN, "attribute": "jazz"}]}


def _write(tmp_path: Path, *records: dict) -> Path:
    p = tmp_path / "cases.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return p


def test_multi_conversation_loads_with_distinct_ids(tmp_path):
    (it,) = load_file(_write(tmp_path, MULTI), builtin_schema(), "incar")
    assert [c.id for c in it.conversations] == ["incar-0001-c1", "incar-0001-c2"] and it.multi
    assert [e.attribute for e in it.expected_observed] == ["jazz"]
    with pytest.raises(ValueError):
        it.conversation  # several conversations: no single one


@pytest.mark.parametrize("change, field, words", [
    ({"turns": [{"role": "user", "text": "x"}]}, "turns", "conversations"),
    ({"conversations": [[{"role": "user", "text": "only one"}]]}, "conversations", "2 to 5"),
    ({"conversations": "Play jazz."}, "conversations", "list"),
    ({"conversations": [[{"role": "user", "text": "a"}], [{"role": "user", "text": ""}]]}, "conversations[1]", ""),
    ({"conversations": [[{"role": "user", "text": "a"}], [{"role": "assistant", "text": "b"}]]}, "conversations[1]",
     "user turn"),
    ({"expected_observed": [{"path": "a/b/c", "attribute": "jazz"}]}, "expected_observed[0].path", "detail category"),
    ({"expected_observed": {"path": GEN}}, "expected_observed", "list"),
])
def test_multi_conversation_errors_name_line_and_field(tmp_path, change, field, words):
    rec = {k: v for k, v in MULTI.items() if k not in change or k == "expected_observed"} | change
    if "turns" in change:
        rec.pop("conversations", None)
    with pytest.raises(ChallengeDataError) as e:
        load_file(_write(tmp_path, rec), builtin_schema(), "incar")
    assert e.value.line == 1 and e.value.field.startswith(field) and words in e.value.problem


def test_single_conversation_kinds_reject_conversations_and_observations(tmp_path):
    one = {"id": "incar-0001", "split": "train", "style": "written", "kind": "open_value",
           "turns": [{"role": "user", "text": "Aldi is my supermarket."}], "expected": [{"path": SUP, "attribute": "Aldi"}]}
    with pytest.raises(ChallengeDataError) as e:
        load_file(_write(tmp_path, one | {"expected_observed": []}), builtin_schema(), "incar")
    assert e.value.field == "expected_observed"
    with pytest.raises(ChallengeDataError) as e:
        load_file(_write(tmp_path, {k: v for k, v in one.items() if k != "turns"} | {"conversations": [[]]}),
                  builtin_schema(), "incar")
    assert e.value.field == "conversations"


def test_shipped_sets_share_the_chat_file_and_have_enough_cases():
    chat, chat_travel = load_set("chat"), load_set("chat-travel")
    assert [i.id for i in chat.items] == [i.id for i in chat_travel.items] and len(chat.items) >= 200
    assert chat_travel.schema.name == "travel" and chat.schema.name != "travel"
    words = load_set("incar-words")
    count = {k: sum(1 for i in words.items if i.kind == k) for k in {i.kind for i in words.items}}
    assert count["open_value"] >= 150 and count["negation"] >= 100 and count["no_value"] >= 100
    assert count["change_of_mind"] >= 50
    assert sum(count[k] for k in ("repeated_choice", "mixed_choices", "single_choice", "not_evidence")) >= 60
    assert len(load_set("smarthome").items) >= 60


# --- a run on the fixture ----------------------------------------------------------------------
def test_ingest_runs_every_conversation_in_order():
    seen = []

    class Mem:
        def add(self, conv, user):
            seen.append(conv.id)
            from boundmem.models import IngestResult
            return IngestResult(user=user, conversation_id=conv.id)

        def preferences(self, user):
            return []

    convs = tuple(Conversation(id=f"c{i}", turns=(Turn(role="user", text="Play jazz."),)) for i in (1, 2, 3))
    got = ingest(Mem(), "u", convs)
    assert seen == ["c1", "c2", "c3"] and got["observed"] is None and got["promoted"] is None  # no observations kept


def test_fixture_run_reports_value_figures_per_split(tmp_path):
    cfg = ChallengeConfig(data_dir=FIXTURE, out=tmp_path / "out", extractor="keyword", maintainer="rules",
                          embedder="hash", show_progress=False)
    res = run_challenge(cfg)
    words = res["sets"]["incar-words"]
    assert words["n"] == 4 and set(words["summary"]) == {"train", "heldout", "all"}
    vals = words["summary"]["train"]["values"]
    assert vals["open_values_right"]["n"] == 2 and vals["cases"] == 4
    assert words["summary"]["heldout"]["values"]["cases"] == 0
    rec = {r["id"]: r for r in words["items"]}
    assert rec["incarR-0001"]["conversations"] == 3
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "Values the user said" in report and "fabricated values" in report
