"""BOUNDMEM_LLM_PROFILE=small over the scripted server: no worked example from the user's schema, the answer
constrained by response_format (no tool written into the prompt), the shortest schema with only the allowed
categories, and the same validation and retry as the paper profile."""
from __future__ import annotations

import json

import pytest

from boundmem.config import Settings
from boundmem.errors import ConfigError
from boundmem.extract.llm import LLMExtractor
from boundmem.extract.registry import make_extractor
from boundmem.models import Conversation, Turn
from boundmem.schema.tool import TOOL_NAME

from .fake_openai import content, tool_call

SAID = "I can't stand country music."
CONV = Conversation(id="c1", turns=(Turn(role="user", text=SAID),))
GENRES = "Music > Favorite Genres"


def answer(*items) -> object:
    return content(json.dumps({"preferences": list(items)}), prompt_tokens=900, completion_tokens=30)


def pref(value="country", category=GENRES, polarity="dislike") -> dict:
    return {"sentence": SAID, "category": category, "value": value, "polarity": polarity, "evidence": "stated"}


def test_small_profile_asks_for_schema_constrained_json_without_a_tool(fake, make_client, schema):
    fake.push(answer(pref()))
    ex = LLMExtractor(make_client(), profile="small")
    out = ex.extract(CONV, schema).candidates
    assert [(c.attribute, c.polarity) for c in out] == [("country", "dislike")]
    req = fake.requests[0].json
    assert "tools" not in req and "tool_choice" not in req
    rf = req["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["name"] == TOOL_NAME
    items = rf["json_schema"]["schema"]["properties"]["preferences"]["items"]
    assert "description" not in json.dumps(rf["json_schema"]["schema"])          # the shortest schema
    assert len(items["properties"]["category"]["enum"]) == 41
    system = req["messages"][0]["content"]
    assert "Pets > Animals" in system and "I always pick" not in system           # the example is outside the domain
    assert "Answer with" in system and f"Call {TOOL_NAME}" not in system
    assert f"- {GENRES} (e.g. " in system


def test_small_profile_offers_only_the_allowed_categories(fake, make_client, schema):
    fake.push(answer())
    pruned = schema.prune(["entertainment_and_media/music"])
    LLMExtractor(make_client(), profile="small").extract(CONV, pruned)
    req = fake.requests[0].json
    enum = req["response_format"]["json_schema"]["schema"]["properties"]["preferences"]["items"]["properties"][
        "category"]["enum"]
    assert GENRES not in enum and len(enum) == 41 - 4 and GENRES not in req["messages"][0]["content"]


def test_small_prompt_is_shorter_than_the_paper_one(fake, make_client, schema):
    fake.push(tool_call(TOOL_NAME, {"preferences": []}), answer())
    c = make_client()
    LLMExtractor(c, profile="paper").extract(CONV, schema)
    LLMExtractor(c, profile="small").extract(CONV, schema)
    # what a chat template writes into the prompt: the messages and the tools (a response_format schema is a grammar)
    paper, small = (len(json.dumps(r.json["messages"])) + len(json.dumps(r.json.get("tools", "")))
                    for r in fake.requests)
    assert small < 0.7 * paper, (small, paper)


def test_small_profile_validates_and_retries_like_the_paper_one(fake, make_client, schema):
    fake.push(answer(pref(value="bluegrass")), answer(pref()))
    run = LLMExtractor(make_client(), profile="small").extract(CONV, schema)
    assert run.valid_at_try == 2 and [c.attribute for c in run.candidates] == ["country"]
    retry = fake.requests[1].json["messages"][3]["content"]
    assert "does not occur in what the user said" in retry and "answer again" in retry
    assert fake.requests[1].json["response_format"]["type"] == "json_schema"


def test_profile_setting(monkeypatch):
    assert Settings().llm.profile == "paper"
    assert Settings.from_env({"BOUNDMEM_LLM_PROFILE": "small"}).llm.profile == "small"
    with pytest.raises(ConfigError, match="BOUNDMEM_LLM_PROFILE"):
        Settings.from_env({"BOUNDMEM_LLM_PROFILE": "tiny"})
    with pytest.raises(ConfigError, match="flat tool shape"):
        LLMExtractor.__new__(LLMExtractor).__init__(client=None, shape="nested", profile="small")  # type: ignore[arg-type]


def test_registry_passes_the_profile():
    s = Settings.from_env({"BOUNDMEM_LLM_PROFILE": "small", "BOUNDMEM_LLM_BASE_URL": "http://127.0.0.1:9/v1",
                           "BOUNDMEM_LLM_MODEL": "m"})
    assert make_extractor("llm", s, embedder=None).profile == "small"
