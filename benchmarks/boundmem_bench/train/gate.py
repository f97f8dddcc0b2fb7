"""Training the turn gate (`turn_gate.py`) from the CarMem dataset's *training* users (lines 51-100 only).

The gate is distilled from the extractor it guards. Its label for a turn is "the head lets
this turn count" (score >= its floor): only such turns can change what the extractor returns.
The labels come from heads cross-fitted over five folds of users (each trained as the
bundled head is, without the fold it labels), so a turn is judged as the shipped head judges
an unseen user's turn; on its own training sentences a head is overconfident.

The threshold is set on gate scores that are out-of-fold too: the lowest score that still
keeps `recall` (default 99.5%) of the turns the full extractor picks in the held-out users'
conversations. Then the gate is fitted on all training users and saved with that threshold.

    python -m boundmem_bench.train.gate --data dataset.jsonl --out src/boundmem/extract/data/incar_gate.npz
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from boundmem.schema.model import Schema
from boundmem.extract.head import TrainedHead
from .head import ONE_OFF_COMMANDS, TRAIN_USERS, train_head
from boundmem.extract.turn_gate import BUCKETS, TurnGate, feature_matrix

FOLDS = 5
_MQ = ("question_equal_preference", "question_negate_preference", "question_different_preference")


@dataclass
class GateData:
    texts: list[str]
    user: np.ndarray                 # dataset line index (0-based); -1 for boundmem's one-off commands
    conversations: list[list[int]]   # user-turn rows of each extraction conversation, in order


def gate_sentences(data: Path, users: Sequence[int] = TRAIN_USERS) -> GateData:
    """The head's training sentences, with their user and conversation: each conversation's user
    turns, its maintenance utterances and retrieval question, then the one-off commands."""
    keep = set(users)
    texts: list[str] = []
    owner: list[int] = []
    convs: list[list[int]] = []
    with open(data, encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            if n not in keep or not line.strip():
                continue
            for conv in json.loads(line)["data"]:
                rows = []
                for turn in conv["extraction_conversation"]:
                    if "USER" in turn:
                        rows.append(len(texts))
                        texts.append(turn["USER"])
                        owner.append(n)
                convs.append(rows)
                for t in (*(conv["maintenance_questions"][k] for k in _MQ), conv["next_conversation_question"]):
                    texts.append(t)
                    owner.append(n)
    texts += ONE_OFF_COMMANDS
    owner += [-1] * len(ONE_OFF_COMMANDS)
    return GateData(texts, np.array(owner), convs)


def fit_logistic(X: np.ndarray, y: np.ndarray, l2: float = 1e-4, iters: int = 300, lr: float = 0.05) -> tuple[np.ndarray, float]:
    """Binary logistic regression, full-batch Adam from zero (deterministic)."""
    n, d = X.shape
    w = np.zeros(d, np.float32)
    b = 0.0
    m, v = np.zeros(d, np.float32), np.zeros(d, np.float32)
    mb = vb = 0.0
    y = y.astype(np.float32)
    for t in range(1, iters + 1):
        p = 1.0 / (1.0 + np.exp(-(X @ w + b)))
        g = ((p - y) / n).astype(np.float32)
        gw = X.T @ g + l2 * w
        gb = float(g.sum())
        m = 0.9 * m + 0.1 * gw
        v = 0.999 * v + 0.001 * gw * gw
        mb = 0.9 * mb + 0.1 * gb
        vb = 0.999 * vb + 0.001 * gb * gb
        w -= lr * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        b -= lr * (mb / (1 - 0.9 ** t)) / (np.sqrt(vb / (1 - 0.999 ** t)) + 1e-8)
    return w, b


def train_gate(data: Path, schema: Schema, embedder, head: TrainedHead, recall: float = 0.995, l2: float = 1e-4,
               buckets: int = BUCKETS, users: Sequence[int] = TRAIN_USERS) -> tuple[TurnGate, dict]:
    from boundmem.extract.local import LocalExtractor

    gd = gate_sentences(data, users)
    ex = LocalExtractor(embedder, head=head, gate=None)
    index = ex._index(schema)
    cued, hits, all_hits = ex._cues_and_hits(gd.texts, index)
    E = embedder.embed(gd.texts)
    ulist = sorted(set(users))
    folds = [set(ulist[k::FOLDS]) for k in range(FOLDS)]

    # 1. labels from cross-fitted heads: does the turn count, and which turns get picked
    scored = [None] * len(gd.texts)
    for k, fold in enumerate(folds):
        hk = train_head(data, schema, embedder, head.thresholds, users=[u for u in ulist if u not in fold])
        ex.head = replace(head, W=hk.W, b=hk.b)
        rows = np.flatnonzero(np.isin(gd.user, list(fold)))
        for s in ex._score_head(E[rows], rows, [cued[j] for j in rows], hits[rows], index):
            scored[s.turn] = s
    ex.head = head
    rows = np.flatnonzero(gd.user < 0)
    for s in ex._score_head(E[rows], rows, [cued[j] for j in rows], hits[rows], index):
        scored[s.turn] = s
    y = np.array([s.score >= s.floor for s in scored])
    picked = np.zeros(len(gd.texts), bool)
    for conv in gd.conversations:
        for s in ex._decide([scored[r] for r in conv], head.thresholds.further):
            picked[s.turn] = True

    # 2. out-of-fold gate scores -> the threshold that keeps `recall` of the picks
    X = feature_matrix(gd.texts, cued, hits, all_hits, buckets)
    cv = np.zeros(len(gd.texts))
    for fold in folds:
        hold = np.isin(gd.user, list(fold))
        w, b = fit_logistic(X[~hold], y[~hold], l2=l2)
        cv[hold] = X[hold] @ w + b
    threshold = float(np.quantile(cv[picked], 1.0 - recall, method="lower"))
    turn = np.zeros(len(gd.texts), bool)
    for conv in gd.conversations:
        turn[conv] = True
    passed = cv >= threshold
    stats = {"turns": int(turn.sum()), "counts": float(y[turn].mean()), "picked": float(picked[turn].mean()),
             "cv_pass": float(passed[turn].mean()), "cv_pick_recall": float(passed[picked].mean()),
             "cv_count_recall": float(passed[turn & y].mean()), "threshold": threshold}

    # 3. the gate itself, on all training users
    w, b = fit_logistic(X, y, l2=l2)
    gate = TurnGate(schema_name=head.schema_name, labels=list(head.labels), w_text=w[:buckets].copy(),
                    w_dense=w[buckets:].copy(), b=float(b), threshold=threshold)
    return gate, stats


def main(argv: Sequence[str] | None = None) -> None:
    from boundmem.embed.minilm_torch import MiniLMEmbedder
    from boundmem.schema.load import builtin_schema
    from boundmem.extract.head import bundled_head

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, type=Path, help="CarMem dataset.jsonl (only lines 51-100 are read)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--recall", type=float, default=0.995, help="share of the extractor's picks the gate must keep")
    ap.add_argument("--l2", type=float, default=1e-4)
    a = ap.parse_args(argv)
    head = bundled_head()
    if head is None:
        raise SystemExit("no bundled head: train it first (python -m boundmem_bench.train.head)")
    gate, stats = train_gate(a.data, builtin_schema(), MiniLMEmbedder(), head, recall=a.recall, l2=a.l2)
    gate.save(a.out)
    print(json.dumps(stats, indent=1))
    print(f"wrote {a.out} ({a.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
