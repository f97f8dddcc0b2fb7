"""The recall gate: by default `recall` returns only the preferences that would change the answer; `gate=False` and
`min_score` give raw top-k. The issue's check (one user with 8 stated preferences, the default call) is the fixture."""
from __future__ import annotations

import json

import pytest

from boundmem.errors import ConfigError, InputError
from boundmem.maintain.rules import RuleMaintainer
from boundmem.extract.keyword import KeywordExtractor
from boundmem.memory import Memory
from boundmem.models import Candidate
from boundmem.retrieve.gate import FEATURES, GateModel
from boundmem.schema.load import builtin_schema
from boundmem.store.sqlite import SQLiteStore

ANN = [("Dietary Preferences", "Vegan", "I'm vegan, so no meat or dairy for me."),
       ("Favorite Genres", "Jazz", "I love listening to jazz."),
       ("Avoidance of Specific Road Types", "Toll roads", "I always avoid toll roads."),
       ("Preferred Temperature", "21 degree Celcius", "I like it at 21 degrees in the car."),
       ("Preference for Covered Parking", "Yes", "I prefer covered parking."),
       ("Preferred Gas Station", "PetroLux", "I always fill up at PetroLux."),
       ("Favorite Podcast Genres", "Technology", "I enjoy technology podcasts."),
       ("Preferred Restaurant Type", "Casual dining", "Casual dining places are my thing.")]
UNRELATED = ["What's the weather tomorrow?", "Call my mom.", "Turn on the wipers.", "Open the sunroof.",
             "Tell me a joke.", "Thanks, that's all.", "What time is it?",
             "Read my messages", "hi there", "set an alarm for seven"]
RELATED = [("Find me a place for dinner.", "points_of_interest/restaurant"),
           ("Put on some music.", "entertainment_and_media/music"),
           ("It's a bit chilly in here.", "vehicle_settings_and_comfort/climate_control"),
           ("Find parking at the mall.", "navigation_and_routing/parking"),
           ("I need to refuel.", "points_of_interest/gas_station"),
           ("Recommend a podcast", "entertainment_and_media/radio_and_podcasts")]


def memory(tmp_path, minilm, schema_name: str, prefs, user: str) -> Memory:
    schema = builtin_schema(schema_name)
    mem = Memory(schema=schema, store=SQLiteStore(tmp_path / f"{schema_name}.db"), extractor=KeywordExtractor(),
                 maintainer=RuleMaintainer(), embedder=minilm)
    mem.apply([Candidate(path=schema.resolve(d).path, attribute=a, sentence=s) for d, a, s in prefs], user, "c1")
    return mem


@pytest.fixture()
def ann(tmp_path, minilm):
    mem = memory(tmp_path, minilm, "incar", ANN, "ann")
    yield mem
    mem.store.close()


@pytest.mark.parametrize("text", UNRELATED)
def test_an_unrelated_request_recalls_nothing_by_default(ann, text):
    assert ann.recall(text, "ann") == []


def test_a_route_carries_no_diet_and_no_music(ann):
    got = {h.preference.attribute for h in ann.recall("Plan a route to Berlin", "ann")}
    assert not got & {"Vegan", "Jazz", "Casual dining", "Technology"}


@pytest.mark.parametrize("text,prefix", RELATED)
def test_a_related_request_gets_the_right_preference_first(ann, text, prefix):
    hits = ann.recall(text, "ann")
    assert hits and hits[0].preference.path.within(prefix), [(h.preference.attribute, h.why) for h in hits]
    for h in hits:   # each with its cosine, the gate's probability and why it passed
        assert h.relevance is not None and h.relevance >= ann.retriever.gate.model.threshold
        assert h.why.startswith("p=") and -1.0 <= h.score <= 1.0
    assert [h.relevance for h in hits] == sorted((h.relevance for h in hits), reverse=True)


def test_k_is_a_cap_and_none_keeps_one_subcategory(ann):
    assert len(ann.recall("Find me a place for dinner.", "ann", k=1)) == 1
    dyn = ann.recall("Find me a place for dinner.", "ann", k=None)
    assert dyn and {(h.preference.path.main, h.preference.path.sub) for h in dyn} == {("points_of_interest", "restaurant")}


def test_gate_false_is_raw_top_k(ann):
    raw = ann.recall("What's the weather tomorrow?", "ann", gate=False)
    assert len(raw) == 5 and [h.score for h in raw] == sorted((h.score for h in raw), reverse=True)
    assert all(h.relevance is None and h.why == "" for h in raw)
    assert len(ann.recall("What's the weather tomorrow?", "ann", k=8, gate=False)) == 8


def test_min_score_is_raw_top_k_above_a_cosine(ann):
    raw = ann.recall("I love listening to jazz.", "ann", k=8, gate=False)
    cut = raw[2].score
    got = ann.recall("I love listening to jazz.", "ann", k=8, min_score=cut)
    assert [h.preference.id for h in got] == [h.preference.id for h in raw if h.score >= cut] and len(got) >= 3
    assert ann.recall("I love listening to jazz.", "ann", min_score=1.0) == []


@pytest.mark.parametrize("bad", ["0.3", 2.0, -1.5, True])
def test_a_bad_min_score_is_refused(ann, bad):
    with pytest.raises(InputError, match="min_score"):
        ann.recall("Find me a place for dinner.", "ann", min_score=bad)


def test_another_users_preferences_never_pass(ann):
    assert ann.recall("Find me a place for dinner.", "bob") == []


def test_the_gate_reads_the_smart_home_schema_too(tmp_path, minilm):
    mem = memory(tmp_path, minilm, "smarthome", [
        ("Preferred Room Temperature", "warm", "I like the house warm."),
        ("Light Color", "warm white", "I always want the lights warm white in the evening."),
        ("Favorite Genre", "jazz", "I love jazz.")], "bob")
    for text in ("turn off the lights in the kitchen", "what's the weather", "call mom", "play hey jude by the beatles"):
        assert mem.recall(text, "bob") == [], text
    for text, detail in (("It's a bit chilly in here.", "preferred_room_temperature"), ("put on some music", "favorite_genre"),
                         ("set the lights for the evening", "light_color")):
        hits = mem.recall(text, "bob")
        assert hits and hits[0].preference.path.detail == detail, text
    mem.store.close()


def test_the_bundled_model_names_its_features_and_training():
    m = GateModel.bundled()
    assert set(m.features) <= set(FEATURES) and 0 < m.threshold < 1 and "visible part" in m.trained_on
    assert len(m.need_w) == 384 and "SLURP" in m.trained_on


def test_a_broken_model_file_is_a_config_error(tmp_path):
    p = tmp_path / "gate.json"
    p.write_text(json.dumps({"features": ["cosine", "no_such_feature"], "w": [1, 2], "b": 0, "threshold": 0.5}))
    with pytest.raises(ConfigError, match="no_such_feature"):
        GateModel.load(p)
    p.write_text(json.dumps({"features": ["cosine"]}))
    with pytest.raises(ConfigError, match="not a recall gate model"):
        GateModel.load(p)


def test_preferences_and_episodes_share_one_cap_taking_turns(ann):
    from datetime import date

    from boundmem.memory import merge_recalls
    from boundmem.models import Episode, EpisodeHit, EpisodeRecall

    prefs = ann.recall("Find me a place for dinner.", "ann", k=3, gate=False)
    now = prefs[0].preference.created_at
    eps = [EpisodeHit(episode=Episode(id=f"e{i}", user="ann", text=f"thought {i}", tags=("Food/Restaurant/x",),
                                      day=date(2026, 1, 1), term="long", created_at=now, updated_at=now), score=0.5)
           for i in range(3)]
    got = merge_recalls(prefs, EpisodeRecall(retrieved=True, hits=eps), 4)
    assert [h.preference.id for h in got.preferences] == [h.preference.id for h in prefs[:2]]
    assert [h.episode.id for h in got.episodes.hits] == ["e0", "e1"] and got.count == 4
    assert merge_recalls(prefs, None, 2).count == 2 and merge_recalls([], None, 5).count == 0
    assert merge_recalls(prefs, EpisodeRecall(retrieved=False), None).episodes.hits == []
