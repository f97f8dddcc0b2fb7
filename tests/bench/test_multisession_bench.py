"""`boundmem bench multisession`: the generated set is valid GVD data, its parts share no value or wording, every
gold answer is in its evidence turn, and a dated question's topic really came up on two days."""
from __future__ import annotations

from datetime import date

from boundmem_bench.gvd_data import load_gvd
from boundmem_bench.multisession import DAYS, START, generate, write_part


def _words(part):
    g = generate(part, users=6)
    return g, {q for qs in g["questions"].values() for q in qs}


def test_parts_are_valid_gvd_data_and_every_answer_is_in_its_evidence(tmp_path):
    for part in ("dev", "heldout"):
        data = load_gvd(write_part(tmp_path / part, part, users=6))  # the loader checks every evidence turn exists
        assert len(data.users) == 6 and all(len(u.sessions) == DAYS for u in data.users.values())
        assert data.session_date == date.fromordinal(START.toordinal() + DAYS)
        turns = {(u, t.id): t for u, x in data.users.items() for s in x.sessions for t in s.turns}
        for q in data.questions:
            assert q.gold is not None and q.gold.evidence
            if q.gold.note != "KIND day":
                text = " ".join(turns[(q.user, e)].query + " " + turns[(q.user, e)].response for e in q.gold.evidence)
                assert q.gold.answer in text, (q.qid, q.question)


def test_dev_and_heldout_share_no_user_wording_or_answer():
    dev, dev_q = _words("dev")
    held, held_q = _words("heldout")
    assert not set(dev["history"]) & set(held["history"])
    assert not dev_q & held_q
    assert not {g["answer"] for g in dev["gold"] if g["note"] != "KIND day"} & \
        {g["answer"] for g in held["gold"] if g["note"] != "KIND day"}


def test_a_dated_question_names_one_of_two_days_with_different_answers():
    g = generate("dev", users=6)
    dated = [x for x in g["gold"] if x["note"] == "KIND dated"]
    assert dated
    by_user_topic: dict = {}
    for x in dated:
        by_user_topic.setdefault((x["user"], x["question"].split(" on ")[0].split(" days ago")[0][:12]), []).append(x)
    pairs = [v for v in by_user_topic.values() if len(v) == 2]
    assert pairs
    for a, b in pairs:
        assert a["evidence"][0].split("#")[0] != b["evidence"][0].split("#")[0]
        assert a["answer"] != b["answer"]


def test_generation_is_deterministic():
    assert generate("heldout", users=5) == generate("heldout", users=5)
