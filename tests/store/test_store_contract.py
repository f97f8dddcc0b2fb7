"""The Store contract, written once and run against every implementation (SQLite and PostgreSQL).

Vectors are hand-made (basis vectors and their mixtures), so expected rankings and scores follow
from geometry, not from the code under test.
"""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from boundmem.models import UserExport
from boundmem.schema.model import CategoryPath
from boundmem.errors import InputError, NotFoundError, StoreError
from boundmem.store.base import EmbeddingDimensionError, OptedOutError, Store

DIM = 8
MUSIC = CategoryPath(main="entertainment", sub="music", detail="genre")
RADIO = CategoryPath(main="entertainment", sub="music", detail="station")
PODCAST = CategoryPath(main="entertainment", sub="podcast", detail="topic")
FOOD = CategoryPath(main="poi", sub="restaurant", detail="cuisine")


def e(i: int, dim: int = DIM) -> np.ndarray:
    v = np.zeros(dim, np.float32)
    v[i] = 1.0
    return v


def closed_chain(store, user):
    """The audit chain a forget closed: under the id's first pseudonym, no longer shown by `audit(user)`."""
    import sys

    from boundmem.store.sql_tx import AUDIT_COLS, audit_entry

    d = sys.modules[type(store).__module__].DIALECT
    with (store._use if hasattr(store, "_use") else store._conn)() as con:
        rows = con.execute(d.sql(f"SELECT {AUDIT_COLS} FROM audit WHERE subject=? ORDER BY useq"),
                           (store.keys.subject(user),)).fetchall()
    return [audit_entry(user, r, d.loads) for r in rows]


def add(store, user, path, attribute, vec=None, conv="c1", cause="test insert"):
    with store.transaction(user) as tx:
        return tx.insert(path, attribute, f"I like {attribute}.", e(0) if vec is None else vec, conv, cause)


def test_implements_protocol(store):
    assert isinstance(store, Store)


# --- writes and their audit entries ------------------------------------------------------
def test_insert_replace_delete_are_audited_with_before_after_and_cause(store):
    p = add(store, "u", MUSIC, "jazz", cause="insert from conversation c1")
    assert store.get("u", p.id) == p
    assert (p.user, p.path, p.attribute, p.sentence, p.conversation_id) == ("u", MUSIC, "jazz", "I like jazz.", "c1")

    with store.transaction("u") as tx:
        q = tx.replace(p.id, "rock", "Rock now.", e(1), "c2", "update from conversation c2")
    assert q.id == p.id and q.attribute == "rock" and q.sentence == "Rock now." and q.conversation_id == "c2"
    assert q.created_at == p.created_at and q.updated_at >= p.updated_at
    assert store.preferences("u") == [q]

    live = store.audit("u")
    assert [a.op for a in live] == ["insert", "update"]
    assert [a.cause for a in live] == ["insert from conversation c1", "update from conversation c2"]
    ins, upd = live
    assert ins.before is None and ins.after["attribute"] == "jazz" and ins.after["id"] == p.id
    assert upd.before["attribute"] == "jazz" and upd.after["attribute"] == "rock"
    assert upd.before["sentence"] == "I like jazz." and upd.after["sentence"] == "Rock now."

    gone = store.delete("u", p.id, cause="deleted by user")
    assert gone == q
    assert store.preferences("u") == []
    with pytest.raises(NotFoundError):
        store.get("u", p.id)

    # deleting a preference erases it from the audit log too: what was done, when, where, why and a hash remain
    log = store.audit("u")
    assert [a.op for a in log] == ["insert", "update", "delete"]
    assert all(a.preference_id == p.id and a.user == "u" and a.category == str(MUSIC) for a in log)
    assert all(a.before is None and a.after is None and a.cause == "erased" for a in log)
    assert [a.why for a in log] == ["learned from a conversation", "updated from a conversation", "deleted on request"]
    assert [a.seq for a in log] == [1, 2, 3]
    assert [(a.content_hash, a.hash) for a in log[:2]] == [(a.content_hash, a.hash) for a in live]
    assert "jazz" not in store.export("u").model_dump_json() and "Rock" not in store.export("u").model_dump_json()
    assert store.verify_audit("u").ok


def test_note_records_a_decision_without_changing_preferences(store):
    p = add(store, "u", MUSIC, "jazz")
    with store.transaction("u") as tx:
        tx.note("pass", "pass from conversation c2: same attribute", p.id, {"attribute": "jazz"})
    assert store.preferences("u") == [p]
    last = store.audit("u")[-1]
    assert (last.op, last.preference_id, last.after, last.before) == ("pass", p.id, {"attribute": "jazz"}, None)


def test_transaction_reads_its_own_writes_per_detail(store):
    with store.transaction("u") as tx:
        a = tx.insert(MUSIC, "jazz", "", e(0), None, "x")
        b = tx.insert(MUSIC, "rock", "", e(1), None, "x")
        c = tx.insert(RADIO, "fm4", "", e(2), None, "x")
        assert tx.preferences(MUSIC) == [a, b]
        assert tx.preferences(RADIO) == [c]
        assert tx.preferences() == [a, b, c]
    # insertion order survives, also for rows written within the same instant
    assert [p.attribute for p in store.preferences("u")] == ["jazz", "rock", "fm4"]


def test_rollback_on_exception_leaves_nothing(store):
    keep = add(store, "u", MUSIC, "jazz")
    audit_before = store.audit("u")
    with pytest.raises(RuntimeError, match="boom"):
        with store.transaction("u") as tx:
            tx.insert(MUSIC, "rock", "", e(1), "c2", "x")
            tx.replace(keep.id, "blues", "", e(2), "c2", "x")
            tx.note("pass", "x")
            tx.delete(keep.id, "x")
            raise RuntimeError("boom")
    assert store.preferences("u") == [keep]
    assert store.get("u", keep.id).attribute == "jazz"
    assert store.audit("u") == audit_before
    # and the store is usable afterwards on the same thread
    add(store, "u", MUSIC, "soul")
    assert [p.attribute for p in store.preferences("u")] == ["jazz", "soul"]


def test_rollback_of_a_new_users_first_transaction_leaves_no_data(store):
    with pytest.raises(ValueError):
        with store.transaction("new") as tx:
            tx.insert(MUSIC, "jazz", "", e(0), None, "x")
            raise ValueError("bad")
    assert store.preferences("new") == [] and store.audit("new") == []
    assert store.export("new").preferences == []


def test_audit_log_rows_cannot_be_deleted_or_rewritten(store_factory):
    """Append-only is enforced by the database itself, not just by the absence of an API."""
    store = store_factory()
    add(store, "u", MUSIC, "jazz")
    n = len(store.audit("u"))
    if store_factory.kind == "sqlite":
        import sqlite3

        con = sqlite3.connect(store.path)
        for sql in ("DELETE FROM audit", "UPDATE audit SET cause='tampered'",
                    "UPDATE audit SET after='{\"attribute\": \"rock\"}'", "UPDATE audit SET op='delete'"):
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                con.execute(sql)
        con.close()
    else:
        import psycopg

        with psycopg.connect(store.url, autocommit=True) as con:
            for sql in ("DELETE FROM audit", "TRUNCATE audit", "UPDATE audit SET cause='tampered'",
                        "UPDATE audit SET after='{\"attribute\": \"rock\"}'", "UPDATE audit SET op='delete'"):
                with pytest.raises(psycopg.Error, match="append-only"):
                    con.execute(sql)
    log = store.audit("u")
    assert len(log) == n and log[0].cause == "test insert" and log[0].after["attribute"] == "jazz"


def test_delete_unknown_id_raises_and_writes_nothing(store):
    add(store, "u", MUSIC, "jazz")
    before = store.audit("u")
    with pytest.raises(NotFoundError):
        store.delete("u", "no-such-id", cause="x")
    with pytest.raises(NotFoundError):
        with store.transaction("u") as tx:
            tx.replace("no-such-id", "rock", "", e(1), None, "x")
    assert store.audit("u") == before


# --- embeddings ----------------------------------------------------------------------------
def test_vectors_are_unit_norm_and_aligned_with_preferences(store):
    rng = np.random.default_rng(7)
    written = {}
    for i, path in enumerate([MUSIC, MUSIC, RADIO, PODCAST, FOOD]):
        v = rng.normal(size=DIM).astype(np.float32) * (i + 1)
        written[f"a{i}"] = v / np.linalg.norm(v)
        add(store, "u", path, f"a{i}", vec=v)
    prefs, mat = store.vectors("u")
    assert mat.shape == (5, DIM)
    assert [p.attribute for p in prefs] == ["a0", "a1", "a2", "a3", "a4"]
    for p, row in zip(prefs, mat):
        # SQLite keeps int8 components and a scale: a component is off by at most half a step, max|v| / 254
        np.testing.assert_allclose(row, written[p.attribute], atol=np.abs(written[p.attribute]).max() / 200)
        assert abs(float(np.linalg.norm(row)) - 1.0) < 1e-3
    assert store.vectors("nobody")[0] == []


def test_bad_embeddings_are_refused_before_anything_is_written(store):
    add(store, "u", MUSIC, "jazz")
    before = (store.preferences("u"), store.audit("u"))
    for bad in (np.array([np.nan] * DIM), np.array([]), np.ones((2, DIM))):
        with pytest.raises(ValueError):
            add(store, "u", MUSIC, "rock", vec=bad)
    with pytest.raises(StoreError, match="8-d"):  # a different embedder's dimension
        add(store, "u", MUSIC, "rock", vec=e(0, dim=16))
    assert (store.preferences("u"), store.audit("u")) == before
    # the dimension belongs to the store: another user's first write with another embedder is refused too,
    # naming both dimensions (instead of a store where half the users can no longer recall)
    with pytest.raises(EmbeddingDimensionError, match="stored 8, given 16") as err:
        add(store, "v", MUSIC, "rock", vec=e(3, dim=16))
    assert (err.value.stored, err.value.got) == (8, 16)
    assert store.preferences("v") == [] and store.embedding_dim() == 8


def test_search_is_cosine_top_k(store):
    vecs = {"jazz": e(0), "rock": e(1), "fm4": e(2), "news": e(3), "pizza": e(4)}
    paths = {"jazz": MUSIC, "rock": MUSIC, "fm4": RADIO, "news": PODCAST, "pizza": FOOD}
    for a, v in vecs.items():
        add(store, "u", paths[a], a, vec=v)
    query = np.array([0.2, 3.0, 1.0, 0.0, 0.5, 0, 0, 0], np.float32)  # not unit: cosine must normalise it
    qn = query / np.linalg.norm(query)

    hits = store.search("u", query, k=3)
    assert [p.attribute for p, _ in hits] == ["rock", "fm4", "pizza"]
    for p, score in hits:
        assert score == pytest.approx(float(qn @ vecs[p.attribute]), abs=1e-5)

    assert [p.attribute for p, _ in store.search("u", query, k=10)] == ["rock", "fm4", "pizza", "jazz", "news"]
    assert store.search("u", query, k=0) == []
    assert store.search("nobody", query, k=3) == []


def _opt_out_unpurged(store, user: str, prefix: str) -> None:
    """An opt-out row with the preferences under it still there, as if they had escaped the purge (written by an
    older version, restored from a backup): only the opt_outs table is written, straight through the transaction."""
    with store.transaction(user) as tx:
        tx._q("INSERT INTO opt_outs(subject, prefix, at) VALUES (?,?,?)", (tx.subject, prefix, tx.d.now()))


@pytest.mark.parametrize("prefixes, left", [
    (("entertainment/music",), ["pizza", "news"]),
    (("entertainment", "poi/restaurant/cuisine"), []),
    (("entertainment/music/genre",), ["fm4", "pizza", "news"]),
    (("entertainment/mus", "poi/restaurant/cuisine/x"), ["rock", "fm4", "pizza", "jazz", "news"]),  # no partial names
])
def test_search_never_returns_a_preference_under_an_opt_out_even_if_its_row_exists(store, prefixes, left):
    vecs = {"jazz": e(0), "rock": e(1), "fm4": e(2), "news": e(3), "pizza": e(4)}
    paths = {"jazz": MUSIC, "rock": MUSIC, "fm4": RADIO, "news": PODCAST, "pizza": FOOD}
    for a, v in vecs.items():
        add(store, "u", paths[a], a, vec=v)
        add(store, "v", paths[a], a, vec=v)
    for prefix in prefixes:
        _opt_out_unpurged(store, "u", prefix)
    query = np.array([0.2, 3.0, 1.0, 0.0, 0.5, 0, 0, 0], np.float32)
    assert len(store.preferences("u")) == 5   # the rows are there ...
    assert [p.attribute for p, _ in store.search("u", query, k=10)] == left   # ... and never found
    assert [p.attribute for p, _ in store.search("u", query, k=1)] == left[:1]
    assert len(store.search("v", query, k=10)) == 5   # another user's opt-outs change nothing


def test_search_with_a_query_of_another_dimension_is_a_clear_error(store):
    add(store, "u", MUSIC, "jazz", vec=e(0))
    with pytest.raises(EmbeddingDimensionError, match="different embedder"):
        store.search("u", e(0, dim=16), k=3)
    with pytest.raises(EmbeddingDimensionError, match="stored 8, given 16"):  # also for a user with nothing stored
        store.search("nobody", e(0, dim=16), k=3)


def test_preferences_filter_by_prefix(store):
    for a, path in [("jazz", MUSIC), ("fm4", RADIO), ("news", PODCAST), ("pizza", FOOD)]:
        add(store, "u", path, a)
    assert [p.attribute for p in store.preferences("u", "entertainment")] == ["jazz", "fm4", "news"]
    assert [p.attribute for p in store.preferences("u", "entertainment/music")] == ["jazz", "fm4"]
    assert [p.attribute for p in store.preferences("u", "entertainment/music/station")] == ["fm4"]
    assert [p.attribute for p in store.preferences("u", "poi")] == ["pizza"]
    assert store.preferences("u", "nothing") == []


# --- opt-out ---------------------------------------------------------------------------------
def test_opt_out_purges_with_audit_and_blocks_later_writes(store):
    jazz = add(store, "u", MUSIC, "jazz")
    fm4 = add(store, "u", RADIO, "fm4")
    news = add(store, "u", PODCAST, "news")
    other = add(store, "v", MUSIC, "jazz")

    purged = store.opt_out("u", "entertainment/music", cause="user opted out of entertainment/music")
    assert {p.id for p in purged} == {jazz.id, fm4.id}
    assert store.preferences("u") == [news]
    assert store.opt_outs("u") == ["entertainment/music"]
    log = store.audit("u")[-3:]
    assert log[0].op == "opt_out" and log[0].after == {"prefix": "entertainment/music"}
    assert log[0].cause == "user opted out of entertainment/music"
    assert {(a.op, a.preference_id) for a in log[1:]} == {("delete", jazz.id), ("delete", fm4.id)}
    assert all(a.before is None and a.cause == "erased" and "entertainment/music" in a.why for a in log[1:])
    assert {a.category for a in log[1:]} == {str(MUSIC), str(RADIO)}
    assert "jazz" not in store.export("u").model_dump_json() and "fm4" not in store.export("u").model_dump_json()

    # later writes into the opted-out category are refused, and nothing of them is written
    n_audit = len(store.audit("u"))
    with pytest.raises(OptedOutError) as err:
        add(store, "u", RADIO, "fm5")
    assert err.value.rule == "entertainment/music" and err.value.path == str(RADIO)
    with store.transaction("u") as tx:  # a caller may catch it and carry on with allowed writes
        with pytest.raises(OptedOutError):
            tx.insert(MUSIC, "rock", "", e(1), "c9", "x")
        with pytest.raises(OptedOutError):
            tx.insert(CategoryPath(main="entertainment", sub="music", detail="new"), "x", "", e(1), "c9", "x")
        tx.insert(FOOD, "pizza", "", e(4), "c9", "x")
    assert [p.attribute for p in store.preferences("u")] == ["news", "pizza"]
    assert [a.op for a in store.audit("u")[n_audit:]] == ["insert"]
    # other users are unaffected
    assert store.preferences("v") == [other] and store.opt_outs("v") == []
    add(store, "v", RADIO, "fm4")


@pytest.mark.parametrize("spelling", ["entertainment/music/", "/entertainment/music", " entertainment/music "])
def test_an_opt_out_has_one_spelling_for_purge_write_check_and_search(store, spelling):
    """A trailing slash once purged (path matching) but did not hide (string matching in search)."""
    jazz = add(store, "u", MUSIC, "jazz", vec=e(0))
    news = add(store, "u", PODCAST, "news", vec=e(3))
    assert [p.id for p in store.opt_out("u", spelling, cause="out")] == [jazz.id]
    assert store.opt_outs("u") == ["entertainment/music"]
    assert [p.id for p, _ in store.search("u", e(0) + e(3), k=10)] == [news.id]
    with pytest.raises(OptedOutError):
        add(store, "u", RADIO, "fm4")
    assert store.opt_in("u", spelling, cause="back in") is True and store.opt_outs("u") == []
    add(store, "u", RADIO, "fm4")


@pytest.mark.parametrize("bad", ["", "/", "a//b", "a/b/c/d"])
def test_an_opt_out_that_names_no_category_is_refused_and_changes_nothing(store, bad):
    add(store, "u", MUSIC, "jazz")
    n = len(store.audit("u"))
    with pytest.raises(InputError, match="names one category"):
        store.opt_out("u", bad, cause="x")
    assert store.opt_outs("u") == [] and len(store.audit("u")) == n and len(store.preferences("u")) == 1


def test_opt_in_allows_writes_again(store):
    store.opt_out("u", "entertainment/music", cause="out")
    assert store.opt_in("u", "entertainment/music", cause="back in") is True
    assert store.opt_in("u", "entertainment/music", cause="again") is False
    assert store.opt_outs("u") == []
    add(store, "u", MUSIC, "jazz")
    ops = [(a.op, a.cause) for a in store.audit("u")]
    assert ops == [("opt_out", "out"), ("opt_in", "back in"), ("insert", "test insert")]


# --- isolation -----------------------------------------------------------------------------
def test_users_are_isolated(store):
    a = add(store, "alice", MUSIC, "jazz", vec=e(0))
    b = add(store, "bob", MUSIC, "jazz", vec=e(0))
    b2 = add(store, "bob", RADIO, "fm4", vec=e(1))

    assert store.preferences("alice") == [a]
    assert [p.id for p, _ in store.search("alice", e(0) + e(1), k=10)] == [a.id]
    assert store.vectors("alice")[0] == [a]
    for pid in (b.id, b2.id):
        with pytest.raises(NotFoundError):
            store.get("alice", pid)
        with pytest.raises(NotFoundError):
            store.delete("alice", pid, cause="x")
        with pytest.raises(NotFoundError):
            with store.transaction("alice") as tx:
                tx.replace(pid, "rock", "", e(2), None, "x")
    assert store.get("bob", b.id) == b and store.preferences("bob") == [b, b2]
    assert [x.op for x in store.audit("alice")] == ["insert"]
    assert all(x.user == "bob" for x in store.audit("bob"))

    with store.transaction("alice") as tx:
        assert tx.preferences(MUSIC) == [a]  # bob's jazz at the same path is not visible

    store.opt_out("alice", "entertainment", cause="x")
    assert store.preferences("bob") == [b, b2] and store.opt_outs("bob") == []
    store.forget("alice", cause="x")
    assert store.preferences("bob") == [b, b2]
    assert [x.op for x in store.audit("bob")] == ["insert", "insert"] and store.audit("bob")[0].after["attribute"] == "jazz"
    assert store.users() == ["bob"]  # alice was forgotten: her id is gone (pseudonymised)


# --- export and forget -----------------------------------------------------------------------
def test_export_contains_preferences_opt_outs_and_audit(store):
    p = add(store, "u", MUSIC, "jazz")
    store.opt_out("u", "poi", cause="no places")
    add(store, "v", MUSIC, "rock")
    ex = store.export("u")
    assert isinstance(ex, UserExport) and ex.user == "u"
    assert ex.preferences == [p]
    assert ex.opt_outs == ["poi"]
    assert [a.op for a in ex.audit] == ["insert", "opt_out"]
    assert ex.audit == store.audit("u")
    assert "rock" not in ex.model_dump_json()
    # the export round-trips through JSON (what the CLI and the HTTP service hand out)
    assert UserExport.model_validate_json(ex.model_dump_json()) == ex


def test_forget_erases_content_and_records_the_erasure(store):
    secret = ["Zanzibar-jazz", "KRZ-radio", "I adore Zanzibar-jazz", "c-secret"]
    p = add(store, "u", MUSIC, "Zanzibar-jazz", conv="c-secret", cause="insert from conversation c-secret")
    with store.transaction("u") as tx:
        tx.replace(p.id, "KRZ-radio", "KRZ-radio please", e(1), "c-secret", "update: KRZ-radio")
        tx.note("pass", "pass: Zanzibar-jazz again", p.id, {"sentence": "I adore Zanzibar-jazz"})
    store.opt_out("u", "poi/restaurant", cause="user opted out of poi/restaurant")
    keep = add(store, "other", MUSIC, "Zanzibar-jazz")

    n = store.forget("u", cause="user asked to be forgotten")
    assert n == 1
    assert store.preferences("u") == [] and store.vectors("u")[0] == []
    assert store.opt_outs("u") == ["poi/restaurant"]  # consent outlives forget
    ex = store.export("u")
    dumped = ex.model_dump_json()
    for s in secret:
        assert s not in dumped, s
    assert ex.audit == [] == store.audit("u")   # the forgotten chain is closed: nothing of it is shown by the id
    log = closed_chain(store, "u")
    assert log[-1].op == "forget" and log[-1].cause == "user asked to be forgotten"
    assert log[-1].after == {"preferences_erased": 1, "episodes_erased": 0}
    # the history's shape survives (what happened, when), not its content
    assert [a.op for a in log[:-1]] == ["insert", "update", "pass", "opt_out"]
    assert all(a.before is None and a.after is None and a.cause == "erased" for a in log[:-1])
    assert [a.category for a in log[:-1]] == [str(MUSIC), str(MUSIC), str(MUSIC), "poi/restaurant"]
    assert [a.seq for a in log] == [1, 2, 3, 4, 5]
    assert store.verify_audit("u").ok and store.verify_audit("u").entries == 5 and store.verify_audit().ok
    assert not store.has_user("u") and "u" not in store.users()
    # the other user keeps everything
    assert store.preferences("other") == [keep]
    assert "Zanzibar-jazz" in json.dumps(store.export("other").model_dump(mode="json"))
    # the id may be used again (a new user, or the same one starting over): a new chain, from seq 1
    add(store, "u", MUSIC, "jazz")
    assert [p.attribute for p in store.preferences("u")] == ["jazz"]
    assert store.has_user("u") and [(a.seq, a.op) for a in store.audit("u")] == [(1, "insert")]
    assert store.verify_audit("u").ok and store.verify_audit("u").entries == 6


def test_a_recycled_user_id_never_sees_the_forgotten_users_audit_trail(store):
    """the chain was keyed by the id's pseudonym alone, so a new "e1" exported the old e1's entries."""
    add(store, "e1", MUSIC, "Zanzibar-jazz")
    store.opt_out("e1", "entertainment/podcast", cause="opt-out")
    store.forget("e1", cause="forget")
    assert store.export("e1").audit == []   # before the new user writes anything
    add(store, "e1", FOOD, "pizza")
    ex = store.export("e1")
    assert [(a.seq, a.op, a.category) for a in ex.audit] == [(1, "insert", str(FOOD))]
    assert str(MUSIC) not in ex.model_dump_json() and ex.opt_outs == ["entertainment/podcast"]   # consent stays
    store.forget("e1", cause="forget again")   # and a third e1 starts from nothing too
    add(store, "e1", MUSIC, "rock")
    assert [(a.seq, a.op) for a in store.audit("e1")] == [(1, "insert")]
    check = store.verify_audit("e1")
    assert check.ok and check.entries == 3 + 2 + 1 and check.users == 1
    assert store.verify_audit().ok and store.verify_audit().users == 3   # three chains, three people


def test_forget_unknown_user_records_erasure_of_nothing(store):
    assert store.forget("ghost", cause="x") == 0
    assert [(a.op, a.after) for a in closed_chain(store, "ghost")] == [("forget", {"preferences_erased": 0, "episodes_erased": 0})]
    assert store.audit("ghost") == [] and store.verify_audit("ghost").entries == 1


# --- durability across store objects and serialisation -------------------------------------
def test_data_is_visible_to_another_store_object_on_the_same_database(store_factory):
    s1, s2 = store_factory(), store_factory()
    p = add(s1, "u", MUSIC, "jazz")
    assert s2.preferences("u") == [p]
    s2.opt_out("u", "entertainment", cause="x")
    with pytest.raises(OptedOutError):
        add(s1, "u", MUSIC, "rock")


def test_transactions_of_one_user_are_serialised(store):
    """A second writer of the same user waits until the first commits, then sees its rows."""
    holding, release = threading.Event(), threading.Event()
    seen: list = []
    entered = threading.Event()

    def first():
        with store.transaction("u") as tx:
            tx.insert(MUSIC, "jazz", "", e(0), None, "first")
            holding.set()
            release.wait(10)

    def second():
        holding.wait(10)
        with store.transaction("u") as tx:
            entered.set()
            seen.extend(p.attribute for p in tx.preferences(MUSIC))
            tx.insert(MUSIC, "rock", "", e(1), None, "second")

    t1, t2 = threading.Thread(target=first), threading.Thread(target=second)
    t1.start(), t2.start()
    assert holding.wait(10)
    assert not entered.wait(0.5), "second transaction of the same user ran while the first was open"
    release.set()
    t1.join(10), t2.join(10)
    assert entered.is_set() and seen == ["jazz"]
    assert [p.attribute for p in store.preferences("u")] == ["jazz", "rock"]


def test_connections_of_ended_threads_are_released(store):
    """Thread pools recycle threads; each new thread must not leave another open connection behind."""
    for n in range(6):
        t = threading.Thread(target=add, args=(store, f"t{n}", MUSIC, "jazz"))
        t.start()
        t.join()
    add(store, "main", MUSIC, "jazz")
    # SQLite: one connection per live thread; PostgreSQL: a pool that never grows past what one thread at a time needs
    held = store.connections() if hasattr(store, "connections") else len(store._all)
    assert held <= 2  # the calling thread's, and at most the last ended thread's
    assert store.users() == ["main"] + [f"t{n}" for n in range(6)]


# --- polarity and observations ---------------------------------------------------
def raw_sql(store, statements):
    """Run statements on the store's database behind its back (to build a file from an older version)."""
    if hasattr(store, "path"):
        import sqlite3

        con = sqlite3.connect(store.path)
        for s in statements:
            con.execute(s)
        con.commit()
        con.close()
    else:
        import psycopg

        with psycopg.connect(store.url, autocommit=True) as con:
            for s in statements:
                con.execute(s.replace("?", "%s"))


def test_polarity_is_stored_round_tripped_and_in_audit_images_and_exports(store):
    with store.transaction("u") as tx:
        p = tx.insert(MUSIC, "Jazz", "I can't stand jazz.", e(0), "c1", "insert", polarity="dislike")
    assert p.polarity == "dislike" and p.attribute == "Jazz"
    assert store.get("u", p.id).polarity == "dislike" and store.preferences("u")[0].polarity == "dislike"
    assert store.vectors("u")[0][0].polarity == "dislike" and store.search("u", e(0), 1)[0][0].polarity == "dislike"
    with store.transaction("u") as tx:
        q = tx.replace(p.id, "Jazz", "Jazz is great again.", e(0), "c2", "update", polarity="like")
    assert q.polarity == "like" and store.get("u", p.id).polarity == "like"
    ins, upd = store.audit("u")
    assert ins.after["polarity"] == "dislike" and upd.before["polarity"] == "dislike" and upd.after["polarity"] == "like"
    assert store.export("u").preferences[0].polarity == "like"
    with store.transaction("u") as tx:  # the default is a like
        assert tx.insert(RADIO, "BBC", "BBC radio always.", e(1), "c3", "insert").polarity == "like"
    assert store.verify_audit("u").ok


def test_a_store_from_before_polarity_is_migrated_and_not_x_becomes_a_dislike(store_factory):
    s = store_factory()
    add(s, "u", MUSIC, "Jazz")
    add(s, "u", FOOD, "not Italian")
    add(s, "u", RADIO, "Nothing But Thieves")  # "not " only as a whole word at the start
    s.close()
    raw_sql(s, ["ALTER TABLE preferences DROP COLUMN polarity"])
    s2 = store_factory()
    got = {p.path: (p.attribute, p.polarity) for p in s2.preferences("u")}
    assert got == {MUSIC: ("Jazz", "like"), FOOD: ("Italian", "dislike"), RADIO: ("Nothing But Thieves", "like")}
    s2.close()
    s3 = store_factory()  # opening again changes nothing (the migration runs once)
    assert {p.path: (p.attribute, p.polarity) for p in s3.preferences("u")} == got


def observe(store, user, path, attribute, conv, polarity="like"):
    with store.transaction(user) as tx:
        return tx.observe(path, attribute, polarity, f"play some {attribute}", conv, f"observed in {conv}")


def test_observations_are_recorded_listed_counted_and_audited(store):
    o1 = observe(store, "u", MUSIC, "Jazz", "c1")
    observe(store, "u", MUSIC, "jazz ", "c1")      # the same conversation again: still one conversation
    observe(store, "u", MUSIC, "JAZZ!", "c2")
    observe(store, "u", MUSIC, "Jazz", "c3", polarity="dislike")
    observe(store, "u", RADIO, "Jazz FM", "c4")
    observe(store, "other", MUSIC, "Jazz", "c9")
    assert (o1.user, o1.path, o1.attribute, o1.polarity, o1.conversation_id) == ("u", MUSIC, "Jazz", "like", "c1")
    assert len(store.observations("u")) == 5 and len(store.observations("other")) == 1
    assert [o.attribute for o in store.observations("u", "entertainment/music/station")] == ["Jazz FM"]
    with store.transaction("u") as tx:
        assert tx.observation(o1.id) == o1
        assert len(tx.observations(MUSIC)) == 4
        assert tx.count_conversations(MUSIC, "jazz", "like") == 2
        assert tx.count_conversations(MUSIC, "Jazz", "dislike") == 1
        assert tx.count_conversations(MUSIC, "Rock", "like") == 0
        with pytest.raises(NotFoundError):
            tx.observation("nope")
    assert store.preferences("u") == [] and store.search("u", e(0), 5) == []  # never a preference, never recalled
    log = store.audit("u")
    assert [a.op for a in log] == ["observe"] * 5 and log[0].after["attribute"] == "Jazz" and log[0].preference_id == o1.id
    exported = store.export("u")
    assert len(exported.observations) == 5 and "other" not in {o.user for o in exported.observations}
    assert store.verify_audit("u").ok


def test_an_observation_in_an_opted_out_category_is_refused(store):
    store.opt_out("u", "entertainment/music", cause="user opted out")
    with pytest.raises(OptedOutError):
        observe(store, "u", MUSIC, "Jazz", "c1")
    assert store.observations("u") == []


def test_dismiss_erases_the_observation_and_its_audit_payload(store):
    o = observe(store, "u", MUSIC, "Zanzibar Jazz", "conv-zz")
    keep = observe(store, "u", MUSIC, "Rock", "c2")
    gone = store.dismiss("u", o.id, cause="dismissed by user")
    assert gone == o and store.observations("u") == [keep]
    with pytest.raises(NotFoundError):
        store.dismiss("u", o.id, cause="again")
    log = store.audit("u")
    assert [a.op for a in log] == ["observe", "observe", "dismiss"]
    assert log[2].why == "dismissed by the user" and log[2].cause == "erased" and log[2].before is None
    assert log[0].after is None and log[0].cause == "erased" and log[0].content_hash
    dumped = store.export("u").model_dump_json()
    assert "Zanzibar" not in dumped and "conv-zz" not in dumped and "Rock" in dumped
    assert store.verify_audit("u").ok


def test_opt_out_forget_and_expiry_erase_observations(store):
    from datetime import timedelta

    from boundmem.models import utcnow

    observe(store, "u", MUSIC, "Zanzibar", "c1")
    observe(store, "u", FOOD, "Thai", "c2")
    store.opt_out("u", "entertainment", cause="user opted out")
    assert [o.attribute for o in store.observations("u")] == ["Thai"]
    assert "Zanzibar" not in store.export("u").model_dump_json()
    with store.transaction("u") as tx:
        assert tx.expire_observations(utcnow() - timedelta(days=1), "expiry", "expired") == []
        assert [o.attribute for o in tx.expire_observations(utcnow() + timedelta(seconds=1), "expiry", "expired")] == ["Thai"]
    assert store.observations("u") == [] and "Thai" not in store.export("u").model_dump_json()
    observe(store, "u", FOOD, "Korean", "c3")
    store.forget("u", cause="forget")
    assert store.observations("u") == []
    assert store.verify_audit().ok


def test_schema_record_first_writer_wins_unless_replaced(store_factory):
    a, b = store_factory(), store_factory()
    assert a.schema_record() is None
    assert a.record_schema('{"name": "one"}') == '{"name": "one"}'
    assert b.record_schema('{"name": "two"}') == '{"name": "one"}'   # the other "process" sees the first record
    assert b.record_schema('{"name": "two"}', replace=True) == '{"name": "two"}' and a.schema_record() == '{"name": "two"}'
