"""MemoryBank baseline: document format, the paper's forgetting curve, reproducible random forgetting, isolation."""
from __future__ import annotations

import math
from datetime import date, timedelta

import pytest

from boundmem.caim.base import DialogueTurn
from boundmem_bench.baselines import MemoryBank, retention, stable_uniform

D0 = date(2023, 4, 27)


def turns(day: date, texts: list[str]) -> list[DialogueTurn]:
    return [DialogueTurn(id=f"{day.isoformat()}#{i}", query=q, response=f"Reply about {q.split()[-1]}")
            for i, q in enumerate(texts)]


TOPICS = ["I went hiking in the mountains.", "My cat is called Whiskers.", "I baked a chocolate cake today.",
          "I am learning to play the violin.", "We watched a football match.", "I read a novel about pirates.",
          "My sister moved to Berlin.", "I planted tomatoes in the garden."]


@pytest.mark.parametrize("t,s,expected", [(0, 1, 1.0), (1, 1, math.e ** -1), (2, 2, math.e ** -1),
                                          (3, 1.5, math.e ** -2), (10, 1, math.e ** -10), (4, 4, math.e ** -1)])
def test_retention_is_the_papers_formula(t, s, expected):
    assert retention(t, s) == pytest.approx(expected, rel=1e-12)


def test_retention_rejects_non_positive_strength():
    with pytest.raises(ValueError):
        retention(1, 0)


def test_stable_uniform_depends_only_on_inputs():
    a = stable_uniform(3, "Emily", "2023-04-27#0")
    assert a == stable_uniform(3, "Emily", "2023-04-27#0")
    assert 0.0 <= a < 1.0
    assert a != stable_uniform(4, "Emily", "2023-04-27#0")
    assert a != stable_uniform(3, "Frank", "2023-04-27#0")


def test_documents_follow_memorybank_format_and_ids(hash_embedder):
    mb = MemoryBank(hash_embedder)
    mb.add_session("emily", D0, [DialogueTurn(id="2023-04-27#0", query="I love tea. It calms me.", response="Nice!"),
                                 DialogueTurn(id="2023-04-27#1", query="Tell me about green tea.", response="Sure.")])
    res = mb.retrieve("emily", "I love tea. It calms me.", D0, k=5)
    by_id = {i.id: i for i in res.items}
    assert set(by_id) == {"2023-04-27#0", "2023-04-27#1", "2023-04-27#summary"}
    assert by_id["2023-04-27#0"].text == "Conversation content on 2023-04-27: [|User|]: I love tea. It calms me.; [|AI|]: Nice!"
    assert by_id["2023-04-27#0"].source_turn_ids == ("2023-04-27#0",)
    summ = by_id["2023-04-27#summary"]
    assert summ.tags == ("summary",) and summ.timestamp == D0
    # extractive summary: the first sentence of each user utterance ("It calms me." is dropped), joined
    assert summ.text == "The summary of the conversation on 2023-04-27 is: I love tea. Tell me about green tea."
    assert mb.storage("emily").items == 3


def test_extractive_summary_is_cut_at_a_word_boundary(hash_embedder):
    mb = MemoryBank(hash_embedder, summary_chars=20)
    mb.add_session("emily", D0, [DialogueTurn(id="2023-04-27#0", query="I love tea. It calms me.", response="Nice!"),
                                 DialogueTurn(id="2023-04-27#1", query="Tell me about green tea.", response="Sure.")])
    summ = next(i for i in mb.retrieve("emily", "tea", D0, k=5).items if i.id.endswith("#summary"))
    assert summ.text == "The summary of the conversation on 2023-04-27 is: I love tea. Tell me…"


def test_users_are_isolated(hash_embedder):
    mb = MemoryBank(hash_embedder)
    mb.add_session("a", D0, turns(D0, TOPICS[:3]))
    assert mb.retrieve("b", "hiking", D0).items == []
    assert mb.storage("b").items == 0


def test_forgetting_keeps_exactly_the_draws_below_retention(hash_embedder):
    seed, t = 11, 1
    mb = MemoryBank(hash_embedder, forgetting=True, seed=seed)
    mb.add_session("u", D0, turns(D0, TOPICS))
    ids = [f"{D0.isoformat()}#{i}" for i in range(len(TOPICS))] + [f"{D0.isoformat()}#summary"]
    mb.add_session("u", D0 + timedelta(days=t), [])  # a new day: the forgetting pass runs, nothing is added
    expected = {i for i in ids if stable_uniform(seed, "u", i) <= math.exp(-t)}
    kept = {i.id for i in mb.retrieve("u", "anything", D0 + timedelta(days=t), k=100).items}
    assert kept == expected
    assert mb.forgotten("u") == len(ids) - len(expected)


def test_forgetting_is_reproducible_with_a_fixed_seed(hash_embedder):
    def run(seed):
        mb = MemoryBank(hash_embedder, forgetting=True, seed=seed)
        for d in range(4):
            day = D0 + timedelta(days=d)
            mb.add_session("u", day, turns(day, TOPICS))
        mb.retrieve("u", "cake", D0 + timedelta(days=4), k=3)
        return [i.id for i in mb.retrieve("u", "garden", D0 + timedelta(days=5), k=100).items]

    assert run(5) == run(5)
    assert run(5) != run(6)


def test_recall_strengthens_a_memory(hash_embedder):
    """A memory recalled on day 0 has S=2, so on day 2 it survives a draw in (e^-2, e^-1] that S=1 would not."""
    target = f"{D0.isoformat()}#0"
    seed = next(s for s in range(10_000) if math.exp(-2) < stable_uniform(s, "u", target) <= math.exp(-1))
    day2 = D0 + timedelta(days=2)
    for recall, survives in ((True, True), (False, False)):
        mb = MemoryBank(hash_embedder, forgetting=True, seed=seed)
        mb.add_session("u", D0, turns(D0, TOPICS))
        if recall:
            top = mb.retrieve("u", TOPICS[0], D0, k=1).items
            assert top[0].id == target
        mb.add_session("u", day2, [])
        kept = {i.id for i in mb.retrieve("u", "x", day2, k=100).items}
        assert (target in kept) is survives


def test_no_forgetting_keeps_everything(hash_embedder):
    mb = MemoryBank(hash_embedder, forgetting=False)
    mb.add_session("u", D0, turns(D0, TOPICS))
    mb.add_session("u", D0 + timedelta(days=30), [])
    assert mb.storage("u").items == len(TOPICS) + 1
