"""`boundmem bench gvd --cv`: CAIM's knobs chosen by leave-users-out cross-validation on GVD's gold users.

The 10 users with gold annotations are split into 5 folds of 2 (seeded shuffle). For each fold the knobs are chosen
on the other 8 users' questions only and scored on the fold's 2 users; the report gives the mean and spread over folds
and the pooled held-out figure (every question scored with the knobs chosen without its user), beside the in-sample
figure of the shipped defaults. MemoryBank runs on the same users and folds; it has no knob to tune, so its fold
figures are plain held-out scores under identical conditions (same embedder, same k, same questions).

Knobs (`Grid`): the tagger margin (changes what is stored: one ingest per value), the dense pool size, the tag and
date bonuses, the relevance cutoff (applied only where the controller retrieved for a nearby memory, not for recall
questions or requests) and the controller's near-memory threshold. Scoring a thought by its source turns and ranking
day summaries are components, always on here; their ablations pin them off. The choice rule on the training users:
highest hit@k, then highest MRR, then the most selective among the ties (lowest retrieval rate on `NEGATIVES`, chit-chat
that no stored memory should answer, then fewest items returned), then the lowest near-memory threshold (declining
should be the exception). The cutoff and the near-memory threshold cannot raise hit@k; the tie-breaks set them: the
cutoff as high as it goes without losing a training hit, the threshold as low as it goes without retrieving for more
chit-chat.

The re-ranking for every setting goes through `CAIM.prepare` (once per question) and `CAIM.decide` / `CAIM.rank`
(per setting): the same code `CAIM.retrieve` runs, so a setting's in-sample figure here equals a bench run with it.
One approximation: the controller's near-memory decisions are taken from the first tagger-margin variant's memory
(the margin changes which near-duplicate thoughts merge, so the best cosine can differ in the third decimal).
Ablations are the same procedure with a knob pinned (controller off, no tag bonus, no date bonus, no cutoff) or with
raw turns stored instead of thoughts.
"""
from __future__ import annotations

import itertools
import random
import statistics
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .gvd_data import GVDDataset
from .gvd_metrics import covered_evidence

# chit-chat and general questions no stored memory of a companion user should answer; only a tie-break
NEGATIVES = (
    "What is the capital of Australia?",
    "How many legs does a spider have?",
    "Tell me a joke.",
    "Explain how a rainbow forms.",
    "What's 17 times 23?",
    "Who wrote the theory of relativity?",
    "How far is the moon from the earth?",
    "Translate 'good night' into French.",
    "What does DNA stand for?",
    "Is a tomato a fruit or a vegetable?",
    "How do airplanes stay in the air?",
    "What year did the Second World War end?",
    "Give me a fun fact about octopuses.",
    "What is the boiling point of water in Fahrenheit?",
    "Why is the sky blue?",
    "Spell 'necessary' for me.",
)


@dataclass(frozen=True)
class Grid:
    tag_margin: tuple[float, ...] = (0.06, 0.12, 0.2)
    pool: tuple[int, ...] = (10, 20, 40, 0)
    tag_bonus: tuple[float, ...] = (0.0, 0.03, 0.06, 0.1, 0.15)
    date_bonus: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.3, 0.45)
    cutoff: tuple[float, ...] = (-1.0, 0.1, 0.15, 0.2, 0.25, 0.3)
    near: tuple[float, ...] = (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
    # components, not knobs: always on in the procedure (their ablations set them to 0). As knobs (0 or 1) a fold's
    # 8 training users tied on hit@k and MRR broke the tie towards "off", which then lost held-out hits
    source_weight: tuple[float, ...] = (1.0,)  # 0: a thought is scored by its own text only
    summary_weight: tuple[float, ...] = (1.0,)  # 0: no day-summary units


def leave_users_out_folds(users: Sequence[str], n_folds: int = 5, seed: int = 0) -> list[tuple[list[str], list[str]]]:
    """(train users, test users) per fold; every user is a test user exactly once and never trains its own fold."""
    us = sorted(set(users))
    if n_folds < 2 or n_folds > len(us):
        raise ValueError(f"need 2 <= folds <= users ({len(us)}), got {n_folds}")
    random.Random(seed).shuffle(us)
    tests = [sorted(us[i::n_folds]) for i in range(n_folds)]
    return [([u for u in sorted(us) if u not in t], t) for t in tests]


@dataclass
class _Variant:
    """One ingest of the gold users (tagger margin or raw turns) and everything retrieval needs per question."""

    name: str
    margin: Optional[float]
    caim: Any
    ctxs: list[Any] = field(default_factory=list)  # QueryContext per gold question
    relevant: list[set[str]] = field(default_factory=list)  # thought ids that cover gold evidence
    neg: dict[str, list[Any]] = field(default_factory=dict)  # user -> contexts of NEGATIVES


def _ingest(make_caim: Callable[..., Any], name: str, margin: Optional[float], data: GVDDataset, users: list[str],
            questions: list, today: date, **kw: Any) -> _Variant:
    from boundmem.caim.base import MemoryItem

    caim = make_caim(tag_margin=margin, **kw) if margin is not None else make_caim(**kw)
    for u in users:
        for s in data.users[u].sessions:
            caim.add_session(u, s.day, list(s.turns))
    v = _Variant(name=name, margin=margin, caim=caim)
    for q in questions:
        ctx = caim.prepare(q.user, q.question, today)
        v.ctxs.append(ctx)
        v.relevant.append({t.id for t in ctx.units
                           if covered_evidence(MemoryItem(id=t.id, text=t.text, source_turn_ids=t.source_turn_ids,
                                                          timestamp=t.timestamp), q.gold)})
    for u in users:
        v.neg[u] = [caim.prepare(u, n, today, with_tags=False) for n in NEGATIVES]
    return v


def _score(items, relevant: set[str]) -> tuple[float, float]:
    for j, it in enumerate(items):
        if it.id in relevant:
            return 1.0, 1.0 / (j + 1)
    return 0.0, 0.0


@dataclass
class _Table:
    """Per setting (rows) and question (columns): hit@k and reciprocal rank if retrieved, item count; per near value:
    the controller's decisions on the questions and its retrieval rate on each user's negatives."""

    settings: list[dict]
    hit: np.ndarray
    rr: np.ndarray
    n_items: np.ndarray
    nears: list[float]
    decide: np.ndarray  # (len(nears), Q)
    neg_rate: dict[str, np.ndarray]  # user -> (len(nears),)
    users: list[str]  # per question


def _table(variants: list[_Variant], grid: Grid, k: int, questions: list, controller: bool = True) -> _Table:
    from boundmem.caim.retrieval import RetrievalParams

    settings, hits, rrs, ns = [], [], [], []
    for v in variants:
        for pool, tb, db, cut, sw, mw in itertools.product(grid.pool, grid.tag_bonus, grid.date_bonus, grid.cutoff,
                                                           grid.source_weight, grid.summary_weight):
            p = RetrievalParams(pool=pool, tag_bonus=tb, date_bonus=db, cutoff=cut, near=0.0, source_weight=sw,
                                summary_weight=mw)
            row_h, row_r, row_n = [], [], []
            for ctx, rel in zip(v.ctxs, v.relevant):
                items = v.caim.rank(ctx, k, p)
                h, r = _score(items, rel)
                row_h.append(h), row_r.append(r), row_n.append(len(items))
            settings.append({"variant": v.name, "tag_margin": v.margin, "pool": pool, "tag_bonus": tb,
                             "date_bonus": db, "cutoff": cut, "source_weight": sw, "summary_weight": mw})
            hits.append(row_h), rrs.append(row_r), ns.append(row_n)
    nears: list = list(grid.near) if controller else [None]
    base = variants[0]
    dec = np.ones((len(nears), len(questions)))
    neg = {u: np.ones(len(nears)) for u in base.neg}
    if controller:
        for a, near in enumerate(nears):
            p = RetrievalParams(near=near)
            dec[a] = [1.0 if base.caim.decide(ctx, p)[0] else 0.0 for ctx in base.ctxs]
            for u, ctxs in base.neg.items():
                neg[u][a] = float(np.mean([base.caim.decide(c, p)[0] for c in ctxs]))
    return _Table(settings, np.array(hits), np.array(rrs), np.array(ns, dtype=float), nears, dec, neg,
                  [q.user for q in questions])


def _choose(t: _Table, users: Sequence[str]) -> tuple[int, int, dict]:
    """Best (setting, near) on `users`' questions: hit@k, then MRR, then fewest negatives retrieved, then fewest items."""
    cols = np.array([u in users for u in t.users])
    h = (t.hit[:, None, cols] * t.decide[None, :, cols]).mean(axis=2)  # (S, N)
    r = (t.rr[:, None, cols] * t.decide[None, :, cols]).mean(axis=2)
    neg = np.mean([t.neg_rate[u] for u in users if u in t.neg_rate], axis=0)  # (N,)
    items = (t.n_items[:, None, cols] * t.decide[None, :, cols]).mean(axis=2)
    S, N = h.shape
    neg2 = np.broadcast_to(neg[None, :], (S, N))
    nears = np.array([-1.0 if x is None else x for x in t.nears])
    near2 = np.broadcast_to(nears[None, :], (S, N))
    # last tie-break: the lowest near-memory threshold (retrieve more) that keeps the negatives' rate at its minimum
    order = np.lexsort((near2.ravel(), items.ravel(), neg2.ravel(), -np.round(r, 9).ravel(), -np.round(h, 9).ravel()))
    s, n = divmod(int(order[0]), N)
    return s, n, {"hit": float(h[s, n]), "mrr": float(r[s, n]), "neg_rate": float(neg[n])}


def _eval(t: _Table, s: int, n: int, users: Sequence[str]) -> dict:
    cols = np.array([u in users for u in t.users])
    d = t.decide[n, cols]
    return {"hit": float((t.hit[s, cols] * d).mean()), "mrr": float((t.rr[s, cols] * d).mean()),
            "retrieval_rate": float(d.mean()), "questions": int(cols.sum()),
            "neg_rate": float(np.mean([t.neg_rate[u][n] for u in users if u in t.neg_rate]))}


def _spread(xs: list[float]) -> dict:
    return {"mean": statistics.fmean(xs), "sd": statistics.stdev(xs) if len(xs) > 1 else 0.0,
            "min": min(xs), "max": max(xs)}


def _cv(t: _Table, folds: list[tuple[list[str], list[str]]]) -> dict:
    per_fold, pooled_h, pooled_r, n_q = [], 0.0, 0.0, 0
    for train, test in folds:
        s, n, tr = _choose(t, train)
        te = _eval(t, s, n, test)
        per_fold.append({"train": train, "test": test, "chosen": {**t.settings[s], "near": t.nears[n]},
                         "train_hit": tr["hit"], "test_hit": te["hit"], "test_mrr": te["mrr"],
                         "test_retrieval_rate": te["retrieval_rate"], "test_questions": te["questions"]})
        pooled_h += te["hit"] * te["questions"]
        pooled_r += te["mrr"] * te["questions"]
        n_q += te["questions"]
    all_users = sorted({u for tr, te in folds for u in tr + te})
    s, n, _ = _choose(t, all_users)
    ins = _eval(t, s, n, all_users)
    return {"folds": per_fold, "hit": _spread([f["test_hit"] for f in per_fold]),
            "mrr": _spread([f["test_mrr"] for f in per_fold]),
            "pooled_hit": pooled_h / n_q, "pooled_mrr": pooled_r / n_q,
            "all_users_choice": {**t.settings[s], "near": t.nears[n]}, "all_users_in_sample_hit": ins["hit"],
            "all_users_in_sample_mrr": ins["mrr"], "all_users_neg_rate": ins["neg_rate"]}


def _memorybank(embedder: Any, data: GVDDataset, users: list[str], questions: list, today: date, k: int,
                folds: list[tuple[list[str], list[str]]], seed: int) -> dict:
    from boundmem_bench.baselines import MemoryBank
    from .gvd_eval import evaluate_question

    mb = MemoryBank(embedder, None, forgetting=False, seed=seed)
    for u in users:
        for s in data.users[u].sessions:
            mb.add_session(u, s.day, list(s.turns))
    rows = [evaluate_question(mb, None, q, today, k) for q in questions]
    per_fold = []
    for _, test in folds:
        rs = [r for r in rows if r["user"] in test]
        per_fold.append({"test": test, "test_hit": statistics.fmean(r["hit_at"][-1] for r in rs),
                         "test_mrr": statistics.fmean(r["mrr"] for r in rs)})
    return {"folds": per_fold, "hit": _spread([f["test_hit"] for f in per_fold]),
            "mrr": _spread([f["test_mrr"] for f in per_fold]),
            "in_sample_hit": statistics.fmean(r["hit_at"][-1] for r in rows),
            "in_sample_mrr": statistics.fmean(r["mrr"] for r in rows)}


def run_cv(data: GVDDataset, embedder: Any, k: int = 5, n_folds: int = 5, seed: int = 0,
           grid: Optional[Grid] = None, users: Optional[list[str]] = None, ablations: bool = True) -> dict:
    """Cross-validate CAIM's knobs (and its ablations) on the gold users; MemoryBank on the same folds."""
    from boundmem.caim.system import CAIM, DEFAULT_TAG_MARGIN

    grid = grid or Grid()
    today = data.session_date
    gold_users = sorted({q.user for q in data.questions if q.gold is not None and q.gold.evidence})
    users = sorted(users) if users else gold_users
    questions = [q for q in data.questions if q.user in users and q.gold is not None and q.gold.evidence]
    folds = leave_users_out_folds(users, n_folds, seed)

    def make(**kw: Any) -> Any:
        return CAIM(embedder=embedder, **kw)

    variants = [_ingest(make, f"margin {m}", m, data, users, questions, today) for m in grid.tag_margin]
    full = _table(variants, grid, k, questions)
    out: dict[str, Any] = {"users": users, "folds": [{"train": a, "test": b} for a, b in folds], "k": k,
                           "seed": seed, "grid": asdict(grid), "negatives": list(NEGATIVES),
                           "caim": _cv(full, folds)}
    shipped = make()
    p = shipped.params
    # the shipped defaults, in sample: the real retrieve() path on every gold question
    from .gvd_eval import evaluate_question

    for u in users:
        for s in data.users[u].sessions:
            shipped.add_session(u, s.day, list(s.turns))
    rows = [evaluate_question(shipped, None, q, today, k) for q in questions]
    out["shipped"] = {"params": asdict(p), "tag_margin": DEFAULT_TAG_MARGIN,
                      "in_sample_hit": statistics.fmean(r["hit_at"][-1] for r in rows),
                      "in_sample_mrr": statistics.fmean(r["mrr"] for r in rows),
                      "fold_hit": _spread([statistics.fmean(r["hit_at"][-1] for r in rows if r["user"] in te)
                                           for _, te in folds])}
    out["memorybank"] = _memorybank(embedder, data, users, questions, today, k, folds, seed)
    if ablations:
        base = [v for v in variants if v.margin == DEFAULT_TAG_MARGIN] or variants[:1]
        abl: dict[str, dict] = {}
        abl["controller off"] = _cv(_table(variants, grid, k, questions, controller=False), folds)
        abl["tags off"] = _cv(_table(base, Grid(**{**asdict(grid), "tag_bonus": (0.0,)}), k, questions), folds)
        abl["dates off"] = _cv(_table(variants, Grid(**{**asdict(grid), "date_bonus": (0.0,)}), k, questions), folds)
        abl["relevance filter off"] = _cv(_table(variants, Grid(**{**asdict(grid), "cutoff": (-1.0,)}), k,
                                                 questions), folds)
        abl["source turns off (thought text only)"] = _cv(_table(variants, Grid(**{**asdict(grid), "source_weight": (
            0.0,)}), k, questions), folds)
        abl["day summaries off"] = _cv(_table(variants, Grid(**{**asdict(grid), "summary_weight": (0.0,)}), k,
                                              questions), folds)
        abl["source turns and day summaries off (CAIM before #20)"] = _cv(_table(variants, Grid(**{
            **asdict(grid), "source_weight": (0.0,), "summary_weight": (0.0,)}), k, questions), folds)
        dense = Grid(tag_margin=(DEFAULT_TAG_MARGIN,), pool=(0,), tag_bonus=(0.0,), date_bonus=(0.0,),
                     cutoff=(-1.0,), near=(0.0,), source_weight=(0.0,), summary_weight=(0.0,))
        abl["dense only over thoughts (no controller, tags, dates, filter)"] = _cv(_table(base, dense, k, questions,
                                                                                          controller=False), folds)
        dense_src = Grid(**{**asdict(dense), "source_weight": (1.0,), "summary_weight": (1.0,)})
        abl["dense only over thoughts, source turns and day summaries"] = _cv(_table(base, dense_src, k, questions,
                                                                                     controller=False), folds)
        raw = _ingest(make, "raw turns", DEFAULT_TAG_MARGIN, data, users, questions, today, postthink=False)
        abl["post-thinking off (raw turns)"] = _cv(_table([raw], grid, k, questions), folds)
        out["ablations"] = abl
    for v in variants:
        v.caim.close()
    shipped.close()
    return out


def _f(x: float) -> str:
    return f"{x:.3f}".replace("0.", ".", 1) if 0 <= x < 1 else f"{x:.3f}"


def _ms(d: dict) -> str:
    return f"{_f(d['mean'])} ± {_f(d['sd'])} ({_f(d['min'])}-{_f(d['max'])})"


def cv_section(rep: Any, cv: dict) -> None:
    """Append the cross-validation section to a `Report`."""
    k = cv["k"]
    rep.h2(f"Leave-users-out cross-validation (CAIM knobs), {len(cv['folds'])} folds")
    rep.para(f"Users: {', '.join(cv['users'])}; folds (test users): "
             + "; ".join(", ".join(f["test"]) for f in cv["folds"]) + f". Seed {cv['seed']}. Knobs are chosen on the "
             "training users only (highest hit@k, then MRR, then fewest retrievals on chit-chat, then fewest items); "
             "test figures are the fold's held-out users. ± is the standard deviation over folds, then min-max. "
             "Pooled = every question scored with the knobs chosen without its user.")
    c, mb, sh = cv["caim"], cv["memorybank"], cv["shipped"]
    rep.table(["system", f"hit@{k} in-sample", f"hit@{k} CV mean ± sd (min-max)", f"hit@{k} CV pooled",
               "MRR in-sample", "MRR CV mean ± sd", "MRR CV pooled"],
              [("CAIM, shipped defaults (in-sample) / CV procedure", _f(sh["in_sample_hit"]), _ms(c["hit"]),
                _f(c["pooled_hit"]), _f(sh["in_sample_mrr"]), _ms(c["mrr"]), _f(c["pooled_mrr"])),
               (f"CAIM, best knobs on all {len(cv['users'])} users (in-sample, optimistic)", _f(c["all_users_in_sample_hit"]), "", "",
                _f(c["all_users_in_sample_mrr"]), "", ""),
               ("MemoryBank (no knobs)", _f(mb["in_sample_hit"]), _ms(mb["hit"]), _f(mb["in_sample_hit"]),
                _f(mb["in_sample_mrr"]), _ms(mb["mrr"]), _f(mb["in_sample_mrr"]))])
    rep.table(["fold", "test users", "chosen (margin, pool, tag, date, cutoff, near, source, summary)", f"CAIM test hit@{k}",
               f"MemoryBank test hit@{k}", "CAIM test MRR", "MemoryBank test MRR"],
              [(i + 1, ", ".join(f["test"]), _knobs(f["chosen"]), _f(f["test_hit"]), _f(m["test_hit"]),
                _f(f["test_mrr"]), _f(m["test_mrr"])) for i, (f, m) in enumerate(zip(c["folds"], mb["folds"]))])
    rep.para(f"Choice of the same procedure on all {len(cv['users'])} users: {_knobs(c['all_users_choice'])}; "
             f"its retrieval rate on the {len(cv['negatives'])} chit-chat negatives: {_f(c['all_users_neg_rate'])}. "
             f"Shipped defaults: margin {sh['tag_margin']}, {sh['params']}.")
    if "ablations" in cv:
        rep.h2("Ablations under the same cross-validation")
        rows = [("CAIM (all components)", _ms(c["hit"]), _f(c["pooled_hit"]), _ms(c["mrr"]))]
        rows += [(name, _ms(a["hit"]), _f(a["pooled_hit"]), _ms(a["mrr"])) for name, a in cv["ablations"].items()]
        rows.append(("MemoryBank", _ms(mb["hit"]), _f(mb["in_sample_hit"]), _ms(mb["mrr"])))
        rep.table(["variant", f"hit@{k} CV mean ± sd (min-max)", f"hit@{k} pooled", "MRR CV mean ± sd"], rows)


def _knobs(ch: dict) -> str:
    return (f"{ch.get('tag_margin')}, {ch['pool'] or 'all'}, {ch['tag_bonus']}, {ch['date_bonus']}, "
            f"{'off' if ch['cutoff'] < 0 else ch['cutoff']}, {'off' if ch['near'] is None else ch['near']}, "
            f"{ch.get('source_weight', 0.0)}, {ch.get('summary_weight', 0.0)}")
