"""The episodic half of the Store contract (store/sql_episodes.py), run against SQLite and PostgreSQL like the rest:
episodes are written, revised, deleted, opted out of, exported and forgotten inside the user's transaction, with the
same audit log and the same bounds (a tag required, episodic opt-outs refuse and purge)."""
from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from boundmem.errors import InputError, NotFoundError
from boundmem.store.base import OptedOutError

DIM = 8
FOOD = "Preferences/Food/restaurant"
TRIP = "Activities/Travel/trip"
MUSIC = "Preferences/Music/genre"


def e(i: int) -> np.ndarray:
    v = np.zeros(DIM, np.float32)
    v[i] = 1.0
    return v


def remember(store, user, text, tags=(FOOD,), day=date(2024, 5, 7), vec=None, term="long", conv="c1"):
    with store.transaction(user) as tx:
        return tx.add_episode(text, tags, day, e(0) if vec is None else vec, f"post-thinking of {conv}", term=term,
                              sources=(f"{day.isoformat()}#0",), conversation_id=conv)


def test_an_episode_is_stored_listed_read_back_and_audited(store):
    ep = remember(store, "u", "AI recommended the restaurant  Green Leaf to the user.")
    assert ep.text == "AI recommended the restaurant Green Leaf to the user."   # spacing normalised
    assert (ep.user, ep.tags, ep.day, ep.term, ep.source_turn_ids, ep.conversation_id) == \
        ("u", (FOOD,), date(2024, 5, 7), "long", ("2024-05-07#0",), "c1")
    assert store.episodes("u") == [ep]
    with store.transaction("u") as tx:
        assert tx.episode(ep.id) == ep and tx.episodes("long") == [ep] and tx.episodes("short") == []
    (a,) = store.audit("u")
    assert (a.op, a.preference_id, a.category, a.why) == ("episode", ep.id, f"episodic:{FOOD}", "learned from a conversation")
    assert a.after["text"] == ep.text and a.cause == "post-thinking of c1"
    assert store.verify_audit("u").ok
    assert store.episodes("other") == []


def test_episodes_filter_by_day_range_and_term_and_come_oldest_day_first(store):
    late = remember(store, "u", "User went hiking at Blue Peak.", (TRIP,), date(2024, 5, 9))
    early = remember(store, "u", "AI suggested Green Leaf.", (FOOD,), date(2024, 5, 2), term="short")
    mid = remember(store, "u", "User likes jazz.", (MUSIC,), date(2024, 5, 5))
    assert [x.id for x in store.episodes("u")] == [early.id, mid.id, late.id]
    assert [x.id for x in store.episodes("u", since=date(2024, 5, 3))] == [mid.id, late.id]
    assert [x.id for x in store.episodes("u", until=date(2024, 5, 5))] == [early.id, mid.id]
    assert [x.id for x in store.episodes("u", since=date(2024, 5, 5), until=date(2024, 5, 5))] == [mid.id]
    assert [x.id for x in store.episodes("u", term="short")] == [early.id]
    eps, mat = store.episode_vectors("u", since=date(2024, 5, 3))
    assert [x.id for x in eps] == [mid.id, late.id] and mat.shape == (2, DIM)
    assert np.allclose(np.linalg.norm(mat, axis=1), 1.0, atol=1e-3)


def test_an_episode_needs_a_tag_a_text_and_at_most_three_tags(store):
    for text, tags in (("User likes tea.", ()), ("   ", (FOOD,)), ("x", (FOOD, TRIP, MUSIC, "A/B/c")),
                       ("x", ("a//b",)), ("x" * 401, (FOOD,))):
        with pytest.raises(InputError):
            remember(store, "u", text, tags)
    assert store.episodes("u") == [] and store.audit("u") == []


def test_revise_keeps_the_id_and_audits_before_and_after(store):
    ep = remember(store, "u", "AI suggested Green Leaf.", term="short")
    with store.transaction("u") as tx:
        with pytest.raises(InputError):   # a new text without its vector would leave a stale embedding
            tx.revise_episode(ep.id, "merge", "merged", text="Something else.")
        r = tx.revise_episode(ep.id, "consolidated at session end", "moved into long-term memory", term="long",
                              sources=("2024-05-07#0", "2024-05-08#1"), tags=(FOOD, TRIP), day=date(2024, 5, 6))
    assert (r.id, r.term, r.tags, r.day, r.source_turn_ids) == \
        (ep.id, "long", (FOOD, TRIP), date(2024, 5, 6), ("2024-05-07#0", "2024-05-08#1"))
    assert r.created_at == ep.created_at and r.updated_at >= ep.updated_at
    with store.transaction("u") as tx:
        r2 = tx.revise_episode(ep.id, "merge", "restated", text="AI suggested Green Leaf twice.", embedding=e(1))
    assert r2.text == "AI suggested Green Leaf twice."
    _, mat = store.episode_vectors("u")
    assert np.allclose(mat[0], e(1), atol=1e-3)
    ops = [(a.op, a.why) for a in store.audit("u")]
    assert ops == [("episode", "learned from a conversation"), ("episode_update", "moved into long-term memory"),
                   ("episode_update", "restated")]
    upd = store.audit("u")[1]
    assert upd.before["term"] == "short" and upd.after["term"] == "long"


def test_delete_erases_the_episode_and_its_audit_payloads(store):
    ep = remember(store, "u", "AI suggested Zebra Grill.")
    keep = remember(store, "u", "User went to Blue Peak.", (TRIP,))
    gone = store.delete_episode("u", ep.id, cause="deleted by user")
    assert gone == ep and store.episodes("u") == [keep]
    with pytest.raises(NotFoundError):
        store.delete_episode("u", ep.id, cause="again")
    with pytest.raises(NotFoundError):
        store.delete_episode("other", keep.id, cause="not theirs")
    log = store.audit("u")
    about = [a for a in log if a.preference_id == ep.id]
    assert [a.op for a in about] == ["episode", "episode_delete"]
    assert all(a.before is None and a.after is None and a.cause == "erased" for a in about)
    assert about[-1].category == f"episodic:{FOOD}"   # what kind of memory it was, never what it said
    assert "Zebra" not in store.export("u").model_dump_json()
    assert store.verify_audit().ok


@pytest.mark.parametrize("prefix", ["Preferences", "Preferences/Food", FOOD])
def test_an_episodic_opt_out_purges_what_it_covers_and_refuses_later_writes(store, prefix):
    food = remember(store, "u", "AI suggested Zebra Grill.", (FOOD,))
    both = remember(store, "u", "User had Zebra Grill on the trip.", (TRIP, FOOD))
    trip = remember(store, "u", "User went to Blue Peak.", (TRIP,))
    purged = store.episode_opt_out("u", prefix, cause="user opted out")
    assert {x.id for x in purged} == {food.id, both.id}   # any tag under it: the thought talks about it
    assert store.episodes("u") == [trip] and store.episode_opt_outs("u") == [prefix]
    with pytest.raises(OptedOutError):
        remember(store, "u", "AI suggested Lime Bistro.", (FOOD,))
    with pytest.raises(OptedOutError):
        remember(store, "u", "Trip with dinner.", (TRIP, FOOD))
    with store.transaction("u") as tx:
        with pytest.raises(OptedOutError):   # nor can a kept thought be retagged into it
            tx.revise_episode(trip.id, "x", "x", tags=(TRIP, FOOD))
    ops = [a.op for a in store.audit("u")]
    assert ops.count("episode_opt_out") == 1 and ops.count("episode_delete") == 2
    assert "Zebra" not in store.export("u").model_dump_json()
    assert store.opt_outs("u") == []   # the category opt-outs are another list
    assert store.episode_opt_in("u", prefix, cause="back in") is True
    assert store.episode_opt_in("u", prefix, cause="again") is False
    remember(store, "u", "AI suggested Lime Bistro.", (FOOD,))
    assert store.verify_audit("u").ok


def test_an_opted_out_row_is_never_read_even_if_it_exists(store):
    """The reads apply the opt-outs themselves, as `search` does for preferences."""
    ep = remember(store, "u", "AI suggested Zebra Grill.")
    with store.transaction("u") as tx:   # an opt-out row written without its purge (an older writer, a bug)
        tx._q("INSERT INTO episode_opt_outs(subject, prefix, at) VALUES (?,?,?)", (tx.subject, "Preferences", tx.d.now()))
    assert store.episodes("u") == [] and store.episode_vectors("u")[0] == []
    with store.transaction("u") as tx:
        assert tx.episode(ep.id) == ep   # still there to be purged or deleted


def test_export_includes_episodes_and_episodic_opt_outs(store):
    ep = remember(store, "u", "User went to Blue Peak.", (TRIP,))
    store.episode_opt_out("u", "Preferences/Music", cause="user opted out")
    x = store.export("u")
    assert x.episodes == [ep] and x.episode_opt_outs == ["Preferences/Music"]
    assert x.model_validate_json(x.model_dump_json()).episodes == [ep]


def test_forget_erases_episodes_keeps_episodic_opt_outs_and_counts_them(store):
    remember(store, "u", "AI suggested Zebra Grill.")
    remember(store, "u", "User went to Blue Peak.", (TRIP,))
    remember(store, "other", "User likes tea.")
    store.episode_opt_out("u", "Preferences/Music", cause="user opted out")
    store.forget("u", cause="forget")
    assert store.episodes("u") == [] and len(store.episodes("other")) == 1
    assert store.episode_opt_outs("u") == ["Preferences/Music"]   # consent outlives forget
    from test_store_contract import closed_chain

    assert closed_chain(store, "u")[-1].after == {"preferences_erased": 0, "episodes_erased": 2}
    assert "Zebra" not in store.export("u").model_dump_json()
    assert store.verify_audit().ok


def test_episodes_and_preferences_share_one_embedding_dimension(store):
    from boundmem.store.base import EmbeddingDimensionError

    remember(store, "u", "User went to Blue Peak.", (TRIP,))
    with pytest.raises(EmbeddingDimensionError):
        remember(store, "u", "AI suggested Zebra Grill.", vec=np.ones(DIM + 1))


def test_a_failed_transaction_leaves_no_episode(store):
    with pytest.raises(RuntimeError):
        with store.transaction("u") as tx:
            tx.add_episode("User went to Blue Peak.", (TRIP,), date(2024, 5, 7), e(0), "x")
            raise RuntimeError("boom")
    assert store.episodes("u") == [] and store.audit("u") == []
