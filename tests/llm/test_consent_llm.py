"""Consent by voice, LLM variant, against the scripted OpenAI-compatible server: a good answer becomes an opt-out or
a deletion with the user's turn as the consent record; a malformed one applies nothing and says why."""
from __future__ import annotations

import pytest

from boundmem.consent.llm import TOOL_NAME, ConsentError, LLMConsentDetector
from boundmem.models import Conversation, Turn

from .fake_openai import content, tool_call

RESTAURANT = "points_of_interest/restaurant"
MUSIC = "entertainment_and_media/music"


@pytest.fixture()
def mem_for(tmp_path, schema, hash_embedder):
    from boundmem.extract.keyword import KeywordExtractor
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.memory import Memory
    from boundmem.store.sqlite import SQLiteStore

    stores = []

    def make(client):
        store = SQLiteStore(tmp_path / f"llm-consent-{len(stores)}.db")
        stores.append(store)
        return Memory(schema=schema, store=store, extractor=KeywordExtractor(), maintainer=RuleMaintainer(),
                      embedder=hash_embedder, consent=LLMConsentDetector(client))

    yield make
    for s in stores:
        s.close()


def conv(cid, *texts):
    return Conversation(id=cid, turns=tuple(Turn(role="user" if i % 2 == 0 else "assistant", text=t)
                                            for i, t in enumerate(texts)))


def test_a_good_answer_opts_out_and_deletes(fake, make_client, mem_for):
    mem = mem_for(make_client())
    mem.add(conv("c0", "I love Italian food and jazz music."), "alice")   # no consent shape: no call
    assert len(fake.requests) == 0
    assert {str(p.path).rsplit("/", 1)[0] for p in mem.preferences("alice")} == {RESTAURANT, MUSIC}
    fake.push(tool_call(TOOL_NAME, {"requests": [{"turn": 0, "action": "stop_remembering", "category": RESTAURANT},
                                                   {"turn": 2, "action": "forget", "category": MUSIC}]}))
    r = mem.add(conv("c1", "Stop remembering where I like to eat.", "Okay.", "And forget my music preferences."), "alice")
    assert [(c.kind, c.prefix, c.removed) for c in r.consent] == [("opt_out", RESTAURANT, 1), ("delete", MUSIC, 1)]
    assert mem.preferences("alice") == [] and mem.store.opt_outs("alice") == [RESTAURANT]
    assert [(c.prefix, c.utterance) for c in mem.export("alice").consents] == [(RESTAURANT, "Stop remembering where I like to eat.")]
    req = fake.requests[0]
    assert req.tool_names == [TOOL_NAME]
    assert req.json["tool_choice"]["function"]["name"] == TOOL_NAME
    assert "0: Stop remembering where I like to eat." in req.text() and "Okay." not in req.text()
    assert RESTAURANT in req.text()
    # deleted, not opted out: music is stored again; the restaurant is not
    mem.add(conv("c2", "I love rock music and Mexican food."), "alice")
    assert {str(p.path).rsplit("/", 1)[0] for p in mem.preferences("alice")} == {MUSIC}


def test_an_empty_answer_applies_nothing(fake, make_client, mem_for):
    mem = mem_for(make_client())
    mem.add(conv("c0", "I love jazz music."), "bob")
    r = mem.add(conv("c1", "Don't forget my music preferences, they matter."), "bob")
    assert r.consent == [] and len(fake.requests) == 0          # no consent shape: the LLM is not asked
    fake.push(tool_call(TOOL_NAME, {"requests": []}))
    r = mem.add(conv("c2", "Forget my music preferences."), "bob")   # asked; the model finds none
    assert r.consent == [] and len(fake.requests) == 1
    assert [p.attribute for p in mem.preferences("bob")] == ["Jazz"]


@pytest.mark.parametrize("reply, why", [
    (content("Sure, I will stop remembering that."), "without calling a tool"),
    (tool_call(TOOL_NAME, '{"requests": [{"turn": 0, "action": "stop_rem'), "not valid JSON"),
    (tool_call(TOOL_NAME, {"requests": [{"turn": 0, "action": "stop_remembering", "category": "restaurants"}]}), "category"),
    (tool_call(TOOL_NAME, {"requests": [{"turn": 0, "action": "pause", "category": RESTAURANT}]}), "action"),
    (tool_call(TOOL_NAME, {"requests": [{"turn": 1, "action": "forget", "category": RESTAURANT}]}), "turn 1 is not a user turn"),
    (tool_call(TOOL_NAME, {"requests": [{"turn": 0, "action": "forget", "category": RESTAURANT, "why": "x"}]}), "why"),
    (tool_call(TOOL_NAME, {"consent": []}), "requests"),
])
def test_a_malformed_answer_applies_nothing_and_says_why(fake, make_client, mem_for, reply, why):
    mem = mem_for(make_client())
    mem.add(conv("c0", "I love Italian food."), "carol")
    fake.push(reply)
    with pytest.raises(ConsentError) as e:
        mem.add(conv("c1", "Stop remembering where I like to eat.", "Sure.", "I love jazz music."), "carol")
    msg = str(e.value)
    assert "'c1'" in msg and "nothing was applied" in msg and "test-model" in msg and why in msg
    assert [p.attribute for p in mem.preferences("carol")] == ["Italian"]   # nothing purged, nothing stored
    assert mem.store.opt_outs("carol") == []
    assert len(fake.requests) == 1


def test_an_llm_extractor_brings_the_llm_consent_detector(make_client, schema, tmp_path, hash_embedder):
    from boundmem.consent.local import LocalConsentDetector
    from boundmem.extract.keyword import KeywordExtractor
    from boundmem.extract.llm import LLMExtractor
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.memory import Memory
    from boundmem.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "m.db")
    try:
        m = Memory(schema=schema, store=store, extractor=LLMExtractor(make_client()), maintainer=RuleMaintainer(),
                   embedder=hash_embedder)
        assert isinstance(m.consent, LLMConsentDetector)
        m = Memory(schema=schema, store=store, extractor=KeywordExtractor(), maintainer=RuleMaintainer(), embedder=hash_embedder)
        assert isinstance(m.consent, LocalConsentDetector)
        m = Memory(schema=schema, store=store, extractor=KeywordExtractor(), maintainer=RuleMaintainer(),
                   embedder=hash_embedder, consent=False)
        m.add(conv("c", "Stop remembering where I like to eat."), "dan")
        assert store.opt_outs("dan") == []
    finally:
        store.close()
