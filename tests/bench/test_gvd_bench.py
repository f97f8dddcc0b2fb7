"""`boundmem bench gvd`: the loader, the scoring rules (checked against hand-computed values) and a small harness run."""
from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from boundmem_bench.gvd_data import GVDDataError, load_gvd
from boundmem_bench.gvd_metrics import keyword_score, score_answer, score_retrieval
from boundmem.caim.base import MemoryItem, RetrievalResult
from boundmem_bench.gvd_data import GoldAnnotation


# --- loader -------------------------------------------------------------------------------------------------
def test_loader_strips_user_names_and_quotes(shared_data):
    data = load_gvd(shared_data / "gvd")
    assert {"Jason", "Linda", "Ivy", "Roland"} <= set(data.users)
    assert all(u == u.strip() for u in data.users)
    assert len(data.users) == 15 and len(data.questions) == 100
    assert sum(q.gold is not None for q in data.questions) == 70
    jason = data.users["Jason"]
    assert [len(s.turns) for s in jason.sessions] == [5, 5, 5, 4, 4, 4, 4, 4, 4, 4]
    assert jason.sessions[0].day == date(2023, 4, 27) and jason.sessions[0].turns[2].id == "2023-04-27#2"
    frank = {q.qid: q for q in data.questions_for("Frank")}
    assert frank["Frank_3"].question == "What type of music do I like to listen to?"  # literal quotes removed
    assert data.session_date == date(2023, 5, 7)
    henry0 = next(q for q in data.questions if q.qid == "Henry_0")
    assert henry0.gold.polarity == "no"
    assert next(q for q in data.questions if q.qid == "John Zhang_4").gold.answerable is False


def _write(tmp: Path, gold_lines: list[str]) -> Path:
    (tmp / "memory_bank_en.json").write_text(json.dumps({" Ann ": {"name": "Ann", "history": {
        "2023-04-27": [{"query": "I like tea.", "response": "Nice."}, {"query": "I read Dune.", "response": "Good."}],
        "2023-04-28": [{"query": "I ran 5 km.", "response": "Well done."}]}}}))
    (tmp / "probing_questions_en.jsonl").write_text(json.dumps({"Ann": ['"What book did I read?"', "How far did I run?"]}))
    (tmp / "gold_en.jsonl").write_text("\n".join(gold_lines) + "\n")
    return tmp


GOOD = json.dumps({"user": "Ann", "qid": "Ann_0", "question": "What book did I read?", "evidence": ["2023-04-27#1"],
                   "answer": "Dune.", "keywords": [["Dune"]], "answerable": True})


def test_loader_reads_a_small_valid_set(tmp_path):
    data = load_gvd(_write(tmp_path, [GOOD]))
    assert list(data.users) == ["Ann"]
    q0, q1 = data.questions
    assert q0.gold.evidence == ("2023-04-27#1",) and q0.gold.keywords == (("Dune",),)
    assert q1.gold is None
    assert data.session_date == date(2023, 4, 29)


@pytest.mark.parametrize("bad,needle", [
    (json.dumps({"user": "Ann", "qid": "Ann_1", "question": "How far did I run?", "evidence": ["2023-04-28#0"],
                 "answer": "5 km", "answerable": True}), "line 2: field 'keywords' missing"),
    ('{"user": "Ann", "qid": ', "line 2: invalid JSON"),
    (json.dumps({"user": "Ann", "qid": "Ann_1", "question": "How far did I run?", "evidence": ["2023-04-28#3"],
                 "answer": "5 km", "keywords": [["5"]], "answerable": True}), "line 2: field 'evidence': turn '2023-04-28#3'"),
    (json.dumps({"user": "Ann", "qid": "Ann_1", "question": "How far did I swim?", "evidence": ["2023-04-28#0"],
                 "answer": "5 km", "keywords": [["5"]], "answerable": True}), "line 2: field 'question' does not match"),
    (json.dumps({"user": "Ann", "qid": "Ann_7", "question": "x", "evidence": [], "answer": "", "keywords": [],
                 "answerable": False}), "line 2: field 'qid'"),
    (json.dumps({"user": "Ann", "qid": "Ann_1", "question": "How far did I run?", "evidence": ["2023-04-28#0"],
                 "answer": "Yes", "keywords": [[]], "answerable": True}), "line 2: field 'keywords' must be"),
])
def test_malformed_gold_line_fails_clearly(tmp_path, bad, needle):
    d = _write(tmp_path, [GOOD, bad])
    with pytest.raises(GVDDataError) as e:
        load_gvd(d)
    assert "gold_en.jsonl" in str(e.value) and needle in str(e.value)


def test_malformed_history_names_the_field(tmp_path):
    d = _write(tmp_path, [GOOD])
    (d / "memory_bank_en.json").write_text(json.dumps({"Ann": {"history": {"2023-04-27": [{"response": "x"}]}}}))
    with pytest.raises(GVDDataError, match=r"memory_bank_en.json: user 'Ann': history\['2023-04-27'\]\[0\]: field 'query'"):
        load_gvd(d)


# --- metrics ------------------------------------------------------------------------------------------------
def _gold(evidence=("2023-04-28#1", "2023-04-30#2"), keywords=(("x",),), answer="x", note="", answerable=True):
    return GoldAnnotation(evidence=evidence, answer=answer, keywords=keywords, answerable=answerable, note=note)


def _item(i, sources=(), tags=(), day=None):
    return MemoryItem(id=str(i), text="t", source_turn_ids=sources, tags=tags, timestamp=day)


def test_retrieval_metrics_by_hand():
    gold = _gold()
    items = [_item(1, ("2023-04-29#0",)),
             _item(2, (), ("summary",), date(2023, 4, 30)),  # summary of a gold date covers 2023-04-30#2
             _item(3, ("2023-04-27#0", "2023-04-28#1")),
             _item(4, ("2023-04-30#2",))]
    s = score_retrieval(RetrievalResult(retrieved=True, items=items), gold, k=5)
    assert s.hit == [0, 1, 1, 1, 1]
    assert s.recall == [0, 0.5, 1, 1, 1]
    assert s.mrr == 0.5 and s.first_rank == 2
    s3 = score_retrieval(RetrievalResult(retrieved=True, items=[items[0], items[3]]), gold, k=3)
    assert s3.hit == [0, 1, 1] and s3.recall == [0, 0.5, 0.5] and s3.mrr == 0.5
    # a summary of a non-gold date is not a hit; a controller "no retrieval" is a miss even with items
    assert score_retrieval(RetrievalResult(retrieved=True, items=[_item(5, (), ("summary",), date(2023, 5, 1))]),
                           gold, k=1).hit == [0]
    miss = score_retrieval(RetrievalResult(retrieved=False, items=items), gold, k=2)
    assert miss.hit == [0, 0] and miss.mrr == 0 and miss.first_rank is None


def test_keyword_groups_by_hand():
    groups = [["da Vinci", "Leonardo"], ["Michelangelo"], ["Raphael"]]
    assert keyword_score("Leonardo, MICHELANGELO and raphael.", groups) == 1.0
    assert keyword_score("Leonardo and Raphael", groups) == 0.5
    assert keyword_score("Monet", groups) == 0.0
    assert keyword_score("You’re into Da  Vinci", [["you're into da vinci"]]) == 1.0  # quotes and spaces normalised


def test_polarity_and_abstention_by_hand():
    gold = _gold(keywords=(("enjoy",),), answer="No. You said you enjoy badminton.", note="POLARITY: premise false")
    assert score_answer("No, you enjoy badminton.", gold) == (1.0, True)
    assert score_answer("Yes, you enjoy badminton... no wait.", gold) == (0.0, False)
    assert score_answer("You enjoy badminton.", gold) == (0.0, False)  # no polarity word
    assert score_answer("No, I don't think so.", gold) == (0.0, True)  # right polarity, no keyword
    plain = _gold(keywords=(("tripe",),), answer="No, it was tripe.", note="False-premise question")
    assert score_answer("You made spicy pork tripe.", plain) == (1.0, None)  # only POLARITY notes need yes/no
    unans = _gold(evidence=(), keywords=(), answer="Unknown", answerable=False)
    assert score_answer("I don't remember that.", unans) == (1.0, None)
    assert score_answer("You made Hui Guo Rou.", unans) == (0.0, None)


# --- harness ------------------------------------------------------------------------------------------------
def test_harness_writes_report_for_two_users(shared_data, tmp_path, hash_embedder):
    from boundmem_bench.gvd import NO_LLM_MODE, run_gvd

    out = tmp_path / "out"
    res = run_gvd(shared_data / "gvd", None, out, ["memorybank", "memorybank-forget", "tim"], k=3,
                  embedder=hash_embedder, users=["Emily", "Henry"], show_progress=False)
    assert (out / "report.md").exists() and (out / "gvd_hit_at_k.png").stat().st_size > 1000
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["answer_mode"] == NO_LLM_MODE
    rows = results["questions"]["memorybank"]
    assert len(rows) == 14 and {r["user"] for r in rows} == {"Emily", "Henry"}
    for r in rows:  # extractive mode: the answer is the top memory's text
        assert r["answer"].startswith(r["items"][0]["text"])  # results.json clips item texts to 400 chars
        assert len(r["hit_at"]) == 3 and r["hit_at"] == sorted(r["hit_at"])
    summ = {s["system"]: s for s in res["summary"]}
    assert summ["memorybank"]["retrieval_questions"] == 14
    assert summ["memorybank"]["raw_chars"] == sum(len(t.query) + len(t.response)
                                                  for u in ("Emily", "Henry")
                                                  for s in load_gvd(shared_data / "gvd").users[u].sessions
                                                  for t in s.turns)
    assert summ["memorybank-forget"]["storage_items"] < summ["memorybank"]["storage_items"]
    report = (out / "report.md").read_text()
    for needle in ("extractive answer (no LLM)", "| memorybank |", "| tim |", "hit@3", "Memory storage", "Henry_0"):
        assert needle in report


def test_cli_rejects_unknown_system(shared_data, tmp_path):
    from typer.testing import CliRunner

    from boundmem_bench.cli import app

    r = CliRunner().invoke(app, ["gvd", "--data", str(shared_data / "gvd"), "--out", str(tmp_path),
                                 "--systems", "memorybank,nope", "--embedder", "hash", "--quiet"])
    assert r.exit_code == 2 and "nope" in r.output


def test_llm_answer_path_is_scored_with_polarity(shared_data):
    """The answer prompt goes through the real client to a scripted server; its reply is what gets scored."""
    from boundmem_bench.gvd_eval import evaluate_question
    from boundmem_bench.baselines import MemoryBank
    from boundmem.llm.client import LLMClient
    from boundmem.embed import HashEmbedder
    from llm.fake_openai import FakeOpenAI, content

    data = load_gvd(shared_data / "gvd")
    henry0 = next(q for q in data.questions if q.qid == "Henry_0")
    mb = MemoryBank(HashEmbedder())  # no LLM for the memory itself: only the answer goes to the server
    for s in data.users["Henry"].sessions:
        mb.add_session("Henry", s.day, list(s.turns))
    with FakeOpenAI([content("No, you said you enjoy badminton and running."), content("Yes, you don't.")]) as srv:
        llm = LLMClient(model="m", base_url=srv.base_url, api_key="k", timeout=2.0, max_retries=0)
        good = evaluate_question(mb, llm, henry0, data.session_date, 3)
        bad = evaluate_question(mb, llm, henry0, data.session_date, 3)
        prompt = srv.requests[0].text()
    assert henry0.question in prompt and "Today is 2023-05-07" in prompt
    assert good["items"][0]["text"][:60] in prompt  # the retrieved memories are in the prompt
    assert (good["correctness"], good["polarity_ok"]) == (1.0, True)
    assert (bad["correctness"], bad["polarity_ok"]) == (0.0, False)


def test_harness_runs_caim_and_its_ablations(shared_data, tmp_path, hash_embedder):
    from boundmem_bench.gvd import run_gvd

    names = ["caim", "caim-nocontroller", "caim-nofilter", "caim-nosources"]
    res = run_gvd(shared_data / "gvd", None, tmp_path, names, k=5, embedder=hash_embedder, users=["Emily"],
                  show_progress=False, strict=True)
    summ = {s["system"]: s for s in res["summary"]}
    assert set(summ) == set(names) and res["skipped"] == {}
    assert summ["caim-nocontroller"]["retrieval_rate"] == 1.0  # without a controller every question retrieves
    # the same thoughts; the kept source turns are counted in the storage figure
    assert summ["caim"]["storage_items"] == summ["caim-nosources"]["storage_items"] > 0
    assert summ["caim-nosources"]["storage_chars"] < summ["caim"]["raw_chars"] < summ["caim"]["storage_chars"]
    rows = json.loads((tmp_path / "results.json").read_text())["questions"]["caim"]
    assert all(r["answer"] == (r["items"][0]["text"] if r["retrieved"] and r["items"] else "I don't remember that.")
               for r in rows if len(r["items"][0]["text"] if r["items"] else "") < 400)


# --- cross-validation and the requests sub-report ---------------------------------------------------------------
def test_cv_splitter_never_tunes_on_a_folds_test_users():
    from boundmem_bench.gvd_cv import leave_users_out_folds

    users = [f"u{i}" for i in range(10)]
    folds = leave_users_out_folds(users, 5, seed=3)
    assert len(folds) == 5
    assert sorted(u for _, test in folds for u in test) == sorted(users)  # each user tested exactly once
    for train, test in folds:
        assert len(test) == 2 and not set(train) & set(test) and set(train) | set(test) == set(users)
    assert folds == leave_users_out_folds(list(reversed(users)), 5, seed=3)  # deterministic
    with pytest.raises(ValueError):
        leave_users_out_folds(users, 11)


def test_cv_choice_uses_only_training_users(monkeypatch):
    """_choose sees the training users' questions only: a setting perfect on the test user alone is not picked."""
    import numpy as np

    from boundmem_bench import gvd_cv

    t = gvd_cv._Table(settings=[{"s": 0}, {"s": 1}], hit=np.array([[1, 1, 0], [0, 0, 1]], float),
                      rr=np.array([[1, 1, 0], [0, 0, 1]], float), n_items=np.ones((2, 3)), nears=[0.3],
                      decide=np.ones((1, 3)), neg_rate={"a": np.zeros(1), "b": np.zeros(1), "c": np.zeros(1)},
                      users=["a", "b", "c"])
    s, _, _ = gvd_cv._choose(t, ["a", "b"])
    assert s == 0 and gvd_cv._eval(t, s, 0, ["c"])["hit"] == 0.0
    res = gvd_cv._cv(t, [(["a", "b"], ["c"]), (["b", "c"], ["a"]), (["a", "c"], ["b"])])
    assert [f["test_hit"] for f in res["folds"]] == [0.0, 1.0, 1.0]


def test_cv_table_equals_the_real_retrieve_path(shared_data, hash_embedder):
    """A setting's per-question hits in the CV table are what CAIM.retrieve with that setting scores in the bench."""
    from boundmem_bench import gvd_cv
    from boundmem_bench.gvd_eval import evaluate_question
    from boundmem.caim.retrieval import RetrievalParams
    from boundmem.caim.system import CAIM

    data = load_gvd(shared_data / "gvd")
    users = ["Emily", "Henry"]
    qs = [q for q in data.questions if q.user in users and q.gold is not None and q.gold.evidence]
    grid = gvd_cv.Grid(tag_margin=(0.12,), pool=(0, 10), tag_bonus=(0.0, 0.1), date_bonus=(0.2,), cutoff=(-1.0, 0.1),
                       near=(0.3,))
    v = gvd_cv._ingest(lambda **kw: CAIM(embedder=hash_embedder, **kw), "m", 0.12, data, users, qs, data.session_date)
    t = gvd_cv._table([v], grid, 5, qs)
    for row, st in enumerate(t.settings):
        p = RetrievalParams(pool=st["pool"], tag_bonus=st["tag_bonus"], date_bonus=st["date_bonus"],
                            cutoff=st["cutoff"], near=0.3, source_weight=st["source_weight"],
                            summary_weight=st["summary_weight"])
        real = CAIM(embedder=hash_embedder, params=p)
        for u in users:
            for s in data.users[u].sessions:
                real.add_session(u, s.day, list(s.turns))
        got = [evaluate_question(real, None, q, data.session_date, 5) for q in qs]
        assert [g["hit_at"][-1] for g in got] == list(t.hit[row] * t.decide[0])
        assert [g["mrr"] for g in got] == pytest.approx(list(t.rr[row] * t.decide[0]))


def test_cli_cv_and_requests_report(shared_data, tmp_path, hash_embedder, monkeypatch):
    from boundmem_bench import gvd_cv
    from boundmem_bench.gvd import run_gvd

    monkeypatch.setattr(gvd_cv, "Grid", _small_grid)
    req = Path(__file__).resolve().parents[1] / "caim" / "data" / "pref_requests.jsonl"
    res = run_gvd(shared_data / "gvd", None, tmp_path, ["caim", "memorybank"], k=5, embedder=hash_embedder,
                  users=["Emily", "Henry", "Ivy"], show_progress=False, cv=True, cv_folds=3, requests=req)
    cv = res["cv"]
    assert len(cv["folds"]) == 3 and set(cv["users"]) >= {"Emily", "Henry", "Ivy"}
    for f in cv["caim"]["folds"]:
        assert not set(f["train"]) & set(f["test"])
    assert set(cv["ablations"]) >= {"controller off", "tags off", "dates off", "relevance filter off",
                                    "post-thinking off (raw turns)"}
    r = res["requests"]
    assert r["cases"] == 30 and r["memorybank_hit"] > 0.5
    report = (tmp_path / "report.md").read_text()
    for needle in ("Leave-users-out cross-validation", "Ablations under the same cross-validation",
                   "Preference-dependent requests"):
        assert needle in report


from boundmem_bench.gvd_cv import Grid as RealGrid  # noqa: E402  (the test above replaces gvd_cv.Grid)


def _small_grid(**kw):
    base = dict(tag_margin=(0.12,), pool=(0,), tag_bonus=(0.0, 0.1), date_bonus=(0.0, 0.2), cutoff=(-1.0, 0.1),
                near=(0.3,))
    base.update(kw)
    return RealGrid(**base)


def test_controller_retrieves_for_preference_requests(hash_embedder):
    """Each request of the 30-case fixture (food, travel, music, shopping, fitness) is asked by a fresh user who said
    the statement among distractors: the controller must retrieve, and the statement must be in the top 5."""
    from boundmem_bench.gvd_requests import run_requests

    req = Path(__file__).resolve().parents[1] / "caim" / "data" / "pref_requests.jsonl"
    r = run_requests(req, hash_embedder, k=5)
    assert r["cases"] == 30 and {b.split()[1] for b in r["by"] if b.startswith("domain")} == {
        "food", "travel", "music", "shopping", "fitness"}
    assert r["retrieval_rate"] >= 0.9, [x["request"] for x in r["rows"] if not x["caim_retrieved"]]
    assert r["caim_hit"] >= 0.9


def test_controller_retrieves_for_the_challenge_travel_requests(hash_embedder):
    """The travel challenge set (written by someone else), when present: the controller retrieves for >= 90 %."""
    from boundmem_bench.gvd_requests import DEFAULT_FILE, run_requests

    if not DEFAULT_FILE.exists():
        pytest.skip("challenge_data/travel-requests.jsonl not there")
    r = run_requests(DEFAULT_FILE, hash_embedder, k=5)
    assert r["retrieval_rate"] >= 0.9, [x["request"] for x in r["rows"] if not x["caim_retrieved"]]
