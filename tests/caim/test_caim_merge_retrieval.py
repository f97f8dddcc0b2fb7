"""Review/merge of thoughts and the Python matching + relevance filter of retrieval (no model needed)."""
from datetime import date

from boundmem.caim.base import DialogueTurn
from boundmem.caim.dates import parse_date_range
from boundmem.caim.models import Thought
from boundmem.caim.retrieval import EmbeddingRelevance, match
from boundmem.caim.system import CAIM
from boundmem.embed import HashEmbedder

TODAY = date(2023, 5, 7)


def _turn(day, i, q, r="Okay."):
    return DialogueTurn(id=f"{day.isoformat()}#{i}", query=q, response=r)


def test_duplicate_is_merged_with_sources_unioned():
    m = CAIM()
    d1, d2 = date(2023, 4, 28), date(2023, 5, 3)
    m.add_session("u", d1, [_turn(d1, 0, "I love spicy Sichuan food.")])
    m.add_session("u", d2, [_turn(d2, 0, "Hello there."), _turn(d2, 1, "I love spicy Sichuan food.")])
    ts = [t for t in m.thoughts("u") if "Sichuan" in t.text]
    assert len(ts) == 1
    assert ts[0].source_turn_ids == ("2023-04-28#0", "2023-05-03#1")
    assert ts[0].timestamp == d1
    assert ts[0].days() == {d1, d2}
    assert m.stats("u") == {"merged": 1, "forgotten": 0}


def test_contradiction_newer_wins():
    m = CAIM()
    d1, d2 = date(2023, 4, 28), date(2023, 5, 3)
    m.add_session("u", d1, [_turn(d1, 0, "I like spicy Sichuan food a lot.")])
    m.add_session("u", d2, [_turn(d2, 0, "I don't like spicy Sichuan food a lot.")])
    ts = [t for t in m.thoughts("u") if "Sichuan" in t.text]
    assert len(ts) == 1
    assert "doesn't like" in ts[0].text and ts[0].timestamp == d2 and ts[0].source_turn_ids == ("2023-05-03#0",)
    assert m.stats("u") == {"merged": 0, "forgotten": 1}


def test_unrelated_thoughts_are_both_kept():
    m = CAIM()
    d = date(2023, 4, 28)
    m.add_session("u", d, [_turn(d, 0, "I love spicy Sichuan food."), _turn(d, 1, "I play the guitar every evening.")])
    assert len(m.thoughts("u")) == 2


def _thought(i, text, tags, day, sources=None):
    return Thought(id=f"t{i}", user="u", text=text, tags=tuple(tags), timestamp=day,
                   source_turn_ids=tuple(sources or [f"{day.isoformat()}#0"]), created_at=TODAY, updated_at=TODAY)


THOUGHTS = [
    _thought(1, "AI recommended Calm and Headspace to user", ["Recommendations/Tools/app"], date(2023, 5, 4)),
    _thought(2, "User watched Titanic", ["Activities/Media/watching"], date(2023, 5, 3)),
    _thought(3, "User watched Inception", ["Activities/Media/watching", "Preferences/Movies/title"], date(2023, 5, 1)),
    _thought(4, "User likes rock music", ["Preferences/Music/genre"], date(2023, 4, 27)),
    _thought(5, "User saw a cherry tree", ["Activities/Outings/park"], date(2023, 4, 28)),
]


def test_match_keeps_shared_tags_only():
    got = [c.thought.id for c in match(THOUGHTS, ["Activities/Media/watching"], None)]
    assert set(got) == {"t2", "t3"}


def test_match_subcategory_counts_category_alone_does_not():
    got = {c.thought.id for c in match(THOUGHTS, ["Activities/Media/reading"], None)}
    assert got == {"t2", "t3"}  # same subcategory; the Outings thought shares only "Activities"


def test_match_filters_by_date_and_falls_back_to_tags():
    may3 = parse_date_range("What movie did I watch on May 3rd?", TODAY)
    assert [c.thought.id for c in match(THOUGHTS, ["Activities/Media/watching"], may3)] == ["t2"]
    may6 = parse_date_range("on May 6th", TODAY)  # no watching thought that day -> tag matches stand
    assert {c.thought.id for c in match(THOUGHTS, ["Activities/Media/watching"], may6)} == {"t2", "t3"}


def test_relevance_filter_can_return_nothing():
    emb = HashEmbedder()
    rel = EmbeddingRelevance(emb, threshold=0.2)
    cands = match(THOUGHTS, ["Activities/Media/watching"], None)
    assert rel.filter("quantum chromodynamics lattice gauge", cands, 5) == []
    kept = rel.filter("Did I watch Titanic?", cands, 5)
    assert kept and kept[0].thought.id == "t2"
    assert len(rel.filter("watched", cands, 1)) == 1  # top-k cap


def test_retrieve_uses_tags_and_date_end_to_end():
    m = CAIM()
    d1, d2 = date(2023, 5, 1), date(2023, 5, 3)
    m.add_session("u", d1, [_turn(d1, 0, "I watched the movie Inception at the cinema with friends.")])
    m.add_session("u", d2, [_turn(d2, 0, "I watched the movie Titanic at the cinema, it was sad.")])
    res = m.retrieve("u", "What movie did I watch on May 3rd?", TODAY, k=5)
    assert res.retrieved and res.items
    assert res.items[0].source_turn_ids == ("2023-05-03#0",)  # the date bonus puts May 3rd first
    # soft: the other day's movie is ranked lower, not filtered out
    assert [i.source_turn_ids for i in res.items][1:] == [("2023-05-01#0",)]
    assert not m.retrieve("u", "Tell me a joke.", TODAY).retrieved


# --- soft re-ranking over dense retrieval -------------------------------------------------------------------
def test_rank_bonuses_reorder_but_never_drop_the_strong_dense_hit():
    import numpy as np

    from boundmem.caim.retrieval import RetrievalParams, rank

    cos = np.array([0.62, 0.30, 0.28, 0.27, 0.26, 0.25], np.float32)  # thought 0: the strong dense hit
    tag_sim = np.array([0, 1, 1, 1, 1, 1], np.float32)  # ...shares no tag with the query; the others do
    in_range = np.array([0, 1, 1, 1, 1, 1], np.float32)
    p = RetrievalParams(pool=0, tag_bonus=0.2, date_bonus=0.2, cutoff=0.25, near=0.3)
    top = rank(cos, tag_sim, in_range, p, k=5)
    assert len(top) == 5 and 0 in [i for i, _ in top]  # bonuses lifted five others above it; it keeps a place
    assert [i for i, _ in rank(cos, tag_sim, in_range, p, k=5)][:4] == [1, 2, 3, 4]
    # with small bonuses it stays first; the cutoff drops the far ones but never empties a confident result
    p2 = RetrievalParams(pool=0, tag_bonus=0.02, date_bonus=0.02, cutoff=0.5, near=0.3)
    assert [i for i, _ in rank(cos, tag_sim, in_range, p2, k=5)] == [0]
    # a far best match alone does not pass the cutoff: the filter may return nothing
    assert rank(cos - 0.4, tag_sim * 0, in_range * 0, p2, k=5) == []


def test_hard_tag_match_would_lose_what_soft_ranking_keeps():
    """The earlier hard matching drops a thought whose tags miss the query's; CAIM's retrieval still returns it."""
    from boundmem.caim.postthink import LocalThinker
    from boundmem.caim.system import CAIM, CAIMParts

    class FixedTagger:  # tags the stored thought and the query into different subcategories
        def tags(self, text, max_tags=3):
            return ["Activities/Media/watching"] if text.startswith("What") else ["Preferences/Music/genre"]

    m = CAIM(parts=CAIMParts(tagger=FixedTagger(), thinker=LocalThinker(FixedTagger())), controller=False)
    d = date(2023, 5, 1)
    m.add_session("u", d, [_turn(d, 0, "I watched the movie Inception at the cinema with friends.")])
    stored = m.thoughts("u")
    assert stored and all(t.tags == ("Preferences/Music/genre",) for t in stored)
    query = "What movie Inception did I watch at the cinema?"
    assert match(stored, ["Activities/Media/watching"], None) == []  # hard filter: nothing
    res = m.retrieve("u", query, TODAY, k=5)
    assert res.items and res.items[0].source_turn_ids == ("2023-05-01#0",)


def test_cutoff_guards_nearby_memories_not_recall_questions():
    """A recall question says the answer is in memory: it gets the best k however far. A message the controller let
    through only because a stored thought was near keeps the cutoff, so it may get nothing."""
    from boundmem.caim.controller import recall_question
    from boundmem.caim.retrieval import RetrievalParams

    m = CAIM(params=RetrievalParams(pool=0, tag_bonus=0.0, date_bonus=0.0, cutoff=0.95, near=0.0))
    d1 = date(2023, 5, 1)
    m.add_session("u", d1, [_turn(d1, 0, "I watched the movie Inception at the cinema with friends."),
                            _turn(d1, 1, "My sister bought a red bicycle for her commute.")])
    assert recall_question("Which film did we see at the cinema?") and not recall_question("Cinema popcorn prices")
    recall = m.retrieve("u", "Which film did we see at the cinema?", TODAY)
    assert recall.retrieved and recall.items  # every cosine is below 0.95
    near = m.retrieve("u", "Cinema popcorn prices", TODAY)
    assert near.retrieved and near.items == []  # retrieved for proximity (near=0), nothing clears the cutoff
    assert CAIM(relevance_filter=False).use_filter is False
