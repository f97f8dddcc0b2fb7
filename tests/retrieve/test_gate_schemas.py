"""The recall gate on any schema: the model a schema reads, commands that name their own value, implied needs stated
by `applies_to`, and the episodic half following the same reading of the request."""
from __future__ import annotations

from datetime import date

import pytest

from boundmem.config import EpisodicSettings
from boundmem.extract.keyword import KeywordExtractor
from boundmem.maintain.rules import RuleMaintainer
from boundmem.memory import Memory
from boundmem.models import Candidate
from boundmem.retrieve.gate import GateModel
from boundmem.retrieve.joint import episode_decision
from boundmem.schema.load import builtin_schema, load_schema
from boundmem.store.sqlite import SQLiteStore

SUPPORT = """
name: shop-support
mains:
- name: Orders
  key: orders
  subs:
  - name: Products
    key: products
    description: What the customer buys and owns.
    details:
    - name: Product Interests
      key: product_interests
      multiple: true
      values: open
      description: Kinds of product the customer is into.
      attributes: [gaming laptops, cameras]
    - name: Favorite Brands
      key: favorite_brands
      multiple: true
      values: open
      description: Brands the customer prefers.
      attributes: [Sony, Apple]
  - name: Delivery
    key: delivery
    description: How orders reach the customer.
    details:
    - name: Delivery Option
      key: delivery_option
      multiple: true
      values: open
      description: Carriers and drop-off points.
      attributes: [Parcel locker, DHL]
- name: Contact
  key: contact
  subs:
  - name: Channel
    key: channel
    description: How the customer wants to be reached.
    details:
    - name: Preferred Contact Channel
      key: preferred_contact_channel
      multiple: true
      values: open
      description: Email, phone or chat.
      attributes: [Email, Phone call]
"""


def _mem(tmp_path, schema, embedder, name="m.db", **kw) -> Memory:
    return Memory(schema=schema, store=SQLiteStore(tmp_path / name), extractor=KeywordExtractor(),
                  maintainer=RuleMaintainer(), embedder=embedder, **kw)


def _hold(mem: Memory, user: str, prefs) -> None:
    mem.apply([Candidate(path=mem.schema.resolve(d).path, attribute=a, sentence=s, polarity=pol)
               for d, a, s, pol in prefs], user, "c1")


@pytest.fixture()
def support(tmp_path, minilm):
    p = tmp_path / "support.yaml"
    p.write_text(SUPPORT, encoding="utf-8")
    mem = _mem(tmp_path, load_schema(p), minilm)
    _hold(mem, "cy", [("Product Interests", "gaming laptops", "I'm into gaming laptops.", "like"),
                      ("Favorite Brands", "Sony", "I only buy Sony headphones.", "like"),
                      ("Delivery Option", "Parcel locker", "Send everything to a parcel locker.", "like"),
                      ("Preferred Contact Channel", "Email", "Please always email me rather than calling.", "like")])
    yield mem
    mem.store.close()


def test_a_schema_the_in_schema_model_never_saw_reads_the_transfer_model(support):
    own = GateModel.for_schema(builtin_schema("incar"))
    assert own.knows(builtin_schema("incar")) and "learned" in own.features
    other = support.retriever.gate.model
    assert not GateModel.bundled().knows(support.schema)
    assert "learned" not in other.features and "leave-one-schema-out" in other.trained_on


def test_an_operators_schema_gets_the_preference_a_request_needs_and_nothing_for_the_rest(support):
    hits = support.recall("Any good laptop deals right now?", "cy")
    assert hits and hits[0].preference.attribute == "gaming laptops", [(h.preference.attribute, h.why) for h in hits]
    for text in ("Thanks, bye.", "What's the weather like?", "Reset my password."):
        assert support.recall(text, "cy") == [], text


@pytest.fixture()
def car(tmp_path, minilm):
    mem = _mem(tmp_path, builtin_schema("incar"), minilm)
    yield mem
    mem.store.close()


def test_a_command_naming_its_own_value_gets_nothing_unless_an_item_constrains_it(car):
    _hold(car, "ann", [("Favorite Genres", "Jazz", "I love listening to jazz.", "like"),
                       ("Interior Lighting Ambient Preferences", "Warm white", "I like warm white lights.", "like")])
    for text in ("Play Metallica.", "Switch the interior lights to blue."):
        assert car.recall(text, "ann") == [], text
    assert car.recall("Put on some music.", "ann")   # names no value: the taste still helps
    _hold(car, "bo", [("Favorite Genres", "Jazz", "I love listening to jazz.", "like"),
                      ("entertainment_and_media/music/favorite_artists_bands", "Metallica", "I can't stand Metallica.",
                       "dislike")])
    hits = car.recall("Play Metallica.", "bo")
    assert [h.preference.attribute for h in hits] == ["Metallica"] and hits[0].why.startswith("constrains")


def test_a_route_draws_the_road_type_avoidance_and_a_meal_the_diet(car):
    _hold(car, "cy", [("Avoidance of Specific Road Types", "Toll roads", "I always avoid toll roads.", "like"),
                      ("Dietary Preferences", "Vegetarian", "I'm vegetarian.", "like"),
                      ("Favorite Genres", "Jazz", "I love listening to jazz.", "like")])
    hits = car.recall("Take me to the airport.", "cy")
    assert hits and hits[0].preference.attribute == "Toll roads", [(h.preference.attribute, h.why) for h in hits]
    assert "Vegetarian" not in {h.preference.attribute for h in hits}
    hits = car.recall("What should I eat?", "cy")
    assert hits and hits[0].preference.attribute == "Vegetarian"
    assert car.recall("What's the weather tomorrow?", "cy") == []


@pytest.mark.parametrize("text", ["Play the next song.", "Order me chinese food.", "Remind me to call mom at five.",
                                  "Set an alarm for seven.", "Turn on the wipers.", "Thanks, bye!"])
def test_commands_reminders_and_small_talk_recall_no_episode(text):
    assert episode_decision(text, preferences_found=False).recall is False
    assert episode_decision(text, preferences_found=True).recall is False


@pytest.mark.parametrize("text", ["What did you suggest on Tuesday?", "Do you remember the album you recommended?",
                                  "Remind me what restaurant you suggested."])
def test_a_question_about_the_past_recalls_episodes_as_caim_does(text):
    d = episode_decision(text, preferences_found=False)
    assert d.recall and d.cutoff is None and "past" in d.reason


def test_a_request_the_gate_found_nothing_for_gets_only_episodes_near_enough():
    assert episode_decision("Is the bridge open today?", preferences_found=False).cutoff is True
    assert episode_decision("Find me a place for dinner.", preferences_found=True).cutoff is None


def test_recall_all_gives_a_command_no_episode_and_a_dated_question_its_episode(tmp_path, hash_embedder):
    from boundmem.caim.retrieval import RetrievalParams
    from boundmem.episodes import EpisodicMemory

    mem = _mem(tmp_path, builtin_schema("incar"), hash_embedder, episodic=EpisodicSettings(enabled=True))
    # near=0 and no cutoff to speak of: without the joint decision every request would get the best episodes
    mem._episodic_memory = EpisodicMemory(mem.store, mem.embedder, mem.episodic, params=RetrievalParams(
        pool=0, tag_bonus=0.0, date_bonus=0.0, cutoff=0.0, near=0.0))
    mem.remember_episode([{"role": "user", "content": "Play some jazz for the drive please"},
                          {"role": "assistant", "content": "Sure, I suggest the album Kind of Blue by Miles Davis."}],
                         "ann", day=date(2024, 5, 7))
    friday = date(2024, 5, 10)
    assert mem.episodic_memory.search("Play the next song.", "ann", today=friday).hits   # CAIM alone would
    for text in ("Play the next song.", "Remind me to buy milk."):
        got = mem.recall_all(text, "ann", today=friday)
        assert got.episodes.hits == [] and got.episodes.retrieved is False and got.episodes.reason, text
    got = mem.recall_all("What did you suggest on Tuesday?", "ann", today=friday)
    assert got.episodes.hits and "Kind of Blue" in got.episodes.hits[0].episode.text
    mem.store.close()


@pytest.mark.parametrize("text,named", [("Play some techno.", True), ("Put on a horror film.", True),
                                        ("Order me a mushroom risotto, please.", True), ("Lights to blue.", True),
                                        ("Play something for the drive.", False), ("Book a room in Madrid.", False),
                                        ("Could you wrap up and send the order I placed today?", False),
                                        ("Put on some music.", False)])
def test_a_command_names_a_value_the_schema_need_not_list(text, named):
    from boundmem.retrieve.cues import names_unlisted_value

    assert names_unlisted_value(text) is named


@pytest.mark.parametrize("text,wants", [("Book me a window seat.", True),
                                        ("I want the Bose ones, add them to my cart.", True),
                                        ("Recommend a hotel in Rome.", False), ("Remind me to call mom.", False),
                                        ("Which seat should I take?", False)])
def test_an_errand_says_what_it_wants_a_request_for_advice_does_not(text, wants):
    from boundmem.retrieve.cues import says_what_it_wants

    assert says_what_it_wants(text) is wants
