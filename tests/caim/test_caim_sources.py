"""Source turns beside the thoughts and day summaries: a word the compression dropped is still found; what the keys
add is bounded (one item per turn, summaries only where they add turns) and erased with the rest."""
from datetime import date

import numpy as np

from boundmem.caim.base import DialogueTurn
from boundmem.caim.models import Thought
from boundmem.caim.sources import day_summaries, fold, summary_text
from boundmem.caim.system import CAIM

D = date(2024, 3, 4)
TODAY = date(2024, 3, 8)
# the reply holding the answer ("front left tyre") gives no thought: the local compression keeps no clause of it
DASHBOARD = DialogueTurn(id="2024-03-04#0", query="The dashboard showed a yellow warning light this morning.",
                         response="That symbol means the front left tyre has low pressure. Please check it at the "
                                  "next petrol station.")
DAY = [DASHBOARD,
       DialogueTurn(id="2024-03-04#1", query="I had a lot of pressure at work this week, which tired me out.",
                    response="That sounds exhausting. Try to rest tonight."),
       DialogueTurn(id="2024-03-04#2", query="My battery was low when I parked, which worried me.",
                    response="I'll remind you to charge next time."),
       DialogueTurn(id="2024-03-04#3", query="I'd like to listen to some jazz on the way to work.",
                    response="Playing a jazz playlist for your commute."),
       DialogueTurn(id="2024-03-04#4", query="The car felt cold when I got in today.",
                    response="I've set the cabin to 22 degrees.")]
QUESTION = "Do you remember which tyre had low pressure?"


def _caim(embedder=None, **kw):
    m = CAIM(embedder=embedder, **kw)
    m.add_session("u", D, list(DAY))
    return m


def test_answer_word_dropped_by_compression_is_found_through_the_source_turn(minilm):
    before, after = _caim(minilm, sources=False), _caim(minilm)
    assert not any("tyre" in t.text.lower() for t in after.thoughts("u"))  # compression dropped it
    assert [t.text for t in before.thoughts("u")] == [t.text for t in after.thoughts("u")]  # same thoughts
    old = before.retrieve("u", QUESTION, TODAY)
    assert old.retrieved and DASHBOARD.id not in old.items[0].source_turn_ids  # not first before
    new = after.retrieve("u", QUESTION, TODAY)
    assert new.retrieved and new.items[0].source_turn_ids == (DASHBOARD.id,)  # found first now
    assert "warning light" in new.items[0].text  # what comes back is the thought, not the dialogue


def test_source_turn_scoring_without_a_model():
    """The hashing embedder shares literal words only: "tyre" is only in the reply."""
    before, after = _caim(sources=False), _caim()
    q = "Remember what the tyre symbol meant, front left?"
    assert DASHBOARD.id not in before.retrieve("u", q, TODAY).items[0].source_turn_ids
    assert after.retrieve("u", q, TODAY).items[0].source_turn_ids == (DASHBOARD.id,)


def test_cited_turns_are_kept_and_superseded_ones_pruned(tmp_path):
    m = CAIM(db=tmp_path / "c.db")
    d1, d2 = date(2024, 3, 1), date(2024, 3, 5)
    m.add_session("u", d1, [DialogueTurn(id="2024-03-01#0", query="I like spicy Sichuan food a lot.", response="Noted."),
                            DialogueTurn(id="2024-03-01#1", query="Thanks!", response="You're welcome.")])
    assert [t.id for _, t in m.turns("u")] == ["2024-03-01#0"]  # small talk backs no thought: not kept
    m.add_session("u", d2, [DialogueTurn(id="2024-03-05#0", query="I don't like spicy Sichuan food a lot.",
                                         response="Noted.")])
    assert [t.id for _, t in m.turns("u")] == ["2024-03-05#0"]  # the contradicted thought's turn went with it
    with m.store.tx("u") as tx:
        tx.forget()
    assert m.turns("u") == [] and m.thoughts("u") == []
    m.close()
    raw = (tmp_path / "c.db").read_bytes()
    assert b"Sichuan" not in raw  # secure_delete: the kept turns are erased on disk too


def test_a_second_session_on_the_same_day_continues_the_turn_numbering():
    m = CAIM()
    m.add_turn("u", D, "I parked on level three of the mall garage.")
    m.end_session("u")
    t = m.add_turn("u", D, "I left my umbrella in the boot of the car.")
    assert t.id == "2024-03-04#1"
    m.end_session("u")
    assert [x.id for _, x in m.turns("u")] == ["2024-03-04#0", "2024-03-04#1"]


def _unit(i, sources, text=None, summary=False):
    return Thought(id=f"summary:{i}" if summary else f"t{i}", user="u", text=text or f"thought {i}", tags=(),
                   timestamp=D, source_turn_ids=tuple(sources), created_at=TODAY, updated_at=TODAY)


def test_fold_gives_one_item_per_turn_and_skips_summaries_that_add_nothing():
    units = [_unit(0, ["a"]), _unit(1, ["a"]), _unit(2, ["b"]), _unit(3, ["a", "b"], summary=True),
             _unit(4, ["c"]), _unit(5, ["a", "b", "c", "d"], summary=True)]
    ranked = [(0, .9), (1, .9), (2, .8), (3, .7), (4, .6), (5, .5)]
    items = fold(units, ranked, k=5)
    assert [i.id for i in items] == ["t0", "t2", "t4", "summary:5"]
    assert items[0].text == "thought 0; thought 1"  # the other thought of turn a rides along
    assert items[-1].tags == ("summary",)
    # the strong dense hit keeps a place even when k is small
    assert [i.id for i in fold(units, ranked, k=2, keep=4)] == ["t0", "t4"]


def test_day_summary_only_for_days_of_two_or_more_turns():
    turns = [(D, DAY[0]), (D, DAY[1]), (date(2024, 3, 5), DAY[2])]
    sums = day_summaries("u", turns, TODAY)
    assert [s.timestamp for s in sums] == [D] and sums[0].source_turn_ids == (DAY[0].id, DAY[1].id)
    assert sums[0].text.startswith("The summary of the conversation on 2024-03-04 is: The dashboard showed")
    long = [DialogueTurn(id=f"2024-03-04#{i}", query="word " * 80 + ".") for i in range(10)]
    assert len(summary_text(D, long)) <= 400


def test_storage_counts_the_kept_turns():
    with_src, without = _caim(), _caim(sources=False)
    kept = sum(len(t.query) + len(t.response) for _, t in with_src.turns("u"))
    assert kept > 0 and with_src.storage("u").chars == without.storage("u").chars + kept
    assert np.isclose(with_src.storage("u").items, without.storage("u").items)
