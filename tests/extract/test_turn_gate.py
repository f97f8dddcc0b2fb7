"""Turns that cannot yield a preference are not embedded: the zero-shot cue skip and the head's turn gate."""
from __future__ import annotations

import json

import numpy as np
import pytest

from boundmem_bench.train.gate import gate_sentences
from boundmem.extract.head import bundled_head
from boundmem.extract.local import LocalExtractor, _Scored
from boundmem.extract.phrasing import states_preference
from boundmem.extract.turn_gate import TurnGate, bundled_gate
from boundmem.models import Conversation, Turn
from boundmem.schema.load import load_yaml

HOME = """
name: home
mains:
- name: Home Comfort
  description: How the user likes their home.
  subs:
  - name: Lighting
    description: Lights at home.
    details:
    - name: Preferred Light Color
      multiple: false
      description: The light colour the user generally likes at home.
      attributes: [Warm white, Cool white, Red, Blue]
      examples: ["I like the lamps in a warm white tone.", "I always want blue light in the evening."]
  - name: Heating
    description: Room temperature.
    details:
    - name: Preferred Room Temperature
      multiple: false
      description: The room temperature the user finds comfortable.
      attributes: ["20 C", "22 C"]
      examples: ["I prefer the rooms at 20 degrees.", "I like it warm, 22 degrees."]
"""


def conv(*user: str, cid: str = "c") -> Conversation:
    turns = []
    for t in user:
        turns += [Turn(role="user", text=t), Turn(role="assistant", text="Okay.")]
    return Conversation(id=cid, turns=tuple(turns))


class Recording:
    """Wraps an embedder and records every text it is asked to embed."""

    def __init__(self, inner):
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts += list(texts)
        return self.inner.embed(texts)


class NoEmbedding:
    """Looks like MiniLM to the head, but must never be called."""

    name, dim = "minilm", 384

    def embed(self, texts):
        raise AssertionError(f"embedded {texts!r}")


def test_zero_shot_without_a_lasting_model_skips_uncued_turns(hash_embedder):
    """With no lasting model for the embedder (a hash embedder here), an uncued turn can never be picked on a
    zero-shot schema, so it is never embedded; cued ones still yield candidates."""
    home = load_yaml(HOME)
    convs = [
        conv("I like the lamps in a warm white tone.", "Set the lamps in a warm white tone."),
        conv("Set the rooms at 20 degrees.", "I prefer the rooms at 20 degrees.", "Thanks!"),
        conv("I always want blue light in the evening.", "I like it warm, 22 degrees."),
        conv("Turn on the lights.", "Make it warmer."),
    ]
    rec = Recording(hash_embedder)
    ex = LocalExtractor(rec)
    assert ex.lasting is None                                       # trained on MiniLM vectors: not for this embedder
    assert ex.head is not None and not ex.head.covers(home, rec.name, rec.dim)   # the zero-shot path
    got = ex.extract_many(convs, home)
    assert got[3] == []                                             # commands only: nothing
    assert sum(map(len, got)) >= 3                                  # not trivially empty
    turns = [t for c in convs for _, t in c.user_sentences()]
    embedded = set(rec.texts) & set(turns)
    assert embedded == {t for t in turns if states_preference(t)}   # uncued turns were never embedded


def test_bundled_gate_loads_and_separates_obvious_cases(schema):
    gate = bundled_gate()
    assert gate is not None and gate.fits(bundled_head())
    ex = LocalExtractor(NoEmbedding())
    assert ex.gate is not None
    index = ex._index(schema)
    keep = ["I always prefer Italian food.", "I always fill up at PetroLux, they're my favourite.",
            "I'm vegetarian, so please never suggest steakhouses to me."]
    drop = ["Thanks!", "Navigate to the airport.", "Okay.", "Yes please.", "What time is it?"]
    texts = keep + drop
    cued, hits, all_hits = ex._cues_and_hits(texts, index)
    mask = ex._gate_mask(texts, cued, hits, all_hits)
    assert mask.tolist() == [True] * len(keep) + [False] * len(drop)


def test_one_vocabulary_scan_gives_both_weightings(schema):
    """The head's hits (common words half-weight, and only in cued turns) and the gate's (all words full)
    come from one scan; each must equal VocabularyIndex.hits with that weighting."""
    ex = LocalExtractor(NoEmbedding())
    index = ex._index(schema)
    vocab = index.head_vocabulary(ex.head)
    texts = ["I always listen to jazz, and PetroLux is my gas station.", "Play some jazz.", "Set it to cool.",
             "I prefer EcoPulse Energy chargers, EcoPulse every time.", "Thanks!"]
    cued, hits, all_hits = ex._cues_and_hits(texts, index)
    assert cued[0] and not cued[1]
    for j, t in enumerate(texts):
        assert hits[j].tolist() == pytest.approx(vocab.hits(t, ex.common_weight if cued[j] else 0.0))
        assert all_hits[j].tolist() == pytest.approx(vocab.hits(t))
    assert all_hits[1].max() > hits[1].max() == 0.0      # "jazz" counts for the gate, not for an uncued head turn
    assert 0.0 < hits[0].max() and all_hits.max() <= 1.0


@pytest.mark.slow
def test_gated_turns_are_never_embedded(minilm, schema):
    rec = Recording(minilm)
    ex = LocalExtractor(rec)
    c = conv("Thanks!", "I always fill up at PetroLux, they're my favourite.", "Navigate to the airport.")
    got = ex.extract(c, schema).candidates
    assert [x.path.detail for x in got] == ["preferred_gas_station"]
    turns = {t for _, t in c.user_sentences()}
    assert set(rec.texts) & turns == {"I always fill up at PetroLux, they're my favourite."}


@pytest.mark.slow
def test_without_gate_every_turn_is_embedded_and_results_agree(minilm, schema):
    convs = [conv("Thanks!", "I always fill up at PetroLux, they're my favourite."),
             conv("Navigate to the airport.", "Okay."),
             conv("I'm vegan, find me somewhere to eat.", "And I always pay by card.")]
    rec = Recording(minilm)
    plain = LocalExtractor(rec, gate=None)
    assert plain.gate is None
    old = plain.extract_many(convs, schema)
    turns = [t for c in convs for _, t in c.user_sentences()]
    assert set(turns) <= set(rec.texts)
    assert LocalExtractor(minilm).extract_many(convs, schema) == old


@pytest.mark.slow
def test_gate_only_with_the_head_it_was_trained_for(minilm):
    head = bundled_head()
    assert LocalExtractor(minilm, head=head).gate is None          # an explicit head: no gate unless asked
    assert LocalExtractor(minilm, head=head, gate=bundled_gate()).gate is not None
    other = TurnGate(schema_name="other", labels=["a/b/c"], w_text=np.zeros(16, np.float32),
                     w_dense=np.zeros(6, np.float32), b=0.0, threshold=0.0)
    with pytest.raises(ValueError):
        LocalExtractor(minilm, gate=other)
    assert LocalExtractor(minilm, head=None).gate is None


def test_gate_round_trips(tmp_path):
    gate = bundled_gate()
    gate.save(tmp_path / "g.npz")
    back = TurnGate.load(tmp_path / "g.npz")
    assert back.labels == gate.labels and back.threshold == pytest.approx(gate.threshold)
    texts = ["I always prefer Italian food.", "Thanks!"]
    hits = np.zeros((2, len(gate.labels)), np.float32)
    assert np.allclose(back.scores(texts, [True, False], hits, hits), gate.scores(texts, [True, False], hits, hits))


def test_gate_training_reads_training_users_only(shared_data):
    data = shared_data / "carmem" / "dataset.jsonl"
    gd = gate_sentences(data)
    assert set(gd.user.tolist()) - {-1} == set(range(50, 100))
    first = json.loads(data.read_text(encoding="utf-8").splitlines()[50])["data"][0]
    assert gd.texts[0] == next(t["USER"] for t in first["extraction_conversation"] if "USER" in t)
    assert len(gd.conversations) == 500 and all(gd.user[r] >= 50 for c in gd.conversations for r in c)
