"""Property tests: whatever bytes arrive as conversation files, schema files or LLM tool output, the result is a
clear error or a valid object, and nothing is stored from bad input."""
from __future__ import annotations

import json
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from boundmem.conversation import ConversationFileError, read_conversations
from boundmem.schema import SchemaFileError, builtin_schema, flatten, load_csv, load_yaml, output_model

SCHEMA = builtin_schema()
MODEL = output_model(SCHEMA)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids, max_size=4), max_leaves=20)

keys = st.sampled_from(["points_of_interest", "restaurant", "favorite_cuisine", "music", "user_preference",
                        "user_sentence_preference_revealed", "entertainment_and_media", "karaoke", ""])
tool_like = st.recursive(st.none() | st.text(max_size=15) | st.integers(),
                         lambda kids: st.lists(kids, max_size=3) | st.dictionaries(keys, kids, max_size=3), max_leaves=25)


@FUZZ
@given(st.one_of(json_values, tool_like))
def test_tool_output_is_valid_or_rejected_and_never_leaves_schema(args):
    try:
        out = MODEL.model_validate(args)
    except ValidationError:
        return
    for path, item in flatten(SCHEMA, out):
        assert SCHEMA.allows(path)
        assert item.user_preference or item.user_sentence_preference_revealed


@FUZZ
@given(st.lists(st.one_of(json_values, st.text(max_size=40)), min_size=1, max_size=4))
def test_conversation_files_parse_or_fail_clearly(tmp_path_factory, lines):
    p = tmp_path_factory.mktemp("f") / "c.jsonl"
    p.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines))
    try:
        convs = read_conversations(p)
    except ConversationFileError as e:
        assert str(p) in str(e) and e.problem
        return
    assert convs and all(c.turns and all(t.text.strip() for t in c.turns) for c in convs)


cell = st.text(alphabet=string.ascii_letters + " ,#()", max_size=12)


@FUZZ
@given(st.lists(st.lists(cell, min_size=0, max_size=6), max_size=6), st.booleans())
def test_csv_schema_parses_or_names_line(rows, with_header):
    header = "Main Category#Subcategory#Preference Type#Detail Category#Attributes"
    text = "\n".join(([header] if with_header else []) + ["#".join(r) for r in rows])
    try:
        s = load_csv(text, "f.csv")
    except SchemaFileError as e:
        assert e.file == "f.csv" and (e.line is None or e.line >= 1)
        return
    assert s.counts()[2] >= 1


@FUZZ
@given(json_values)
def test_yaml_schema_parses_or_fails_clearly(data):
    import yaml

    try:
        load_yaml(yaml.safe_dump(data), "s.yaml")
    except SchemaFileError as e:
        assert str(e).startswith("s.yaml")
