"""LocalMaintainer: CarMem's pass / update / append semantics on hand-written cases."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boundmem.maintain.base import enforce_multiplicity
from boundmem.maintain.rules import LocalMaintainer, same_attribute
from boundmem.maintain.polarity import PolarityModel
from boundmem.models import Candidate, Preference
from boundmem.schema.load import builtin_schema

SCHEMA = builtin_schema()
NOW = datetime(2025, 1, 1, tzinfo=timezone.utc)


def ref(name):
    return SCHEMA.resolve(name)


CUISINE, PRICE, SECURITY, WALK, TEMP = (ref(n) for n in ("Favorite Cuisine", "Desired Price Range",
                                                          "Preference for Parking with Security",
                                                          "Willingness to Take Longer Route to Avoid Traffic",
                                                          "Preferred Temperature"))


def stored(r, attribute, sentence="", pid=None, polarity="like"):
    return Preference(id=pid or f"id-{attribute}", user="u", path=r.path, attribute=attribute, sentence=sentence,
                      created_at=NOW, updated_at=NOW, polarity=polarity)


def cand(r, attribute, sentence="", polarity="like"):
    return Candidate(path=r.path, attribute=attribute, sentence=sentence, polarity=polarity)


@pytest.fixture()
def lexical(hash_embedder):
    return LocalMaintainer(hash_embedder)


def decide(m, c, existing, r):
    return enforce_multiplicity(m.decide(c, existing, r.detail).decision, existing, r.detail)


def test_nothing_stored_is_insert(lexical):
    d = lexical.decide(cand(CUISINE, "Italian", "I love Italian food"), [], CUISINE.detail).decision
    assert d.action == "insert"


def test_duplicate_passes_on_the_matching_preference(lexical):
    existing = [stored(CUISINE, "Chinese"), stored(CUISINE, "Italian", "I've been craving Italian")]
    d = lexical.decide(cand(CUISINE, "italian food", "Could you look up some Italian restaurants? I'm in the mood "
                                                     "for my favorite pasta."), existing, CUISINE.detail).decision
    assert (d.action, d.target) == ("pass", "id-Italian")


def test_a_dislike_of_a_stored_like_is_an_update_to_a_dislike(lexical):
    existing = [stored(CUISINE, "Chinese"), stored(CUISINE, "Italian")]
    d = lexical.decide(cand(CUISINE, "italian food", "I think I'm over Italian food for now, let's skip that cuisine "
                                                     "next time.", polarity="dislike"), existing, CUISINE.detail).decision
    assert (d.action, d.target) == ("update", "id-Italian")
    assert (d.candidate.attribute, d.candidate.polarity) == ("Italian", "dislike")   # the value as stored, no "not X"
    assert d.candidate.sentence.startswith("I think I'm over Italian")


def test_polarity_is_the_candidates_data_not_read_again_from_the_sentence(lexical):
    italian = [stored(CUISINE, "Italian")]
    # the extractor said like: a negative-sounding sentence does not make it a dislike (no second judge)
    assert lexical.decide(cand(CUISINE, "Italian", "I'm over Italian, avoid it"), italian, CUISINE.detail).decision.action == "pass"
    d = lexical.decide(cand(CUISINE, "Italian", "Italian, hmm.", polarity="dislike"), italian, CUISINE.detail).decision
    assert (d.action, d.candidate.polarity) == ("update", "dislike")


def test_repeated_dislike_passes_and_reaffirming_revises(lexical):
    existing = [stored(CUISINE, "Italian", "I'm done with Italian", polarity="dislike")]
    assert lexical.decide(cand(CUISINE, "Italian", "no Italian please", polarity="dislike"), existing,
                          CUISINE.detail).decision.action == "pass"
    d = lexical.decide(cand(CUISINE, "Italian", "I really love Italian food again"), existing, CUISINE.detail).decision
    assert (d.action, d.candidate.attribute, d.candidate.polarity) == ("update", "Italian", "like")
    d = lexical.decide(cand(CUISINE, "Italian", "Italian, whatever", polarity="indifferent"), existing, CUISINE.detail).decision
    assert (d.action, d.candidate.polarity) == ("update", "indifferent")


def test_an_other_value_with_a_dislike_appends_or_replaces_by_the_category_rule(lexical):
    d = decide(lexical, cand(CUISINE, "Thai", "Thai isn't for me", polarity="dislike"), [stored(CUISINE, "Italian")], CUISINE)
    assert (d.action, d.candidate.polarity) == ("append", "dislike")
    d = decide(lexical, cand(PRICE, "expensive", "never expensive places", polarity="dislike"), [stored(PRICE, "cheap")], PRICE)
    assert (d.action, d.target, d.candidate.polarity) == ("update", "id-cheap", "dislike")


def test_no_not_x_string_is_produced_anywhere_in_maintain():
    import pathlib
    import re

    import boundmem.maintain as pkg

    for f in pathlib.Path(pkg.__file__).parent.glob("*.py"):
        if f.name == "polarity.py":   # the sentence model's feature templates, never stored
            continue
        assert not re.search(r"""f["']not \{""", f.read_text()), f.name


def test_new_attribute_appends_in_a_multi_preference_category(lexical):
    d = decide(lexical, cand(CUISINE, "Mexican", "Let's find Mexican places instead from now on"),
               [stored(CUISINE, "Italian")], CUISINE)
    assert d.action == "append" and d.candidate.attribute == "Mexican"


def test_new_attribute_updates_in_a_single_preference_category(lexical):
    d = decide(lexical, cand(PRICE, "expensive", "I like fancy places"), [stored(PRICE, "cheap")], PRICE)
    assert (d.action, d.target, d.candidate.attribute) == ("update", "id-cheap", "expensive")


def test_yes_no_is_a_value_not_a_negation(lexical):
    d = decide(lexical, cand(WALK, "Yes", "I'd rather take a longer route to avoid traffic"),
               [stored(WALK, "No (traffic tolerated for fastest route)")], WALK)
    assert d.action == "update" and (d.candidate.attribute, d.candidate.polarity) == ("Yes", "like")
    d = lexical.decide(cand(SECURITY, "Yes", "I don't care about parking security anymore", polarity="dislike"),
                       [stored(SECURITY, "Yes")], SECURITY.detail).decision
    assert (d.action, d.candidate.attribute, d.candidate.polarity) == ("update", "Yes", "dislike")


@pytest.mark.parametrize("a,b,same", [
    ("Italian", "italian food", True), ("Wi-Fi availability", "WiFi", True), ("Fast food", "fast-food", True),
    ("Shortest Time", "Shortest Distance", False), ("Yes", "No", False), ("Cash", "Card", False),
    ("less than 5 min (accepting possible higher cost)", "less than 10 min (accepting possible higher cost)", False),
    ("22 degree Celcius", "24 degree Celcius", False), ("Always cheapest", "Rather cheapest", False),
])
def test_attribute_identity(a, b, same):
    assert same_attribute(a, b) is same and same_attribute(b, a) is same


def test_temperature_change_is_an_update(lexical):
    d = decide(lexical, cand(TEMP, "24 degree Celcius", "24 please"), [stored(TEMP, "22 degree Celcius")], TEMP)
    assert (d.action, d.target) == ("update", "id-22 degree Celcius")


MNP = [r for r in SCHEMA.details() if not r.detail.multiple]
words = st.text(alphabet=st.sampled_from("abcdeno -"), min_size=1, max_size=12).filter(lambda s: s.strip())


@settings(max_examples=80, deadline=None)
@given(r=st.sampled_from(MNP), attr=words, sentence=st.text(max_size=40), old=st.lists(words, min_size=1, max_size=2))
def test_single_preference_categories_never_append(r, attr, sentence, old):
    from boundmem.embed import HashEmbedder

    m = LocalMaintainer(HashEmbedder(32))
    existing = [stored(r, a, pid=f"p{i}") for i, a in enumerate(old)]
    d = m.decide(cand(r, attr, sentence), existing, r.detail).decision
    assert d.action in ("pass", "update")
    assert d.target in {p.id for p in existing}


def test_shipped_polarity_model_is_for_minilm():
    m = PolarityModel.load()
    assert (m.embedder_name, m.dim) == ("minilm", 384)
    assert m.w.shape == (2 * 384 + 5,)


def test_rule_maintainer_shares_the_semantics_without_a_model():
    from boundmem.maintain.rules import RuleMaintainer

    m = RuleMaintainer()
    italian = [stored(CUISINE, "Italian")]
    assert m.decide(cand(CUISINE, "Italian", "Italian again, yes please"), italian, CUISINE.detail).decision.action == "pass"
    d = m.decide(cand(CUISINE, "Italian", "I'm over Italian food, skip it", polarity="dislike"), italian, CUISINE.detail).decision
    assert (d.action, d.candidate.attribute, d.candidate.polarity) == ("update", "Italian", "dislike")
    assert decide(m, cand(PRICE, "expensive", ""), [stored(PRICE, "cheap")], PRICE).action == "update"
