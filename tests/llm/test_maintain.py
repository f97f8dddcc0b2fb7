"""LLMMaintainer over the fake server: the tools offered, every existing preference shown, retries and defaults."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from boundmem.extract.llm import LLMExtractor
from boundmem.maintain.llm import LLMMaintainer
from boundmem.memory import Memory
from boundmem.models import Candidate, Conversation, Preference, Turn
from boundmem.schema.model import CategoryPath
from boundmem.schema.tool import TOOL_NAME

from .fake_openai import content, tool_call

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
DIET = CategoryPath(main="points_of_interest", sub="restaurant", detail="dietary_preferences")          # MP
PRICE = CategoryPath(main="points_of_interest", sub="restaurant", detail="desired_price_range")        # MNP


def _pref(pid: str, path: CategoryPath, attribute: str, sentence: str) -> Preference:
    return Preference(id=pid, user="alice", path=path, attribute=attribute, sentence=sentence, created_at=T0, updated_at=T0)


VEG = _pref("pk-veg", DIET, "Vegetarian", "I'm vegetarian.")
HALAL = _pref("pk-halal", DIET, "Halal", "I only eat halal.")
CHEAP = _pref("pk-cheap", PRICE, "cheap", "I like cheap places.")
KOSHER = Candidate(path=DIET, attribute="Kosher", sentence="I keep kosher.")
PRICEY = Candidate(path=PRICE, attribute="expensive", sentence="I like expensive restaurants now.")


@pytest.fixture()
def detail(schema):
    return lambda path: schema.resolve(path).detail


def test_nothing_stored_inserts_without_asking(fake, make_client, detail):
    d = LLMMaintainer(make_client()).decide(KOSHER, [], detail(DIET)).decision
    assert d.action == "insert" and d.target is None
    assert fake.requests == []


def test_mp_offers_three_tools_and_shows_every_existing_preference(fake, make_client, detail):
    fake.push(tool_call("append_preference", {"incoming_preference": "I keep kosher."}, content="Different attribute."))
    m = LLMMaintainer(make_client())
    rec = m.decide(KOSHER, [VEG, HALAL], detail(DIET))
    d = rec.decision
    assert (d.action, d.target) == ("append", None)
    assert "append_preference" in d.reason and "Different attribute." in d.reason
    assert rec.valid_at_try == 1
    req = fake.requests[0]
    assert sorted(req.tool_names) == ["append_preference", "pass_preference", "update_preference"]
    assert req.json["tool_choice"] == "required" and req.json["temperature"] == 0
    human = req.messages[1]["content"]
    for p in (VEG, HALAL):  # all of them, not only the last (the paper's bug)
        assert p.id in human and p.attribute in human and p.sentence in human
    assert "Kosher" in human and "I keep kosher." in human
    assert "one preference can ever be stored" not in req.messages[0]["content"]


@pytest.mark.parametrize("tool,args,action,target", [
    ("pass_preference", {"to_pass_incoming_preference": "x", "pk_of_equal_existing_preference": "pk-halal"}, "pass", "pk-halal"),
    ("update_preference", {"to_insert_incoming_preference": "x", "pk_of_to_delete_existing_preference": "pk-veg"}, "update", "pk-veg"),
])
def test_pass_and_update_name_their_target(fake, make_client, detail, tool, args, action, target):
    fake.push(tool_call(tool, args))
    d = LLMMaintainer(make_client()).decide(KOSHER, [VEG, HALAL], detail(DIET)).decision
    assert (d.action, d.target) == (action, target)


def test_mnp_offers_no_append(fake, make_client, detail):
    fake.push(tool_call("update_preference", {"to_insert_incoming_preference": "x",
                                              "pk_of_to_delete_existing_preference": "pk-cheap"}))
    d = LLMMaintainer(make_client()).decide(PRICEY, [CHEAP], detail(PRICE)).decision
    assert (d.action, d.target) == ("update", "pk-cheap")
    req = fake.requests[0]
    assert sorted(req.tool_names) == ["pass_preference", "update_preference"]
    assert "only one preference can ever be stored" in req.messages[0]["content"].lower()
    pk_schema = req.json["tools"][0]["function"]["parameters"]["properties"]["pk_of_equal_existing_preference"]
    assert pk_schema["enum"] == ["pk-cheap"]


def test_unknown_pk_falls_back_to_newest(fake, make_client, detail):
    fake.push(tool_call("pass_preference", {"to_pass_incoming_preference": "x", "pk_of_equal_existing_preference": "pk-42"}))
    d = LLMMaintainer(make_client()).decide(KOSHER, [VEG, HALAL], detail(DIET)).decision
    assert (d.action, d.target) == ("pass", "pk-halal")
    assert "pk-42" in d.reason


def test_no_tool_call_is_retried_once(fake, make_client, detail):
    fake.push(content("Hmm, kosher."), tool_call("append_preference", {"incoming_preference": "x"}))
    m = LLMMaintainer(make_client())
    rec = m.decide(KOSHER, [VEG], detail(DIET))
    assert rec.decision.action == "append" and rec.valid_at_try == 2
    first, second = fake.requests[0].messages[1]["content"], fake.requests[1].messages[1]["content"]
    assert "did not call a tool" not in first
    assert second.startswith("Your last run did not call a tool") and second.endswith(first)


def test_no_tool_call_twice_defaults_to_pass(fake, make_client, detail):
    fake.push(content("no"), content("still no"))
    m = LLMMaintainer(make_client())
    rec = m.decide(KOSHER, [VEG, HALAL], detail(DIET))
    assert (rec.decision.action, rec.decision.target) == ("pass", "pk-halal")
    assert rec.valid_at_try is None and len(fake.requests) == 2


def test_append_on_a_single_category_is_refused_and_retried(fake, make_client, detail):
    fake.push(tool_call("append_preference", {"incoming_preference": "x"}),
              tool_call("update_preference", {"to_insert_incoming_preference": "x",
                                              "pk_of_to_delete_existing_preference": "pk-cheap"}))
    d = LLMMaintainer(make_client()).decide(PRICEY, [CHEAP], detail(PRICE)).decision
    assert (d.action, d.target) == ("update", "pk-cheap")
    assert "append_preference" in fake.requests[1].messages[1]["content"]  # told what was wrong


def test_broken_arguments_are_retried(fake, make_client, detail):
    fake.push(tool_call("pass_preference", "{nope"),
              tool_call("pass_preference", {"to_pass_incoming_preference": "x", "pk_of_equal_existing_preference": "pk-veg"}))
    d = LLMMaintainer(make_client()).decide(KOSHER, [VEG], detail(DIET)).decision
    assert (d.action, d.target) == ("pass", "pk-veg")


def test_llm_extractor_and_maintainer_through_memory(fake, make_client, schema, sqlite_store, hash_embedder):
    """Two conversations: the first inserts a price range, the second replaces it (single-preference category)."""
    client = make_client()
    mem = Memory(schema=schema, store=sqlite_store, extractor=LLMExtractor(client), maintainer=LLMMaintainer(client),
                 embedder=hash_embedder)

    def said(text: str, value: str) -> dict:
        return {"preferences": [{"sentence": text, "category": "Restaurant > Desired Price Range", "value": value,
                                 "polarity": "like"}]}

    fake.push(tool_call(TOOL_NAME, said("I like cheap places.", "cheap")))
    mem.add(Conversation(id="c1", turns=(Turn(role="user", text="I like cheap places."),)), "alice")
    [old] = sqlite_store.preferences("alice")

    fake.push(tool_call(TOOL_NAME, said("These days I prefer expensive restaurants.", "expensive")),
              lambda req: tool_call("update_preference", {"to_insert_incoming_preference": "x",
                                                          "pk_of_to_delete_existing_preference": old.id}))
    r = mem.add(Conversation(id="c2", turns=(Turn(role="user", text="These days I prefer expensive restaurants."),)), "alice")
    assert [(d.action, d.target) for d in r.decisions] == [("update", old.id)]
    [new] = sqlite_store.preferences("alice")
    assert new.attribute == "expensive" and new.conversation_id == "c2"
    assert old.id in fake.requests[2].messages[1]["content"]
    assert [req.tool_names for req in fake.requests] == [[TOOL_NAME], [TOOL_NAME], ["pass_preference", "update_preference"]]
    assert client.usage.calls == 3


def test_the_tools_carry_polarity_and_an_update_stores_the_one_given(fake, make_client):
    from boundmem.maintain.llm import LLMMaintainer, maintenance_tools
    from boundmem.models import Candidate, Preference
    from boundmem.schema.load import builtin_schema
    from datetime import datetime, timezone

    ref = builtin_schema().resolve("Favorite Genres")
    now = datetime(2025, 1, 1, tzinfo=timezone.utc)
    jazz = Preference(id="p1", user="u", path=ref.path, attribute="Jazz", sentence="I love jazz", created_at=now,
                      updated_at=now)
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in maintenance_tools([jazz], True)}
    assert tools["update_preference"]["properties"]["polarity"]["enum"] == ["like", "dislike", "indifferent"]
    assert "polarity" in tools["append_preference"]["required"]
    fake.push(tool_call("update_preference", {"to_insert_incoming_preference": "I can't stand jazz anymore",
                                              "pk_of_to_delete_existing_preference": "p1", "polarity": "dislike"}))
    m = LLMMaintainer(make_client())
    cand = Candidate(path=ref.path, attribute="Jazz", sentence="I'm over jazz, I can't stand it anymore")
    d = m.decide(cand, [jazz], ref.detail).decision
    assert (d.action, d.target, d.candidate.attribute, d.candidate.polarity) == ("update", "p1", "Jazz", "dislike")
    shown = fake.requests[0].json["messages"][1]["content"]
    assert '"polarity": "like"' in shown   # the stored preference's polarity is shown to the model
