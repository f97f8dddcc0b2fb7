"""Values are the user's words or a listed item they imply; polarity is decided per value, in its stretch."""
from __future__ import annotations

import pytest

from boundmem.extract.stance import stance
from boundmem.extract.values import names_value, normalise, statement_spans
from boundmem.schema import builtin_schema

SCHEMA = builtin_schema()


def ref(key: str):
    return SCHEMA.resolve(key)


@pytest.mark.parametrize("span, detail", [
    ("my favourite podcast", "favorite_podcast_shows"), ("my usual gas station", "preferred_gas_station"),
    ("something by my favourite artist", "favorite_artists_bands"), ("the usual place", "preferred_supermarket_chains"),
    ("favorite music now", "favorite_genres"), ("to eat", "favorite_cuisine"), ("place I trust", "general_news_source"),
    ("chargers", "charging_station_amenities"),
])
def test_a_span_of_reference_words_names_no_value(span, detail):
    assert not names_value(span, ref(detail))


@pytest.mark.parametrize("span, detail", [("Aldi", "preferred_supermarket_chains"), ("BBC Radio 4", "preferred_radio_station"),
                                          ("thai", "favorite_cuisine"), ("the guardian", "general_news_source")])
def test_a_name_is_a_value(span, detail):
    assert names_value(span, ref(detail))


@pytest.mark.parametrize("span, value", [("the bbc", "BBC"), ("radiohead", "Radiohead"), ("Thai food", "Thai"),
                                         ("tesla superchargers", "Tesla Superchargers"), ("BBC Radio 4", "BBC Radio 4")])
def test_values_are_normalised_user_words(span, value):
    assert normalise(span) == value


@pytest.mark.parametrize("text, span", [
    ("I always shop at Aldi.", "Aldi"), ("My favourite band is Radiohead.", "Radiohead"),
    ("Spotify is my streaming service of choice.", "Spotify"), ("I get my news from the guardian", "guardian"),
    ("I mostly listen to BBC Radio 4 in the car.", "BBC Radio 4"),
])
def test_where_a_statement_puts_its_value(text, span):
    assert statement_spans(text)[0] == span


@pytest.mark.parametrize("text, detail, value, want", [
    ("I don't really like jazz.", "favorite_genres", "Jazz", ("Jazz", "dislike")),
    ("Country music isn't for me.", "favorite_genres", "Country", ("Country", "dislike")),
    ("I used to love rock but I can't listen to it anymore.", "favorite_genres", "Rock", ("Rock", "dislike")),
    ("I'm over jazz, I can't stand it anymore.", "favorite_genres", "Jazz", ("Jazz", "dislike")),
    ("I don't really like Italian food, I'd rather have Thai.", "favorite_cuisine", "Italian", ("Italian", "dislike")),
    ("I don't really like Italian food, I'd rather have Thai.", "favorite_cuisine", "Thai", ("Thai", "like")),
    ("I'm vegetarian, so never suggest steakhouses.", "dietary_preferences", "Vegetarian", ("Vegetarian", "like")),
    ("I never fill up at GasGlo, they always overcharge.", "preferred_gas_station", "GasGlo", ("GasGlo", "dislike")),
    ("Nothing beats jazz.", "favorite_genres", "Jazz", ("Jazz", "like")),
    ("I never listen to anything but jazz.", "favorite_genres", "Jazz", ("Jazz", "like")),
    ("I always avoid highways.", "avoidance_of_specific_road_types", "Highways", ("Highways", "like")),
    ("I don't mind toll roads.", "avoidance_of_specific_road_types", "Toll roads", (None, "indifferent")),
    ("I don't care whether parking is covered.", "preference_for_covered_parking", "Yes",
     ("Indifferent to Covered Parking", "like")),
    ("I never pay extra for green fuel.", "willingness_to_pay_extra_for_green_fuel", "Yes", ("No (cheapest prefered)", "like")),
    ("I don't mind paying extra for green fuel.", "willingness_to_pay_extra_for_green_fuel", "Yes", ("Yes", "like")),
    ("I don't want to walk more than ten minutes.", "distance_willing_to_walk_from_parking_to_destination",
     "less than 10 min (accepting possible higher cost)", ("less than 10 min (accepting possible higher cost)", "like")),
])
def test_stance_per_value(text, detail, value, want):
    r = ref(detail)
    assert stance(text, r, value, r.detail.attributes) == want


@pytest.mark.slow
def test_the_closed_value_model_implies_only_when_sure(minilm):
    from boundmem.extract.closed_values import bundled_closed_values

    model = bundled_closed_values()
    assert model is not None and model.fits(minilm.name, minilm.dim)
    r = ref("price_sensitivity_for_fuel")
    item, p = model.implied(r, minilm.embed(["I always go for the cheapest fuel, whatever the detour."])[0])
    assert item == "Always cheapest" and p >= model.threshold
    other = ref("favorite_genres")   # an open category: never implied
    assert model.implied(other, minilm.embed(["I like music."])[0]) == (None, 0.0)


def test_the_closed_value_trainer_never_reads_the_test_users(tmp_path):
    from boundmem_bench.train.closed_values import carmem_examples

    with pytest.raises(ValueError, match="51-100"):
        carmem_examples(tmp_path / "none.jsonl", SCHEMA, [0, 1])


def test_a_sure_stance_model_turns_an_uncued_complaint_into_a_dislike():
    r = ref("favorite_genres")
    assert stance("Heavy metal gives me a headache.", r, "Heavy metal", (), dislike_p=0.9) == ("Heavy metal", "dislike")
    assert stance("Heavy metal gives me a headache.", r, "Heavy metal", (), dislike_p=0.2) == ("Heavy metal", "like")
    # the cues keep their say: a negation scoped to the value stays a dislike whatever the model thinks
    assert stance("I don't really like jazz.", r, "Jazz", (), dislike_p=0.1) == ("Jazz", "dislike")
    # ... and "nothing beats" is never turned into a dislike
    assert stance("Nothing beats jazz.", r, "Jazz", (), dislike_p=0.99) == ("Jazz", "like")


@pytest.mark.slow
def test_the_bundled_stance_model_reads_complaints(minilm):
    from boundmem.extract.stance_model import bundled_stance

    model = bundled_stance()
    assert model is not None and model.fits(minilm.name, minilm.dim)
    texts = ["Heavy metal gives me a headache.", "I love jazz."]
    p = model.dislike_probability(texts, minilm.embed(texts))
    assert p[0] > 0.6 > p[1]
