"""Retriever behaviour: the asking user's preferences only, k respected, dynamic k, opt-outs skipped."""
from __future__ import annotations

import numpy as np
import pytest

from boundmem.embed import HashEmbedder
from boundmem.retrieve.retriever import Retriever, subcategory_prototype
from boundmem.retrieve.text import enriched_text
from boundmem.schema.load import builtin_schema

SCHEMA = builtin_schema()
CUISINE = SCHEMA.resolve("Favorite Cuisine")
RTYPE = SCHEMA.resolve("Preferred Restaurant Type")
GENRE = SCHEMA.resolve("Favorite Genres")
PARKING = SCHEMA.resolve("Preferred Parking Type")


def unit(v):
    v = np.asarray(v, np.float32)
    return v / np.linalg.norm(v)


class DictEmbedder:
    """Known texts get the vectors the test chose; anything else a vector orthogonal to them."""

    name, dim = "dict", 4

    def __init__(self, table):
        self.table = {k: unit(v) for k, v in table.items()}

    def embed(self, texts):
        return np.vstack([self.table.get(t, unit([0, 0, 0, 1])) for t in texts]) if texts else np.zeros((0, 4), np.float32)


def put(store, user, r, attribute, sentence, vec):
    with store.transaction(user) as tx:
        return tx.insert(r.path, attribute, sentence, unit(vec), None, "test")


def fill(store, emb, user, rows):
    for r, a, s in rows:
        put(store, user, r, a, s, emb.embed([enriched_text(r.detail, a, s)])[0])


ROWS = [(CUISINE, "Italian", "I love pasta and pizza"), (CUISINE, "Mexican", "tacos are my thing"),
        (RTYPE, "Fine dining", "I enjoy fancy restaurants"), (GENRE, "Jazz", "play some jazz music"),
        (PARKING, "Parking-house", "I park in a parking garage")]


def test_only_the_asking_users_preferences(sqlite_store):
    emb = HashEmbedder()
    fill(sqlite_store, emb, "alice", ROWS[:2])
    fill(sqlite_store, emb, "bob", [(CUISINE, "Italian", "I love pasta and pizza exactly like this query")])
    hits = Retriever(sqlite_store, emb).recall("I love pasta and pizza exactly like this query", "alice", k=10)
    assert {h.preference.user for h in hits} == {"alice"} and len(hits) == 2
    assert Retriever(sqlite_store, emb).recall("pasta", "carol", k=3) == []
    assert Retriever(sqlite_store, emb, SCHEMA).recall("pasta", "carol", k=None) == []


def test_k_is_respected_and_ordered(sqlite_store):
    emb = HashEmbedder()
    fill(sqlite_store, emb, "u", ROWS)
    r = Retriever(sqlite_store, emb)
    for k in (1, 2, 4):
        hits = r.recall("tacos and pasta", "u", k=k)
        assert len(hits) == k
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len(r.recall("tacos", "u", k=50)) == len(ROWS)
    assert r.recall("tacos are my thing", "u", k=1)[0].preference.attribute == "Mexican"
    with pytest.raises(ValueError, match="k must be"):
        r.recall("tacos", "u", k=0)


def test_opted_out_prefixes_are_skipped_for_fixed_and_dynamic_k(sqlite_store):
    """The store applies the user's opt-outs in search; here the rows under them are left in place (only the opt-out
    row is written), so it is the search, not the purge, that keeps them out."""
    emb = HashEmbedder()
    fill(sqlite_store, emb, "u", ROWS)
    r = Retriever(sqlite_store, emb, SCHEMA)
    with sqlite_store.transaction("u") as tx:
        tx._q("INSERT INTO opt_outs(subject, prefix, at) VALUES (?,?,?)", (tx.subject, "points_of_interest/restaurant", tx.d.now()))
    for k in (10, None):
        hits = r.recall("I love pasta and pizza", "u", k=k)
        assert hits and all(h.preference.path.sub != "restaurant" for h in hits)


def test_dynamic_k_returns_the_subcategory_of_the_best_match(sqlite_store):
    emb = HashEmbedder()
    fill(sqlite_store, emb, "u", ROWS)
    hits = Retriever(sqlite_store, emb).recall("tacos are my thing", "u", k=None)
    # 3 restaurant preferences (two cuisines, one type) and nothing from music or parking
    assert len(hits) == 3 and {h.preference.path.sub for h in hits} == {"restaurant"}
    assert hits[0].preference.attribute == "Mexican"
    hits = Retriever(sqlite_store, emb).recall("play some jazz music", "u", k=None)
    assert [h.preference.attribute for h in hits] == ["Jazz"]


def test_dynamic_k_subcategory_prior_from_the_schema(sqlite_store):
    """The single best hit is music, but the utterance sounds like the restaurant subcategory."""
    q = "somewhere to eat"
    rest, music = RTYPE, GENRE
    table = {q: [1, 1, 0, 0],
             subcategory_prototype(rest.main.name, rest.sub.name, rest.sub.description): [0, 1, 0, 0],
             subcategory_prototype(music.main.name, music.sub.name, music.sub.description): [0, 0, 1, 0]}
    emb = DictEmbedder(table)
    put(sqlite_store, "u", music, "Jazz", "jazz", [1, 0, 0, 0])                      # cos .71 to q
    put(sqlite_store, "u", rest, "Fine dining", "fancy", [0.6, 0.35, 0.72, 0])        # cos .67
    put(sqlite_store, "u", CUISINE, "Italian", "pasta", [0.5, 0.3, 0.81, 0])          # cos .57
    without = Retriever(sqlite_store, emb).recall(q, "u", k=None)
    assert [h.preference.attribute for h in without] == ["Jazz"]
    with_prior = Retriever(sqlite_store, emb, SCHEMA).recall(q, "u", k=None)
    assert [h.preference.attribute for h in with_prior] == ["Fine dining", "Italian"]
    assert Retriever(sqlite_store, emb, SCHEMA, prior_weight=0.0).recall(q, "u", k=None)[0].preference.attribute == "Jazz"
    # fixed k stays plain cosine
    assert [h.preference.attribute for h in Retriever(sqlite_store, emb, SCHEMA).recall(q, "u", k=1)] == ["Jazz"]


def test_enriched_text_names_category_attribute_and_sentence():
    t = enriched_text(CUISINE.detail, "Italian", "I love pasta.")
    assert t == "Favorite Cuisine: Italian. I love pasta."
    assert enriched_text(CUISINE.detail, "Italian", "  ") == "Favorite Cuisine: Italian."
