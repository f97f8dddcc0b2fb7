"""The real client against the real server (0.5B model): structure and invariants, never exact model outputs.

Each conversation ends either in a valid extraction (tries 1 or 2, every candidate inside the user's pruned schema)
or in a clean failure (ExtractionError, nothing stored); opted-out categories are never stored; the maintainer
answers with an allowed action."""
from __future__ import annotations

import pytest

from boundmem.extract.base import ExtractionError
from boundmem.extract.llm import LLMExtractor
from boundmem.maintain.llm import LLMMaintainer
from boundmem.memory import Memory
from boundmem.models import Candidate, Conversation, Turn

pytestmark = pytest.mark.real_llm

CONVS = [
    Conversation(id="r1", turns=(Turn(role="user", text="Find me somewhere to eat."),
                                 Turn(role="assistant", text="There is a steakhouse nearby. Do you like steak?"),
                                 Turn(role="user", text="No, I'm vegetarian, I never eat meat."))),
    Conversation(id="r2", turns=(Turn(role="user", text="I always listen to jazz when I drive, I can't stand country."),)),
    Conversation(id="r3", turns=(Turn(role="user", text="Take me home."),)),
    Conversation(id="r4", turns=(Turn(role="user", text="Please always avoid toll roads on my routes."),)),
    Conversation(id="r5", turns=(Turn(role="user", text="Set the temperature to 21 degrees."),
                                 Turn(role="assistant", text="Done. Anything else?"),
                                 Turn(role="user", text="Actually 21 is what I always like in the car."))),
]


def _allowed(schema, cands):
    return all(schema.allows(c.path) for c in cands)


def test_extraction_is_valid_or_fails_cleanly(real_client, schema, sqlite_store, hash_embedder):
    ex = LLMExtractor(real_client)
    mem = Memory(schema=schema, store=sqlite_store, extractor=ex, maintainer=LLMMaintainer(real_client),
                 embedder=hash_embedder)
    outcomes = []
    for conv in CONVS:
        before = len(sqlite_store.preferences("alice"))
        try:
            run = ex.extract(conv, mem.user_schema("alice"))
        except ExtractionError as e:
            assert "invalid twice" in str(e) and conv.id in str(e)
            assert len(sqlite_store.preferences("alice")) == before  # nothing stored from it
            outcomes.append("invalid")
            continue
        r = mem.apply(run.candidates, "alice", conv.id)
        assert run.valid_at_try in (1, 2)
        assert _allowed(schema, run.candidates)
        for c in run.candidates:
            assert c.attribute.strip()
        assert {d.action for d in r.decisions} <= {"insert", "pass", "update", "append"}
        outcomes.append(f"valid@{run.valid_at_try}")
    assert ex.stats.runs == len(CONVS)
    assert ex.stats.first_try + ex.stats.after_retry + ex.stats.invalid + ex.stats.failed == len(CONVS)
    for p in sqlite_store.preferences("alice"):
        assert schema.allows(p.path) and p.attribute.strip()
    # the real server reports usage and the client records latency for every answered request
    assert real_client.usage.prompt_tokens > 0 and real_client.usage.requests > 0
    print("outcomes:", outcomes, "stored:", [(str(p.path), p.attribute) for p in sqlite_store.preferences("alice")])


def test_opted_out_category_is_never_stored(real_client, schema, sqlite_store, hash_embedder):
    mem = Memory(schema=schema, store=sqlite_store, extractor=LLMExtractor(real_client),
                 maintainer=LLMMaintainer(real_client), embedder=hash_embedder)
    mem.opt_out("bob", "restaurant")
    mem.opt_out("bob", "music")
    for conv in CONVS[:2]:
        try:
            mem.add(conv, "bob")
        except ExtractionError:
            pass
    held = sqlite_store.preferences("bob")
    assert not any(p.path.within("points_of_interest/restaurant") or p.path.within("entertainment_and_media/music")
                   for p in held)


def test_grammar_forced_tool_call_is_well_formed(real_client, schema):
    """A named tool_choice makes llama-cpp-python constrain the answer to the tool's JSON schema."""
    from boundmem.llm.errors import LLMBadArguments

    ex = LLMExtractor(real_client)
    try:
        args = real_client.call_tool(ex.messages(CONVS[1], schema), ex.tool(schema), max_tokens=300)
    except LLMBadArguments as e:  # a small model repeating items until max_tokens: cut JSON, a clean typed failure
        assert "not valid JSON" in str(e)
        return
    assert isinstance(args, dict) and isinstance(args.get("preferences"), list)
    for item in args["preferences"]:
        assert set(item) == {"sentence", "category", "value", "polarity"}
        assert item["category"] in ex._compiled(schema).labels and item["polarity"] in ("like", "dislike")


def test_maintainer_answers_with_an_allowed_action(real_client, schema):
    from datetime import datetime, timezone

    from boundmem.models import Preference
    from boundmem.schema.model import CategoryPath

    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    price = CategoryPath(main="points_of_interest", sub="restaurant", detail="desired_price_range")   # single
    cheap = Preference(id="pk-cheap", user="a", path=price, attribute="cheap", sentence="I like cheap places.",
                       created_at=t0, updated_at=t0)
    m = LLMMaintainer(real_client)
    rec = m.decide(Candidate(path=price, attribute="expensive", sentence="I only go to expensive places now."), [cheap],
                   schema.resolve(price).detail)
    d = rec.decision
    assert d.action in ("pass", "update") and d.target == "pk-cheap"  # never append in a single-preference category
    assert rec.valid_at_try in (1, 2, None)
