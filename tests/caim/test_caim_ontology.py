"""The tag vocabulary: 3 levels, canonical tags, clear errors for bad files and unknown tags."""
import json

import pytest

from boundmem.caim.ontology import OntologyError, best_overlap, builtin_ontology, load_ontology, tag_overlap
from boundmem.caim.tags import LexiconTagger


def test_builtin_is_three_levels_and_covers_gvd_topics():
    o = builtin_ontology()
    assert o.version == 1 and len(o.tags) >= 40
    assert all(len(t.split("/")) == 3 for t in o.tags)
    for t in ("Recommendations/Media/book", "Activities/Outings/museum", "Wellbeing/Emotion/stress",
              "Preferences/Music/genre"):
        assert t in o.tags
    assert o.normalize(" preferences/music/GENRE ") == "Preferences/Music/genre"
    with pytest.raises(OntologyError, match="Preferences/Music/tempo"):
        o.normalize("Preferences/Music/tempo")
    assert o.valid(["x/y/z", "Preferences/Music/genre", "preferences/music/genre", "Activities/Trips/trip",
                    "Wellbeing/Health/health"], limit=2) == ["Preferences/Music/genre", "Activities/Trips/trip"]


def test_overlap_levels():
    assert tag_overlap("Preferences/Music/genre", "Preferences/Music/genre") == 3
    assert tag_overlap("Preferences/Music/genre", "Preferences/Music/artist") == 2
    assert tag_overlap("Preferences/Music/genre", "Preferences/Food/cuisine") == 1
    assert tag_overlap("Preferences/Music/genre", "Activities/Media/watching") == 0
    assert best_overlap(["A/B/c", "D/E/f"], ["D/E/g"]) == 2


def test_bad_ontology_file_names_the_problem(tmp_path):
    p = tmp_path / "o.json"
    p.write_text(json.dumps({"name": "x", "version": 1, "categories": [
        {"key": "A", "subcategories": [{"key": "B", "attributes": [{"key": "c", "description": "d"},
                                                                  {"key": "c", "description": "again"}]}]}]}))
    with pytest.raises(OntologyError, match="duplicate tag 'A/B/c'"):
        load_ontology(p)
    p.write_text("{not json")
    with pytest.raises(OntologyError, match="cannot read"):
        load_ontology(p)
    p.write_text(json.dumps({"name": "x", "version": 1, "categories": [{"key": "A/B", "subcategories": []}]}))
    with pytest.raises(OntologyError, match="invalid ontology"):
        load_ontology(p)


def test_lexicon_tagger_separates_what_the_ai_recommended_from_what_the_user_did():
    t = LexiconTagger(builtin_ontology())
    assert t.tags("Which books did you recommend to me?")[0] == "Recommendations/Media/book"
    assert not t.tags("Which books did you recommend to me?")[0].startswith("Preferences")
    assert all(not x.startswith("Recommendations/") for x in t.tags("I went to the museum and saw an exhibition."))
    assert "Activities/Outings/museum" in t.tags("I went to the museum and saw an exhibition.")
