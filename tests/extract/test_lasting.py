"""Only the speaker's lasting preferences: one-off commands, other people's tastes, questions and odd input
store nothing; dislikes are stored as dislikes; two preferences in one sentence and a rule after a one-off
choice are both found. Sentences written for these tests, not taken from any data set."""
from __future__ import annotations

import pytest

from boundmem.extract.lasting import bundled_lasting, cue_of, vetoed
from boundmem.extract.local import LocalExtractor
from boundmem.extract.speech import clauses, is_english, strip_speech
from boundmem.models import Conversation, Turn


def said(*texts: str) -> Conversation:
    turns = []
    for t in texts:
        turns += [Turn(role="user", text=t), Turn(role="assistant", text="Okay.")]
    return Conversation(id="c", turns=turns)


@pytest.fixture(scope="module")
def extractor(minilm):
    ex = LocalExtractor(minilm)
    assert ex.lasting is not None
    return ex


def test_speech_is_cut_into_clauses_and_wake_words_dropped():
    assert strip_speech("hey car um I always take the train") == "I always take the train"
    assert clauses("ok take that one in general though i'd rather avoid highways") == [
        "ok take that one", "in general though i'd rather avoid highways"]
    assert clauses("I'm vegan and I always pay by card.") == ["I'm vegan", "I always pay by card"]
    assert clauses("alexa") == []
    assert clauses("I usually like it warm, around 23 degrees.") == ["I usually like it warm, around 23 degrees"]
    assert not is_english("Ich höre am liebsten Jazz und fahre nie über die Autobahn.")
    assert is_english("play jazz")


def test_ownership_and_one_off_markers_veto():
    assert vetoed("my wife loves sushi, find a sushi place")
    assert vetoed("the kids always want pop music")
    assert vetoed("for this evening only, set the lights to warm")
    assert not vetoed("my wife loves sushi but I can't stand it")
    assert not vetoed("from now on I always want the lights warm")
    assert cue_of("I can't stand country music") == "I can't stand"


@pytest.mark.slow
@pytest.mark.parametrize("text", [
    "Set the ambient light to blue.", "play some jazz", "olly turn the fan up to high",
    "Take the route without tolls this time.", "Find me a cheap Italian place for tonight.",
    "my wife loves sushi so find a sushi place", "My brother always fills up at PetroLux, stop there.",
    "do you like jazz?", "What's your favourite song?", "how do I set the background colour to blue in css",
    "hey car", "um uh", "Ich höre am liebsten Jazz.", "🙂🙂🙂", "play play play play",
    "yes that one", "Sure, let's do the Chinese place.",
])
def test_nothing_lasting_stores_nothing(extractor, schema, text):
    assert extractor.extract(said(text), schema) == []


@pytest.mark.slow
def test_a_very_long_rambling_turn_stores_nothing_and_raises_nothing(extractor, schema):
    text = " ".join(["so we were driving along and the road went on and the weather was grey and"] * 60)
    assert extractor.extract(said(text), schema) == []


@pytest.mark.slow
def test_a_dislike_is_stored_as_a_dislike(extractor, schema):
    got = extractor.extract(said("Never ever play country music for me, I can't stand it."), schema)
    assert [(c.path.detail, c.attribute) for c in got] == [("favorite_genres", "not Country")]
    assert got[0].cue


@pytest.mark.slow
def test_a_negation_elsewhere_in_the_sentence_does_not_flip_the_value(extractor, schema):
    got = extractor.extract(said("I'm vegetarian, so please never suggest steakhouses to me."), schema)
    assert [(c.path.detail, c.attribute) for c in got] == [("dietary_preferences", "Vegetarian")]


@pytest.mark.slow
def test_two_preferences_in_one_sentence(extractor, schema):
    got = extractor.extract(said("I'm vegan and I always pay by card."), schema)
    assert {(c.path.detail, c.attribute) for c in got} == {("dietary_preferences", "Vegan"),
                                                           ("preferred_payment_method", "Card")}
    got = extractor.extract(said("I love jazz and classical, that's what I always listen to."), schema)
    assert {(c.path.detail, c.attribute) for c in got} == {("favorite_genres", "Jazz"), ("favorite_genres", "Classical")}


@pytest.mark.slow
def test_the_rule_after_a_one_off_choice_is_kept(extractor, schema):
    got = extractor.extract(said("Okay, take the second route. As a rule though, I avoid toll roads."), schema)
    assert [(c.path.detail, c.attribute) for c in got] == [("avoidance_of_specific_road_types", "Toll roads")]


@pytest.mark.slow
def test_no_invented_attribute(extractor, schema):
    """A trivia question that starts with a name must not become a favourite artist cut from its first words."""
    for text in ("taylor swift how old is she", "what are the lyrics of i will always love you"):
        assert extractor.extract(said(text), schema) == []


@pytest.mark.slow
def test_the_audit_log_records_why_it_was_stored(tmp_path, minilm):
    from boundmem import Memory

    mem = Memory.local(tmp_path / "m.db")
    mem.add(said("I always fill up at PetroLux."), user="ann")
    causes = [e.cause for e in mem.export("ann").audit if e.op == "insert"]
    assert causes and "lasting: 'always'" in causes[0]


def test_the_bundled_model_is_for_minilm():
    m = bundled_lasting()
    assert m is not None and m.embedder == "minilm" and m.dim == 384 and 0 < m.threshold < 1
