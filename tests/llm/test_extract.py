"""LLMExtractor over the fake server: forced schema tool call, validation, one retry, nothing stored when invalid.

The default tool shape is flat ({"preferences": [{sentence, category, value, polarity}]}, the category an enum of
the user's allowed detail categories); the paper's nested shape stays available as shape="nested"."""
from __future__ import annotations

import json
import threading

import pytest

from boundmem.config import Settings
from boundmem.extract.base import ExtractionError
from boundmem.extract.registry import make_extractor
from boundmem.extract.llm import LLMExtractor
from boundmem.llm.flat import compile_flat
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
DIET_LABEL = "Restaurant > Dietary Preferences"
GENRES_LABEL = "Music > Favorite Genres"


def item(value="Vegetarian", category=DIET_LABEL, polarity="like", sentence=SAID) -> dict:
    return {"sentence": sentence, "category": category, "value": value, "polarity": polarity}


GOOD = {"preferences": [item()]}
NESTED_GOOD = {"points_of_interest": {"restaurant": {"dietary_preferences": [
    {"user_preference": "Vegetarian", "user_sentence_preference_revealed": SAID}]}}}


def test_good_call_gives_candidates(fake, make_client, schema):
    fake.push(tool_call(TOOL_NAME, GOOD))
    ex = LLMExtractor(make_client(), user_label="User john-ab12")
    run = ex.extract(CONV, schema)
    assert [(c.path, c.attribute, c.sentence) for c in run.candidates] == [(DIET, "Vegetarian", SAID)]
    assert run.valid_at_try == 1 and run.errors == []
    assert ex.stats.model_dump() == {"runs": 1, "first_try": 1, "after_retry": 0, "invalid": 0, "failed": 0,
                                     "empty": 0, "candidates": 1}
    req = fake.requests[0].json
    assert req["tool_choice"] == {"type": "function", "function": {"name": TOOL_NAME}}
    assert req["temperature"] == 0
    system, human = req["messages"][0]["content"], req["messages"][1]["content"]
    assert "save nothing" in system and "one-off choice" in system and "User john-ab12" in system
    assert f"- {DIET_LABEL} (e.g. Vegetarian, Vegan, Gluten-Free, Dairy-Free)" in system  # the category guide
    assert f"User john-ab12: {SAID}" in human and "Voice Assistant: How about the steakhouse?" in human
    assert SAID not in system  # schema first, conversation last: the system prompt depends on the schema only


def test_flat_tool_is_compact_and_exact(schema):
    """The category is an enum of exactly the allowed detail categories; every field required, nothing else allowed."""
    flat = compile_flat(schema)
    params = flat.tool["function"]["parameters"]
    it = params["properties"]["preferences"]["items"]
    assert it["required"] == ["sentence", "category", "value", "polarity", "evidence"] and it["additionalProperties"] is False
    assert it["properties"]["category"]["enum"] == list(flat.labels) and len(flat.labels) == 41
    assert {str(p) for p in flat.paths.values()} == {str(r.path) for r in schema.details()}
    from boundmem.schema.tool import tool_definition

    # the tool JSON plus the guide is a fraction of the nested tool
    assert len(json.dumps(flat.tool)) + len(flat.guide) < len(json.dumps(tool_definition(schema))) / 3


def test_system_prompt_is_the_same_for_every_conversation(fake, make_client, schema):
    """The prefix a server can cache (system prompt + tool) does not change with the conversation."""
    fake.push(tool_call(TOOL_NAME, {"preferences": []}), tool_call(TOOL_NAME, {"preferences": []}))
    ex = LLMExtractor(make_client())
    ex.extract(CONV, schema).candidates
    ex.extract(Conversation(id="c2", turns=(Turn(role="user", text="I hate jazz."),)), schema).candidates
    a, b = (r.json for r in fake.requests)
    assert a["messages"][0] == b["messages"][0] and a["tools"] == b["tools"]
    assert a["messages"][1] != b["messages"][1]


def test_nothing_to_extract(fake, make_client, schema):
    fake.push(tool_call(TOOL_NAME, {"preferences": []}))
    ex = LLMExtractor(make_client())
    run = ex.extract(CONV, schema)
    assert run.candidates == [] and run.valid_at_try == 1 and ex.stats.empty == 1


def test_threads_sharing_one_extractor_each_get_their_own_outcome(fake, make_client, schema):
    """The service runs requests on a thread pool over one extractor: how a call went must come back with the call,
    not sit on the instance for whichever call ends last to overwrite. Both first tries are held in flight together."""
    jazz = Conversation(id="c-jazz", turns=(Turn(role="user", text="I can't stand jazz."),))
    both_in_flight = threading.Barrier(2, timeout=5)

    def answer(req):
        text = req.text()
        if "Errors from previous try" in text:            # the jazz conversation's retry
            return tool_call(TOOL_NAME, {"preferences": [item("jazz", GENRES_LABEL, "dislike", "I can't stand jazz.")]})
        both_in_flight.wait()
        if "I can't stand jazz." in text:                 # first try of the jazz conversation: invalid
            return tool_call(TOOL_NAME, {"preferences": [item(polarity="love")]})
        return tool_call(TOOL_NAME, GOOD)                 # the diet conversation: valid at once

    fake.push(answer, answer, answer)
    ex = LLMExtractor(make_client())
    runs: dict[str, object] = {}
    threads = [threading.Thread(target=lambda c=c: runs.__setitem__(c.id, ex.extract(c, schema))) for c in (CONV, jazz)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    diet, hate = runs["c1"], runs["c-jazz"]
    assert diet.valid_at_try == 1 and diet.errors == [] and [c.attribute for c in diet.candidates] == ["Vegetarian"]
    assert hate.valid_at_try == 2 and len(hate.errors) == 1
    assert [(c.attribute, c.polarity) for c in hate.candidates] == [("jazz", "dislike")]
    assert ex.stats.model_dump() == {"runs": 2, "first_try": 1, "after_retry": 1, "invalid": 0, "failed": 0,
                                     "empty": 0, "candidates": 2}


def test_a_dislike_is_polarity_data_never_a_not_x_string(fake, make_client, schema):
    fake.push(tool_call(TOOL_NAME, {"preferences": [
        item("country", GENRES_LABEL, "dislike", "I can't stand country."),
        item("Yes", "Parking > Preference for Covered Parking", "dislike", "I don't need covered parking."),
        item("not jazz", GENRES_LABEL, "dislike", "No jazz, ever."),
        item("no pop", GENRES_LABEL, "like", "No pop, please."),
        item("rock", GENRES_LABEL, "indifferent", "I don't mind rock.")]}))
    said = Conversation(id="c-neg", turns=(Turn(role="user", text="I can't stand country. I don't need covered parking. "
                                                              "No jazz, ever. No pop, please. I don't mind rock."),))
    cands = LLMExtractor(make_client()).extract(said, schema).candidates
    assert [(c.attribute, c.polarity) for c in cands] == [
        ("country", "dislike"), ("Indifferent to Covered Parking", "like"), ("jazz", "dislike"), ("pop", "dislike"),
        ("rock", "indifferent")]
    assert cands[2].span == "not jazz"


def test_pruned_schema_is_what_the_model_sees(fake, make_client, schema):
    fake.push(tool_call(TOOL_NAME, {"preferences": []}))
    LLMExtractor(make_client()).extract(CONV, schema.prune(["restaurant", "entertainment_and_media"])).candidates
    req = fake.requests[0].json
    text = json.dumps(req["tools"]) + req["messages"][0]["content"]
    assert "Dietary Preferences" not in text and "Favorite Genres" not in text and "Vegetarian" not in text
    assert "Preferred Gas Station" in text and "Preferred Temperature" in text


def test_empty_schema_asks_nothing(fake, make_client, schema):
    everything = [m.key for m in schema.mains]
    assert LLMExtractor(make_client()).extract(CONV, schema.prune(everything)).candidates == []
    assert fake.requests == []


def test_duplicates_are_merged(fake, make_client, schema):
    fake.push(tool_call(TOOL_NAME, {"preferences": [item(), item("vegetarian ", sentence="again")]}))
    cands = LLMExtractor(make_client()).extract(CONV, schema).candidates
    assert [(c.path, c.attribute) for c in cands] == [(DIET, "Vegetarian")]


BAD_CASES = {
    # a category that is not one of the labels
    "unknown category": ({"preferences": [item(category="Restaurant > Vegan Level")]}, "preferences.0.category"),
    # an extra key inside an item
    "extra field": ({"preferences": [{**item(), "confidence": 0.9}]}, "preferences.0.confidence"),
    # a number where a string is required
    "wrong type": ({"preferences": [item(value=5)]}, "preferences.0.value"),
    # an empty value (nothing could be stored or compared): said, not dropped silently
    "empty value": ({"preferences": [item(value=" ")]}, "preferences.0.value"),
    # a list expected, an object given
    "not a list": ({"preferences": item()}, "preferences"),
    # the nested shape answered to the flat tool
    "nested answer": (NESTED_GOOD, "points_of_interest"),
    # polarity outside its enum
    "bad polarity": ({"preferences": [item(polarity="love")]}, "preferences.0.polarity"),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_invalid_output_is_retried_with_the_error(fake, make_client, schema, case):
    bad, loc = BAD_CASES[case]
    fake.push(tool_call(TOOL_NAME, bad), tool_call(TOOL_NAME, GOOD))
    ex = LLMExtractor(make_client())
    run = ex.extract(CONV, schema)
    assert [(c.path, c.attribute) for c in run.candidates] == [(DIET, "Vegetarian")]
    assert run.valid_at_try == 2 and len(fake.requests) == 2 and ex.stats.after_retry == 1
    assert len(run.errors) == 1 and loc in run.errors[0]
    first, second = fake.requests[0].messages, fake.requests[1].messages
    assert second[:2] == first  # the cached prefix (system, tool, conversation) is kept; the retry comes after it
    assert second[2] == {"role": "assistant", "content": json.dumps(bad, ensure_ascii=False)}
    retry = second[3]["content"]
    assert "Errors from previous try" in retry and loc in retry   # the validation error, by field path
    assert len(retry) < 2000                                      # not pydantic's list of all 41 labels


def test_unknown_category_names_the_allowed_ones(fake, make_client, schema):
    fake.push(tool_call(TOOL_NAME, {"preferences": [item(category="Dietary Preferences")]}), tool_call(TOOL_NAME, GOOD))
    LLMExtractor(make_client()).extract(CONV, schema).candidates
    retry = fake.requests[1].messages[-1]["content"]
    assert "'Dietary Preferences' is not allowed" in retry and DIET_LABEL in retry


def test_opted_out_category_is_rejected_not_stored(fake, make_client, schema):
    """The model names a category the user opted out of: it is not in the enum, so it fails validation."""
    fake.push(tool_call(TOOL_NAME, GOOD), tool_call(TOOL_NAME, {"preferences": []}))
    ex = LLMExtractor(make_client())
    run = ex.extract(CONV, schema.prune(["restaurant"]))
    assert run.candidates == [] and run.valid_at_try == 2
    assert DIET_LABEL not in fake.requests[0].json["tools"][0]["function"]["parameters"]["properties"]["preferences"][
        "items"]["properties"]["category"]["enum"]
    assert "preferences.0.category" in fake.requests[1].messages[-1]["content"]


@pytest.mark.parametrize("first", [tool_call(TOOL_NAME, '{"preferences": ['), content("You like vegetarian food.")],
                         ids=["broken json", "no tool call"])
def test_broken_or_missing_tool_call_is_retried(fake, make_client, schema, first):
    fake.push(first, tool_call(TOOL_NAME, GOOD))
    ex = LLMExtractor(make_client())
    run = ex.extract(CONV, schema)
    assert len(run.candidates) == 1 and run.valid_at_try == 2
    retry = fake.requests[1].messages[-1]["content"]
    assert ('{"preferences": [' in retry) or ("You like vegetarian food." in retry)


def test_tool_call_written_as_text_in_qwen_tags_is_read(fake, make_client, schema):
    """llama-cpp-python with tool_choice="required" (and servers without a tool parser) leave the call in the text."""
    fake.push(content('<tool_call>\n{"name": "%s", "arguments": %s}\n</tool_call>' % (TOOL_NAME, json.dumps(GOOD))))
    ex = LLMExtractor(make_client())
    ex.client._named_choice = False
    assert [c.attribute for c in ex.extract(CONV, schema).candidates] == ["Vegetarian"]


def test_max_tokens_is_sent(fake, make_client, schema):
    fake.push(tool_call(TOOL_NAME, GOOD))
    LLMExtractor(make_client(), max_tokens=300).extract(CONV, schema).candidates
    assert fake.requests[0].json["max_tokens"] == 300


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
    assert "Last error: " in str(ei.value)
    assert ex.stats.invalid == 1 and ex.stats.runs == 1
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
    monkeypatch.setenv("BOUNDMEM_LLM_MAX_TOKENS", "256")
    fake.push(tool_call(TOOL_NAME, GOOD))
    ex = make_extractor("llm", Settings.from_env(), None)
    assert len(ex.extract(CONV, schema).candidates) == 1
    assert fake.requests[0].json["model"] == "local-llama" and fake.requests[0].json["max_tokens"] == 256
    ex.client.close()


def test_from_env_nested_shape(fake, monkeypatch, schema):
    monkeypatch.setenv("BOUNDMEM_LLM_BASE_URL", fake.base_url)
    monkeypatch.setenv("BOUNDMEM_LLM_TOOL_SHAPE", "nested")
    fake.push(tool_call(TOOL_NAME, NESTED_GOOD))
    ex = make_extractor("llm", Settings.from_env(), None)
    assert ex.shape == "nested" and [c.attribute for c in ex.extract(CONV, schema).candidates] == ["Vegetarian"]
    ex.client.close()


def test_timeout_propagates_and_stores_nothing(fake, make_client, schema, sqlite_store, hash_embedder):
    from boundmem.llm.errors import LLMTimeout

    from .fake_openai import delay

    fake.push(delay(5.0, tool_call(TOOL_NAME, GOOD)), delay(5.0, tool_call(TOOL_NAME, GOOD)))
    ex = LLMExtractor(make_client(timeout=0.2, max_retries=1))
    mem = _memory(schema, sqlite_store, hash_embedder, ex)
    with pytest.raises(LLMTimeout):
        mem.add(CONV, "alice")
    assert len(fake.requests) == 2 and ex.stats.failed == 1
    assert sqlite_store.preferences("alice") == [] and sqlite_store.audit("alice") == []


# --- the paper's nested shape -------------------------------------------------------------------
def test_nested_good_call(fake, make_client, schema):
    fake.push(tool_call(TOOL_NAME, NESTED_GOOD))
    ex = LLMExtractor(make_client(), shape="nested")
    assert [(c.path, c.attribute, c.sentence) for c in ex.extract(CONV, schema).candidates] == [(DIET, "Vegetarian", SAID)]
    system = fake.requests[0].json["messages"][0]["content"]
    assert "extract nothing" in system and "temporary" in system


def test_nested_pruned_schema(fake, make_client, schema):
    fake.push(tool_call(TOOL_NAME, {}))
    LLMExtractor(make_client(), shape="nested").extract(CONV, schema.prune(["restaurant", "entertainment_and_media"])).candidates
    text = json.dumps(fake.requests[0].json["tools"][0]["function"]["parameters"])
    assert "dietary_preferences" not in text and "favorite_genres" not in text
    assert "preferred_gas_station" in text and "preferred_temperature" in text


def test_nested_duplicates_and_valueless_items(fake, make_client, schema):
    fake.push(tool_call(TOOL_NAME, {
        "points_of_interest": {"restaurant": {
            "dietary_preferences": [{"user_preference": "Vegetarian", "user_sentence_preference_revealed": SAID},
                                    {"user_preference": "vegetarian ", "user_sentence_preference_revealed": "again"},
                                    {"user_preference": None, "user_sentence_preference_revealed": "no value"}],
            "favorite_cuisine": None}},
        "entertainment_and_media": None}))
    cands = LLMExtractor(make_client(), shape="nested").extract(CONV, schema).candidates
    assert [(c.path, c.attribute) for c in cands] == [(DIET, "Vegetarian")]


NESTED_BAD = {
    "unknown category": ({"points_of_interest": {"restaurant": {"vegan_level": [{"user_preference": "high"}]}}},
                         "points_of_interest.restaurant.vegan_level"),
    "wrong parent": ({"navigation_and_routing": {"restaurant": {"dietary_preferences": []}}},
                     "navigation_and_routing.restaurant"),
}


@pytest.mark.parametrize("case", list(NESTED_BAD))
def test_nested_invalid_output_is_retried(fake, make_client, schema, case):
    bad, loc = NESTED_BAD[case]
    fake.push(tool_call(TOOL_NAME, bad), tool_call(TOOL_NAME, NESTED_GOOD))
    ex = LLMExtractor(make_client(), shape="nested")
    assert [(c.path, c.attribute) for c in ex.extract(CONV, schema).candidates] == [(DIET, "Vegetarian")]
    first, second = fake.requests[0].messages, fake.requests[1].messages
    assert second[:2] == first and loc in second[-1]["content"] and json.dumps(bad) in second[-1]["content"]


def test_unknown_shape_is_refused(make_client):
    with pytest.raises(ValueError, match="tool shape"):
        LLMExtractor(make_client(), shape="tree")


# --- the data model: open values grounded in the user's words, closed ones listed, evidence, polarity -------
JAZZ = Conversation(id="c-jazz", turns=(Turn(role="user", text="Play something."),
                                        Turn(role="assistant", text="How about some smooth jazz or Miles Davis?"),
                                        Turn(role="user", text="I can't stand jazz, I always put on the Rolling Stones.")))
ARTISTS_LABEL = "Music > Favorite Artists/Bands"


def test_a_fabricated_value_is_rejected_and_retried_with_the_error(fake, make_client, schema):
    """The model names an artist the user never said (the assistant did): validation rejects it, the retry carries
    why, the corrected answer is the user's span."""
    said = "I can't stand jazz, I always put on the Rolling Stones."
    fake.push(tool_call(TOOL_NAME, {"preferences": [item("Miles Davis", ARTISTS_LABEL, sentence=said)]}),
              tool_call(TOOL_NAME, {"preferences": [item("the Rolling Stones", ARTISTS_LABEL, sentence=said),
                                                    item("Jazz", GENRES_LABEL, "dislike", said)]}))
    ex = LLMExtractor(make_client())
    run = ex.extract(JAZZ, schema)
    assert run.valid_at_try == 2 and "does not occur in what the user said" in run.errors[0]
    retry = fake.requests[1].messages[-1]["content"]
    assert "'Miles Davis' does not occur in what the user said" in retry and "preferences.0" in retry
    assert [(c.attribute, c.polarity, c.evidence) for c in run.candidates] == [
        ("the Rolling Stones", "like", "stated"), ("Jazz", "dislike", "stated")]


def test_a_value_only_the_assistant_said_twice_stores_nothing(fake, make_client, schema):
    bad = {"preferences": [item("Miles Davis", ARTISTS_LABEL)]}
    fake.push(tool_call(TOOL_NAME, bad), tool_call(TOOL_NAME, bad))
    with pytest.raises(ExtractionError, match="does not occur"):
        LLMExtractor(make_client()).extract(JAZZ, schema)


@pytest.mark.parametrize("value,said", [("rolling stones", "I always put on the Rolling  Stones!"),
                                        ("Highway", "I avoid highways whenever I can."),
                                        ("the Thai place", "I love thai place near work.")])
def test_an_open_value_matches_the_users_words_folded(value, said):
    from boundmem.llm.flat import occurs

    assert occurs(value, said)
    assert not occurs("Stones Rolling", "I always put on the Rolling Stones.")
    assert not occurs("jazz", "I love jazzercise.")


def test_a_closed_value_must_be_a_listed_item(fake, make_client, schema):
    """Closed categories take an enum of their items: "lukewarm" is not one; "low" is stored in the listed spelling."""
    said = "Keep the fan low, always."
    conv = Conversation(id="c-fan", turns=(Turn(role="user", text=said),))
    fan = "Climate Control > Fan Speed Preferences"
    fake.push(tool_call(TOOL_NAME, {"preferences": [item("gentle", fan, sentence=said)]}),
              tool_call(TOOL_NAME, {"preferences": [item("low", fan, sentence=said)]}))
    ex = LLMExtractor(make_client())
    run = ex.extract(conv, schema)
    assert "is not one of the listed items" in run.errors[0] and "Low | Medium | High" in run.errors[0]
    assert [(c.attribute, c.span) for c in run.candidates] == [("Low", "low")]
    system = fake.requests[0].json["messages"][0]["content"]
    assert f"- {fan} (one of: Low | Medium | High)" in system


def test_an_implied_closed_item_needs_no_literal_words(fake, make_client, schema):
    said = "I always go for the cheapest fuel."
    conv = Conversation(id="c-fuel", turns=(Turn(role="user", text=said),))
    fake.push(tool_call(TOOL_NAME, {"preferences": [item("Always cheapest", "Gas Station > Price Sensitivity for Fuel",
                                                         sentence=said)]}))
    assert [c.attribute for c in LLMExtractor(make_client()).extract(conv, schema).candidates] == ["Always cheapest"]


def test_observed_and_stated_evidence(fake, make_client, schema, sqlite_store, hash_embedder):
    """A one-off choice comes back observed and is kept as an observation, not a preference; a stated one is stored."""
    conv = Conversation(id="c-obs", turns=(Turn(role="user", text="Play some jazz. I'm vegetarian, always have been."),))
    fake.push(tool_call(TOOL_NAME, {"preferences": [
        {**item("jazz", GENRES_LABEL, sentence="Play some jazz."), "evidence": "observed"},
        {**item("vegetarian", sentence=SAID), "evidence": "stated"}]}))
    mem = _memory(schema, sqlite_store, hash_embedder, LLMExtractor(make_client()))
    r = mem.add(conv, "alice")
    assert [(o.attribute, o.polarity) for o in r.observed] == [("jazz", "like")]
    assert [p.attribute for p in sqlite_store.preferences("alice")] == ["vegetarian"]
    it = fake.requests[0].json["tools"][0]["function"]["parameters"]["properties"]["preferences"]["items"]
    assert it["properties"]["evidence"]["enum"] == ["stated", "observed"] and "evidence" in it["required"]


def test_bad_evidence_is_retried(fake, make_client, schema):
    fake.push(tool_call(TOOL_NAME, {"preferences": [{**item(), "evidence": "guessed"}]}), tool_call(TOOL_NAME, GOOD))
    run = LLMExtractor(make_client()).extract(CONV, schema)
    assert run.valid_at_try == 2 and "preferences.0.evidence" in run.errors[0]
