"""LLMExtractor over the fake server: forced schema tool call, validation, one retry, nothing stored when invalid."""
from __future__ import annotations

import json

import pytest

from boundmem.extract.base import ExtractionError
from boundmem.extract.llm import LLMExtractor
from boundmem.maintain.rules import RuleMaintainer
from boundmem.memory import Memory
from boundmem.models import Conversation, Turn
from boundmem.schema.model import CategoryPath
from boundmem.schema.tool import TOOL_NAME

from .fake_openai import content, tool_call

SAID = "I'm vegetarian, always have been."
CONV = Conversation(id="c1", turns=(Turn(role="user", text="Find me a place to eat."),
                                    Turn(role="assistant", text="How about the steakhouse? Do you like steak?"),
                                    Turn(role="user", text=SAID)))
DIET = CategoryPath(main="points_of_interest", sub="restaurant", detail="dietary_preferences")
GOOD = {"points_of_interest": {"restaurant": {"dietary_preferences": [
    {"user_preference": "Vegetarian", "user_sentence_preference_revealed": SAID}]}}}


def test_good_call_gives_candidates(fake, make_client, schema):
    fake.push(tool_call(TOOL_NAME, GOOD))
    ex = LLMExtractor(make_client(), user_label="User john-ab12")
    cands = ex.extract(CONV, schema)
    assert [(c.path, c.attribute, c.sentence) for c in cands] == [(DIET, "Vegetarian", SAID)]
    assert ex.last_valid_at_try == 1
    req = fake.requests[0].json
    assert req["tool_choice"] == {"type": "function", "function": {"name": TOOL_NAME}}
    assert req["temperature"] == 0
    system, human = req["messages"][0]["content"], req["messages"][1]["content"]
    assert "extract nothing" in system and "temporary" in system and "User john-ab12" in system
    assert f"User john-ab12: {SAID}" in human and "Voice Assistant: How about the steakhouse?" in human
    assert "assistant's" in human  # never the assistant's suggestions


def test_nothing_to_extract(fake, make_client, schema):
    fake.push(tool_call(TOOL_NAME, {}))
    ex = LLMExtractor(make_client())
    assert ex.extract(CONV, schema) == []
    assert ex.last_valid_at_try == 1


def test_pruned_schema_is_what_the_model_sees(fake, make_client, schema):
    fake.push(tool_call(TOOL_NAME, {}))
    LLMExtractor(make_client()).extract(CONV, schema.prune(["restaurant", "entertainment_and_media"]))
    params = fake.requests[0].json["tools"][0]["function"]["parameters"]
    text = json.dumps(params)
    assert "dietary_preferences" not in text and "favorite_genres" not in text
    assert "preferred_gas_station" in text and "preferred_temperature" in text


def test_empty_schema_asks_nothing(fake, make_client, schema):
    everything = [m.key for m in schema.mains]
    assert LLMExtractor(make_client()).extract(CONV, schema.prune(everything)) == []
    assert fake.requests == []


def test_duplicates_and_valueless_items(fake, make_client, schema):
    fake.push(tool_call(TOOL_NAME, {
        "points_of_interest": {"restaurant": {
            "dietary_preferences": [{"user_preference": "Vegetarian", "user_sentence_preference_revealed": SAID},
                                    {"user_preference": "vegetarian ", "user_sentence_preference_revealed": "again"},
                                    {"user_preference": None, "user_sentence_preference_revealed": "no value"}],
            "favorite_cuisine": None}},
        "entertainment_and_media": None}))
    cands = LLMExtractor(make_client()).extract(CONV, schema)
    assert [(c.path, c.attribute) for c in cands] == [(DIET, "Vegetarian")]


BAD_CASES = {
    # a detail category that does not exist
    "unknown category": ({"points_of_interest": {"restaurant": {"vegan_level": [{"user_preference": "high"}]}}},
                         "points_of_interest.restaurant.vegan_level"),
    # an extra key inside an item
    "extra field": ({"points_of_interest": {"restaurant": {"dietary_preferences": [
        {"user_preference": "Vegetarian", "confidence": 0.9}]}}},
        "points_of_interest.restaurant.dietary_preferences.0.confidence"),
    # a number where a string is required
    "wrong type": ({"points_of_interest": {"restaurant": {"dietary_preferences": [{"user_preference": 5}]}}},
                   "points_of_interest.restaurant.dietary_preferences.0.user_preference"),
    # a list expected, an object given
    "not a list": ({"points_of_interest": {"restaurant": {"dietary_preferences": {"user_preference": "Vegetarian"}}}},
                   "points_of_interest.restaurant.dietary_preferences"),
    # a subcategory under the wrong main category
    "wrong parent": ({"navigation_and_routing": {"restaurant": {"dietary_preferences": []}}},
                     "navigation_and_routing.restaurant"),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_invalid_output_is_retried_with_the_error(fake, make_client, schema, case):
    bad, loc = BAD_CASES[case]
    fake.push(tool_call(TOOL_NAME, bad), tool_call(TOOL_NAME, GOOD))
    ex = LLMExtractor(make_client())
    cands = ex.extract(CONV, schema)
    assert [(c.path, c.attribute) for c in cands] == [(DIET, "Vegetarian")]
    assert ex.last_valid_at_try == 2 and len(fake.requests) == 2
    first, second = fake.requests[0].messages, fake.requests[1].messages
    assert "Errors from previous try" not in first[0]["content"]
    assert "Errors from previous try" in second[0]["content"]
    assert loc in second[0]["content"]                      # the validation error, by field path
    assert json.dumps(bad) in second[0]["content"]          # the previous output
    assert second[1:] == first[1:]                          # same conversation


def test_opted_out_category_is_rejected_not_stored(fake, make_client, schema):
    """The model fills a category the user opted out of: it is not in the pruned model, so it fails validation."""
    fake.push(tool_call(TOOL_NAME, GOOD), tool_call(TOOL_NAME, {}))
    ex = LLMExtractor(make_client())
    assert ex.extract(CONV, schema.prune(["restaurant"])) == []
    assert ex.last_valid_at_try == 2
    assert "points_of_interest.restaurant" in fake.requests[1].messages[0]["content"]


@pytest.mark.parametrize("first", [tool_call(TOOL_NAME, '{"points_of_interest": {'), content("You like vegetarian food.")],
                         ids=["broken json", "no tool call"])
def test_broken_or_missing_tool_call_is_retried(fake, make_client, schema, first):
    fake.push(first, tool_call(TOOL_NAME, GOOD))
    ex = LLMExtractor(make_client())
    assert len(ex.extract(CONV, schema)) == 1
    assert ex.last_valid_at_try == 2
    retry = fake.requests[1].messages[0]["content"]
    assert ('{"points_of_interest": {' in retry) or ("You like vegetarian food." in retry)


def _memory(schema, store, hash_embedder, extractor):
    return Memory(schema=schema, store=store, extractor=extractor, maintainer=RuleMaintainer(), embedder=hash_embedder)


def test_invalid_twice_stores_nothing(fake, make_client, schema, sqlite_store, hash_embedder):
    bad = BAD_CASES["extra field"][0]
    fake.push(tool_call(TOOL_NAME, bad), tool_call(TOOL_NAME, '{"oops'))
    ex = LLMExtractor(make_client())
    mem = _memory(schema, sqlite_store, hash_embedder, ex)
    with pytest.raises(ExtractionError, match="invalid twice") as ei:
        mem.add(CONV, "alice")
    assert "c1" in str(ei.value) and "test-model" in str(ei.value)
    assert ex.last_valid_at_try is None and ex.last_run.valid_at_try is None and len(ex.last_run.errors) == 2
    assert len(fake.requests) == 2
    assert sqlite_store.preferences("alice") == [] and sqlite_store.audit("alice") == []


def test_valid_extraction_is_stored_through_memory(fake, make_client, schema, sqlite_store, hash_embedder):
    fake.push(tool_call(TOOL_NAME, GOOD))
    mem = _memory(schema, sqlite_store, hash_embedder, LLMExtractor(make_client()))
    r = mem.add(CONV, "alice")
    assert [d.action for d in r.decisions] == ["insert"]
    [p] = sqlite_store.preferences("alice")
    assert (p.path, p.attribute, p.sentence, p.conversation_id) == (DIET, "Vegetarian", SAID, "c1")
    assert sqlite_store.preferences("bob") == []


def test_from_env_uses_the_endpoint(fake, monkeypatch, schema):
    monkeypatch.setenv("BOUNDMEM_LLM_BASE_URL", fake.base_url)
    monkeypatch.setenv("BOUNDMEM_LLM_MODEL", "local-llama")
    fake.push(tool_call(TOOL_NAME, GOOD))
    ex = LLMExtractor.from_env()
    assert len(ex.extract(CONV, schema)) == 1
    assert fake.requests[0].json["model"] == "local-llama"
    ex.client.close()


def test_timeout_propagates_and_stores_nothing(fake, make_client, schema, sqlite_store, hash_embedder):
    from boundmem.llm.errors import LLMTimeout

    from .fake_openai import delay

    fake.push(delay(5.0, tool_call(TOOL_NAME, GOOD)), delay(5.0, tool_call(TOOL_NAME, GOOD)))
    mem = _memory(schema, sqlite_store, hash_embedder, LLMExtractor(make_client(timeout=0.2, max_retries=1)))
    with pytest.raises(LLMTimeout):
        mem.add(CONV, "alice")
    assert len(fake.requests) == 2
    assert sqlite_store.preferences("alice") == [] and sqlite_store.audit("alice") == []
