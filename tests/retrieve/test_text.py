"""What is embedded for a stored preference."""
from __future__ import annotations


def test_a_dislike_is_embedded_as_a_dislike_not_as_the_like_of_the_same_value():
    from boundmem.retrieve.text import enriched_text
    from boundmem.schema.load import builtin_schema

    d = builtin_schema().resolve("Favorite Genres").detail
    like = enriched_text(d, "Jazz", "I love jazz")
    assert like == "Favorite Genres: Jazz. I love jazz."   # unchanged for a like
    assert enriched_text(d, "Jazz", "I can't stand jazz", polarity="dislike") == \
        "Favorite Genres: dislikes Jazz. I can't stand jazz."
    assert "does not mind Jazz" in enriched_text(d, "Jazz", "", polarity="indifferent")
