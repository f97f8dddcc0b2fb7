"""Schema loading, round trip, pruning, the generated tool, and errors that point at file/line/field."""
from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from boundmem.schema import (SchemaFileError, UnknownCategoryError, builtin_schema, dump_yaml, flatten, load_csv,
                             load_schema, load_yaml, output_model, tool_definition)


def test_builtin_incar_schema_matches_carmem_csv(schema, shared_data):
    csv_schema = load_schema(shared_data / "carmem" / "categories_v4.csv")
    assert schema.counts() == (4, 11, 41) == csv_schema.counts()
    by_path = {str(r.path): r.detail for r in csv_schema.details()}
    for ref in schema.details():
        other = by_path[str(ref.path)]
        assert (other.name, other.multiple, other.attributes) == (ref.detail.name, ref.detail.multiple, ref.detail.attributes)
    raw = (shared_data / "carmem" / "categories_v4.csv").read_text().splitlines()[1:]
    assert sum(r.detail.multiple for r in schema.details()) == sum(line.split("#")[2] == "MP" for line in raw)


def test_yaml_round_trip_is_lossless(schema):
    again = load_yaml(dump_yaml(schema))
    assert again == schema


def test_prune_removes_subcategory_and_keeps_siblings(schema):
    pruned = schema.prune(["Restaurant"])
    assert not any(r.sub.key == "restaurant" for r in pruned.details())
    assert pruned.counts() == (4, 10, 35)
    assert pruned.allows("points_of_interest/gas_station/preferred_gas_station")
    assert not pruned.allows("points_of_interest/restaurant/favorite_cuisine")


def test_prune_detail_and_main_and_drops_empty_parents(schema):
    p = schema.prune(["Entertainment and Media", "navigation_and_routing/routing/tolerance_for_traffic"])
    assert p.counts()[0] == 3
    assert not p.allows("navigation_and_routing/routing/tolerance_for_traffic")
    assert p.allows("navigation_and_routing/routing/avoidance_of_specific_road_types")
    # pruning every detail of a sub drops the sub itself
    lighting = [str(r.path) for r in schema.details() if r.sub.key == "lighting_and_ambience"]
    assert not any(r.sub.key == "lighting_and_ambience" for r in schema.prune(lighting).details())


def test_prune_unknown_category_names_it(schema):
    with pytest.raises(UnknownCategoryError, match="Karaoke"):
        schema.prune(["Karaoke"])


def test_tool_schema_has_only_optional_fields_and_pruned_categories_vanish(schema):
    params = tool_definition(schema.prune(["Music"]))["function"]["parameters"]
    text = json.dumps(params)
    assert "favorite_genres" not in text and "preferred_radio_station" in text
    assert params.get("required", []) == []
    for d in params.get("$defs", {}).values():
        assert d.get("required", []) == [], d.get("title")
        assert d.get("additionalProperties") is False, d.get("title")


def test_output_model_accepts_nothing_and_rejects_unknown_category(schema):
    model = output_model(schema)
    assert flatten(schema, model.model_validate({})) == []
    with pytest.raises(ValidationError) as e:
        model.model_validate({"points_of_interest": {"restaurant": {"favourite_karaoke": [{"user_preference": "x"}]}}})
    assert "favourite_karaoke" in str(e.value)
    pruned = schema.prune(["Restaurant"])
    with pytest.raises(ValidationError):
        output_model(pruned).model_validate({"points_of_interest": {"restaurant": {"favorite_cuisine": []}}})


def test_flatten_returns_paths_and_items(schema):
    model = output_model(schema)
    out = model.model_validate({"vehicle_settings_and_comfort": {"climate_control": {"preferred_temperature": [
        {"user_preference": "21", "user_sentence_preference_revealed": "I like 21 degrees"}]}}})
    [(path, item)] = flatten(schema, out)
    assert str(path) == "vehicle_settings_and_comfort/climate_control/preferred_temperature"
    assert item.user_preference == "21"


@pytest.mark.parametrize("text,line,field", [
    ("Main Category#Subcategory#Preference Type#Detail Category#Attributes\nA#B#XX#C#d\n", 2, "Preference Type"),
    ("Main Category#Subcategory#Preference Type#Detail Category#Attributes\nA#B#MP#C#d\nA#B#MP#\n", 3, None),
    ("Main Category#Subcategory#Preference Type#Detail Category#Attributes\nA##MP#C#d\n", 2, "Subcategory"),
    ("Main#Sub\nA#B\n", 1, None),
    ("Main Category#Subcategory#Preference Type#Detail Category#Attributes\nA#B#MP#C#d\nA#B#MNP#C#e\n", 3, "Detail Category"),
])
def test_bad_csv_names_file_line_field(text, line, field):
    with pytest.raises(SchemaFileError) as e:
        load_csv(text, "cats.csv")
    assert e.value.file == "cats.csv" and e.value.line == line and e.value.field == field
    assert "cats.csv" in str(e.value) and f"line {line}" in str(e.value)


def test_bad_yaml_points_at_line_and_field(tmp_path):
    f = tmp_path / "home.yaml"
    f.write_text("name: home\nmains:\n- name: Lights\n  subs:\n  - name: Rooms\n    details:\n"
                 "    - name: Favourite colour\n      multiple: maybe\n")
    with pytest.raises(SchemaFileError) as e:
        load_schema(f)
    assert e.value.line == 8 and "multiple" in e.value.field and str(f) in str(e.value)


def test_yaml_syntax_error_and_missing_file(tmp_path):
    f = tmp_path / "broken.yaml"
    f.write_text("name: x\nmains: [\n")
    with pytest.raises(SchemaFileError, match="invalid YAML"):
        load_schema(f)
    with pytest.raises(SchemaFileError, match="cannot read"):
        load_schema(tmp_path / "nope.yaml")


def test_empty_subcategory_rejected():
    with pytest.raises(SchemaFileError, match="no detail categories"):
        load_yaml("name: x\nmains:\n- name: A\n  subs:\n  - name: B\n    details: []\n", "x.yaml")


def test_builtin_unknown_name():
    with pytest.raises(SchemaFileError):
        builtin_schema("nope")
