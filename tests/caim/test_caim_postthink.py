"""Local post-thinking: sessions become short tagged third-person thoughts with provenance, never dialogue (the
source turns are kept apart, as retrieval keys, unless `sources=False`)."""
import json
import re
from datetime import date

import pytest

from boundmem.caim.base import DialogueTurn
from boundmem.caim.ontology import builtin_ontology
from boundmem.caim.postthink import LocalThinker
from boundmem.caim.system import CAIM
from boundmem.caim.tags import LexiconTagger

N_WORDS = 6  # no stored thought may contain a whole raw query or reply longer than this


def _norm(s):
    return " ".join(re.findall(r"[a-z0-9']+", s.lower()))


def _assert_no_verbatim(thoughts, turns):
    for t in thoughts:
        for turn in turns:
            for raw in (turn.query, turn.response):
                if len(_norm(raw).split()) > N_WORDS:
                    assert _norm(raw) not in _norm(t.text), (t.text, raw)


def _gvd_sessions(shared_data, user):
    raw = json.loads((shared_data / "gvd" / "memory_bank_en.json").read_text())
    hist = {k.strip(): v for k, v in raw.items()}[user]["history"]
    return [(date.fromisoformat(d), [DialogueTurn(id=f"{d}#{i}", query=t["query"], response=t["response"])
                                     for i, t in enumerate(ts)]) for d, ts in hist.items()]


def test_gvd_user_becomes_tagged_thoughts_with_sources_and_no_dialogue(shared_data):
    onto = builtin_ontology()
    m = CAIM()  # lexicon tagger, hashing embedder: no model
    sessions = _gvd_sessions(shared_data, "Emily")
    for day, turns in sessions:
        m.add_session("emily", day, turns)
        assert m.store.stm("emily") == []  # short-term memory cleared after post-thinking
    thoughts = m.thoughts("emily")
    all_turns = [t for _, ts in sessions for t in ts]
    ids = {t.id for t in all_turns}
    assert 10 <= len(thoughts) <= 2 * len(all_turns)
    for t in thoughts:
        assert len(t.tags) <= 3 and all(onto.normalize(x) == x for x in t.tags)
        assert t.source_turn_ids and set(t.source_turn_ids) <= ids
        assert t.timestamp == min(date.fromisoformat(s.split("#")[0]) for s in t.source_turn_ids)
        assert len(t.text.split()) <= 40
    assert sum(1 for t in thoughts if t.tags) >= 0.6 * len(thoughts)
    _assert_no_verbatim(thoughts, all_turns)
    raw_chars = sum(len(t.query) + len(t.response) for t in all_turns)
    assert sum(len(t.text) for t in thoughts) < 0.7 * raw_chars  # compressed, not a copy
    # the cited turns are kept beside the thoughts and counted in the storage figure
    kept = m.turns("emily")
    assert {t.id for _, t in kept} == {s for t in thoughts for s in t.source_turn_ids}
    assert m.storage("emily").chars == sum(len(t.text) for t in thoughts) + sum(
        len(t.query) + len(t.response) for _, t in kept)
    # the AI's recommendation on 2023-04-27#2 is remembered as such, with its source
    rec = [t for t in thoughts if "Little Prince" in t.text]
    assert rec and rec[0].text.startswith("AI recommended") and "2023-04-27#2" in rec[0].source_turn_ids
    assert any(t.tags and t.tags[0].startswith("Recommendations/") for t in rec)


def test_without_sources_nothing_verbatim_is_stored(shared_data):
    m = CAIM(sources=False)
    sessions = _gvd_sessions(shared_data, "Emily")
    for day, turns in sessions:
        m.add_session("emily", day, turns)
    raw_chars = sum(len(t.query) + len(t.response) for _, ts in sessions for t in ts)
    assert m.turns("emily") == []
    assert m.storage("emily").chars < 0.7 * raw_chars


def test_first_person_becomes_third_person_and_filler_goes():
    th = LocalThinker(LexiconTagger(builtin_ontology()))
    turn = DialogueTurn(id="2023-05-02#0", query="Okay, thank you! I really love my dog. I'm planning a trip to Japan.",
                        response="That sounds lovely.")
    drafts = th.think([turn], date(2023, 5, 2))
    texts = [d.text for d in drafts]
    assert len(texts) == 1
    t = texts[0]
    assert t.startswith("User") and "user's dog" in t and "User is planning a trip to Japan" in t
    assert not re.search(r"\b(I|my|really|thank)\b", t)


def test_relative_days_become_dates_and_small_talk_is_dropped():
    th = LocalThinker(LexiconTagger(builtin_ontology()))
    turns = [DialogueTurn(id="2023-05-02#0", query="Hi! Nice to meet you.", response="Hello! As an AI, I am glad."),
             DialogueTurn(id="2023-05-02#1", query="Yesterday I ran ten kilometres in the park.", response="Great job!")]
    drafts = th.think(turns, date(2023, 5, 2))
    assert [d.source_turn_ids for d in drafts] == [("2023-05-02#1",)]
    assert "2023-05-01" in drafts[0].text and "yesterday" not in drafts[0].text.lower()


@pytest.mark.parametrize("query", [
    "The Great Wall was long and the weather there was windy and cold all day long.",
    "Spring festival food: dumplings, fish, rice cakes, and sweet soup for everyone.",
])
def test_pronoun_free_turn_is_still_not_stored_verbatim(query):
    m = CAIM()
    turn = DialogueTurn(id="2023-05-02#0", query=query, response="The Great Wall was long and the weather there was "
                                                                  "windy and cold all day long.")
    m.add_session("u", date(2023, 5, 2), [turn])
    assert m.thoughts("u")
    _assert_no_verbatim(m.thoughts("u"), [turn])


def test_short_first_person_fact_is_kept_but_not_filler():
    from datetime import date as _date

    from boundmem.caim.base import DialogueTurn as _T
    from boundmem.caim.compress import user_thought

    d = _date(2023, 5, 1)
    assert user_thought(_T(id="2023-05-01#0", query="I'm vegetarian."), d) == "User is vegetarian"
    for filler in ("I'm fine.", "I'm sorry!", "I'm back.", "Okay."):
        assert user_thought(_T(id="2023-05-01#0", query=filler), d) is None, filler
