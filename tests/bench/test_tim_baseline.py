"""TiM baseline: LSH bucket assignment, two-stage retrieval, merge and forget on insert."""
from __future__ import annotations

from datetime import date

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boundmem.caim.base import DialogueTurn
from boundmem_bench.baselines import RandomProjectionLSH, TiM

D0 = date(2023, 4, 27)


def test_bucket_is_argmax_of_projection_and_its_negation():
    lsh = RandomProjectionLSH(dim=4, buckets=4, seed=0)
    lsh.projection = np.array([[1, 0], [0, 1], [0, 0], [0, 0]], np.float32)  # xR = (x0, x1)
    # scores [x0, x1, -x0, -x1] -> buckets 0..3
    assert lsh.bucket(np.array([[0.9, 0.1, 0, 0]])).tolist() == [0]
    assert lsh.bucket(np.array([[0.1, 0.9, 0, 0]])).tolist() == [1]
    assert lsh.bucket(np.array([[-0.9, 0.1, 0, 0]])).tolist() == [2]
    assert lsh.bucket(np.array([[0.2, -0.7, 0, 0]])).tolist() == [3]
    assert lsh.probe_order(np.array([0.9, 0.5, 0, 0])) == [0, 1, 3, 2]


def test_buckets_must_be_even():
    with pytest.raises(ValueError):
        RandomProjectionLSH(dim=8, buckets=5)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=16, max_size=16).filter(lambda v: max(map(abs, v)) > 1e-3))
def test_assignment_is_consistent(v):
    x = np.array(v, np.float32)
    a, b = RandomProjectionLSH(16, 16, seed=3), RandomProjectionLSH(16, 16, seed=3)
    ba = int(a.bucket(x)[0])
    assert ba == int(b.bucket(x)[0])  # same seed, same bucket
    assert 0 <= ba < 16
    assert int(a.bucket(3.5 * x)[0]) == ba  # only the direction matters
    assert int(a.bucket(-x)[0]) == (ba + 8) % 16  # the opposite direction lands in the mirrored bucket


def _turn(i: int, q: str, r: str = "") -> DialogueTurn:
    return DialogueTurn(id=f"{D0.isoformat()}#{i}", query=q, response=r)


SESSION = [_turn(0, "I went hiking in the Alps with my brother.", "That sounds exhausting but fun."),
           _turn(1, "My favourite dish is steamed sea bass with ginger.", "Delicious choice."),
           _turn(2, "I started learning the violin last month.", "Practice a little every day."),
           _turn(3, "I am planning a trip to Mexico for the museums.", "Mexico City has great museums.")]


def test_retrieval_finds_an_inserted_thought(hash_embedder):
    tim = TiM(hash_embedder, seed=0)
    tim.add_session("u", D0, SESSION)
    thoughts = tim.thoughts("u")
    assert len(thoughts) == 4
    target = next(t for t in thoughts if "violin" in t.text)
    res = tim.retrieve("u", target.text, D0, k=3)
    assert res.retrieved and res.items[0].source_turn_ids == ("2023-04-27#2",)
    assert res.items[0].score == pytest.approx(1.0, abs=1e-5)


def test_empty_bucket_falls_back_to_neighbouring_buckets(hash_embedder):
    tim = TiM(hash_embedder, seed=0)
    tim.add_session("u", D0, SESSION[:1])
    only = tim.thoughts("u")[0]
    # a query hashed to another bucket than the only thought
    query = next(q for q in (f"query number {n} about nothing" for n in range(200))
                 if int(tim.lsh.bucket(hash_embedder.embed([q]))[0]) != only.bucket)
    res = tim.retrieve("u", query, D0, k=3)
    assert [i.id for i in res.items] == [only.id]


def test_same_head_entity_is_merged(hash_embedder):
    tim = TiM(hash_embedder)
    tim.add_session("u", D0, [_turn(0, 'Yesterday I watched "Taxi Driver" at home.'),
                              _turn(1, 'The film "Taxi Driver" is about a lonely man in the city.')])
    thoughts = tim.thoughts("u")
    assert len(thoughts) == 1
    assert thoughts[0].source_turn_ids == ("2023-04-27#0", "2023-04-27#1")
    assert "watched" in thoughts[0].text and "lonely" in thoughts[0].text


def test_contradicted_thought_is_forgotten(hash_embedder):
    tim = TiM(hash_embedder)
    tim.add_session("u", D0, [_turn(0, "I like very spicy food a lot."), _turn(1, "I don't like very spicy food a lot.")])
    thoughts = tim.thoughts("u")
    assert [t.source_turn_ids for t in thoughts] == [("2023-04-27#1",)]


def test_users_are_isolated(hash_embedder):
    tim = TiM(hash_embedder)
    tim.add_session("a", D0, SESSION)
    assert tim.retrieve("b", "violin", D0).items == []
    assert tim.storage("b").items == 0 and tim.storage("a").items == 4
