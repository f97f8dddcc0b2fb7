"""What an end user reads for a category and a held value: readable labels, polarity worded as such."""
from __future__ import annotations

import pytest

from boundmem.schema import builtin_schema, load_yaml
from boundmem.schema.display import category_labels, choice, clean_label, is_avoidance, statement


@pytest.mark.parametrize("name, label", [
    ("Charging Station(in public)", "Charging Station"),
    ("Preferred type of Charging when being at everyday points (f.e. work, grocery, restaurant)",
     "Preferred type of Charging when being at everyday points"),
    ("Stops  f.e. cafés", "Stops e.g. cafés"),
    ("Favorite Artists/Bands", "Favorite Artists/Bands"),
    ("Favorite Cuisine", "Favorite Cuisine"),
    ("(internal)", "(internal)"),                       # all note: keeps its own words, never empty
])
def test_clean_label(name, label):
    assert clean_label(name) == label


def test_clean_label_never_respells_a_word():
    """"Lightning" is a word: a typo is the schema's to fix with a label, not a generic rule's."""
    assert clean_label("Interior Lightning Color Preferences") == "Interior Lightning Color Preferences"


@pytest.mark.parametrize("label, attribute, polarity, reads", [
    ("Favorite Genres", "Jazz", "like", "Jazz"),
    ("Favorite Genres", "Jazz", "dislike", "Dislikes: Jazz"),
    ("Favorite Genres", "Jazz", "indifferent", "Doesn't mind: Jazz"),
    ("Avoidance of Specific Road Types", "Highways", "like", "Avoids: Highways"),
    ("Avoidance of Specific Road Types", "Toll roads", "indifferent", "Doesn't mind: Toll roads"),
    ("Willingness to Take Longer Route to Avoid Traffic", "Yes", "like", "Yes"),   # "avoid" not first: not one
])
def test_statement_words_polarity_never_as_not_x(label, attribute, polarity, reads):
    assert statement(label, attribute, polarity) == reads
    assert "not " + attribute not in reads


def test_choice():
    assert choice("Favorite Genres", "Jazz", "like") == "you chose Jazz"
    assert choice("Favorite Genres", "Jazz", "dislike") == "you turned down Jazz"
    assert choice("Avoidance of Specific Road Types", "Highways", "like") == "you avoided Highways"
    assert is_avoidance("Avoid tolls") and not is_avoidance("Tolerance for Traffic")


def test_builtin_schema_labels_read_as_people_write():
    s = builtin_schema()
    labels = {r.detail.name: r.detail.label for r in s.details()}
    assert labels["Interior Lightning Color Preferences"] == "Interior Lighting Color Preferences"
    assert "f.e." not in " ".join(labels.values()) and "(in public)" not in " ".join(labels.values())
    assert labels["Favorite Cuisine"] == "Favorite Cuisine"   # an unlabelled name is its own label
    subs = {sb.name: sb.label for m in s.mains for sb in m.subs}
    assert subs["Charging Station(in public)"] == "Public Charging Stations"
    ref = s.resolve("vehicle_settings_and_comfort/lighting_and_ambience/interior_lightning_color_preferences")
    assert ref.label == "Vehicle Settings and Comfort > Lighting and Ambience > Interior Lighting Color Preferences"


def test_a_schema_label_wins_and_round_trips():
    s = load_yaml("""
name: t
mains:
- name: Home(private)
  subs:
  - name: Lights
    details:
    - name: Lightning Colour
      label: Light colour
      multiple: false
      attributes: [Warm, Cold]
""")
    (ref,) = s.details()
    assert (ref.main.label, ref.detail.label) == ("Home", "Light colour")
    assert ref.main.key == "home_private"   # the key still comes from the name
    assert category_labels(s, ref.path) == ("Home", "Lights", "Light colour")
    assert category_labels(s, "gone/away/detail") == ("gone", "away", "detail")   # another schema version
    from boundmem.schema import dump_yaml

    assert load_yaml(dump_yaml(s)) == s
