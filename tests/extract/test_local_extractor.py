"""LocalExtractor (MiniLM, offline): behaviour on the in-car schema, opt-outs, and a zero-shot schema."""
from __future__ import annotations

import json

import pytest

from boundmem.extract.local import LocalExtractor
from boundmem.models import Conversation, Turn
from boundmem.schema.load import load_yaml

pytestmark = pytest.mark.slow

SMART_HOME = """
name: smart-home
mains:
- name: Home Comfort
  description: How the user likes their home.
  subs:
  - name: Lighting
    description: Lasting preferences about the lights at home.
    details:
    - name: Preferred Light Color
      multiple: false
      description: The light colour the user generally likes at home.
      attributes: [Warm white, Cool white, Red, Blue]
      examples: ["I like the lamps in a warm white tone."]
    - name: Wake-up Light
      multiple: false
      description: Whether the user wants the lights to come on slowly in the morning to wake them.
      attributes: ["Yes", "No"]
  - name: Heating
    description: Lasting preferences about room temperature and heating.
    details:
    - name: Preferred Room Temperature
      multiple: false
      description: The room temperature the user finds comfortable.
      attributes: ["18 C", "19 C", "20 C", "21 C", "22 C"]
- name: Media
  description: What the user watches and listens to at home.
  subs:
  - name: Television
    description: Lasting preferences about TV.
    details:
    - name: Favorite TV Genre
      multiple: true
      description: Kinds of shows the user loves to watch.
      attributes: [Documentaries, Comedy, Crime, Sports]
"""


def conv(*turns: tuple[str, str], cid: str = "c") -> Conversation:
    return Conversation(id=cid, turns=tuple(Turn(role=r, text=t) for r, t in turns))


def said(text: str) -> Conversation:
    return conv(("user", text), ("assistant", "Okay."))


@pytest.fixture(scope="module")
def extractor(minilm):
    return LocalExtractor(minilm)


@pytest.mark.parametrize("command", ["Navigate to the office", "Call my wife", "Set the lighting to blue",
                                     "Take me to the nearest gas station"])
def test_commands_without_lasting_preference_store_nothing(extractor, schema, command):
    assert extractor.extract(said(command), schema).candidates == []


@pytest.mark.parametrize("sentence, detail, attribute", [
    ("I'm vegetarian, so please never suggest steakhouses to me.", "dietary_preferences", "Vegetarian"),
    ("I always fill up at PetroLux, they're my favourite.", "preferred_gas_station", "PetroLux"),
    ("I like it cool in the car, I always keep the cabin at 19 degrees.", "preferred_temperature", "19 degree Celcius"),
    ("I always avoid toll roads, route me around them whenever you can.", "avoidance_of_specific_road_types", "Toll roads"),
])
def test_clear_preference_lands_in_the_right_detail_category(extractor, schema, sentence, detail, attribute):
    c = conv(("user", "Hi there."), ("assistant", "Hello! How can I help?"), ("user", sentence), ("assistant", "Noted."))
    got = extractor.extract(c, schema).candidates
    assert [x.path.detail for x in got] == [detail]
    assert got[0].attribute == attribute
    assert got[0].sentence == sentence          # provenance: the user turn that revealed it
    assert schema.allows(got[0].path)


def test_opted_out_subcategory_is_never_returned(extractor, schema):
    c = said("I love Italian food more than anything, find me a good trattoria.")
    full = extractor.extract(c, schema).candidates
    assert [x.path.sub for x in full] == ["restaurant"]   # in-schema it is found ...
    pruned = schema.prune(["points_of_interest/restaurant"])
    assert extractor.extract(c, pruned).candidates == []             # ... opted out, nothing at all, not a neighbour


def test_opt_out_holds_on_dataset_conversations(extractor, schema, shared_data):
    """Training users only (lines 51-100): each conversation with its own subcategory opted out."""
    lines = (shared_data / "carmem" / "dataset.jsonl").read_text(encoding="utf-8").splitlines()
    by_name = {r.detail.name: r for r in schema.details()}
    checked = 0
    for line in lines[60:64]:
        for raw in json.loads(line)["data"][:4]:
            ref = by_name[raw["user_preference"].split(";")[2].strip()]
            c = conv(*(("user" if "USER" in t else "assistant", next(iter(t.values())))
                       for t in raw["extraction_conversation"]), cid=raw["conversation_uuid"])
            sub = f"{ref.main.key}/{ref.sub.key}"
            pruned = schema.prune([sub])
            got = extractor.extract(c, pruned).candidates
            assert not any(x.path.within(sub) for x in got), (raw["user_preference"], got)
            assert all(pruned.allows(x.path) for x in got)
            checked += 1
    assert checked == 16


def test_assistant_only_mention_is_not_extracted(extractor, schema):
    offer = "I know many drivers love Italian food. Shall I look for an Italian restaurant?"
    assert extractor.extract(conv(("user", "Where can we stop?"), ("assistant", offer),
                                  ("user", "No thanks, not now.")), schema).candidates == []
    # the same words from the user are a preference (so the check above can fail)
    got = extractor.extract(said("I love Italian food, shall we look for an Italian restaurant?"), schema).candidates
    assert [x.path.detail for x in got] == ["favorite_cuisine"]


def test_zero_shot_on_a_schema_it_was_never_trained_for(extractor):
    home = load_yaml(SMART_HOME)
    cases = {
        "I always want the living room lights in cool white.": ("preferred_light_color", "Cool white"),
        "I prefer the house at 20 degrees, I get cold easily.": ("preferred_room_temperature", "20 C"),
        "My favourite shows are crime series, I love them.": ("favorite_tv_genre", "Crime"),
    }
    for sentence, (detail, attribute) in cases.items():
        got = extractor.extract(said(sentence), home).candidates
        assert [(x.path.detail, x.attribute) for x in got] == [(detail, attribute)], sentence
    for command in ("Turn on the kitchen lights.", "Set the thermostat to 23.", "Call my wife", "I always forget my keys."):
        assert extractor.extract(said(command), home).candidates == [], command
    # opting out works the same way without a trained head
    no_tv = home.prune(["media"])
    assert extractor.extract(said("My favourite shows are crime series, I love them."), no_tv).candidates == []


def test_at_most_max_candidates_and_batch_equals_single(extractor, schema):
    c = conv(("user", "I'm vegan, find me somewhere to eat."), ("assistant", "Sure."),
             ("user", "And I always pay by card."), ("assistant", "Noted."),
             ("user", "Also I love jazz, I always listen to it."), ("assistant", "Playing jazz."),
             ("user", "I always fill up at PetroLux, it's my station."), ("assistant", "Noted."))
    one = extractor.extract(c, schema).candidates
    assert 1 <= len(one) <= extractor.max_candidates == 3
    assert len({x.path for x in one}) == len(one)
    others = [said("Call my wife"), said("I always fill up at PetroLux.")]
    assert extractor.extract_many([c, *others], schema) == [one, *(extractor.extract(o, schema).candidates for o in others)]


def test_category_prototypes_are_embedded_once_per_schema(minilm):
    calls: list[int] = []

    class Counting:
        name, dim = minilm.name, minilm.dim

        def embed(self, texts):
            calls.append(len(texts))
            return minilm.embed(texts)

    home = load_yaml(SMART_HOME)
    ex = LocalExtractor(Counting())
    ex.extract(said("I prefer the house at 20 degrees."), home).candidates
    ex.extract(said("I prefer the house at 21 degrees."), home).candidates
    ex.extract(said("I prefer the house at 22 degrees."), load_yaml(SMART_HOME)).candidates   # equal content, new object
    n_proto = sum(1 + len(r.detail.examples) for r in home.details())   # one description row + examples
    n_attr = sum(len(r.detail.attributes) for r in home.details())
    # the user turn; the prototypes and the vocabulary rows once (zero-shot scores see both); then one turn per call
    assert calls == [1, n_proto, n_attr, 1, 1]
    got = ex.extract(said("I love shows about football and tennis."), home).candidates  # needs the nearest vocabulary item
    assert [(x.path.detail, x.attribute) for x in got] == [("favorite_tv_genre", "Sports")]
    ex.extract(said("I love documentaries about nature."), home).candidates
    # the turn and its two phrases ("... football", "tennis") in one batch, then one turn: nothing schema-side again
    assert calls[5:] == [3, 1]
