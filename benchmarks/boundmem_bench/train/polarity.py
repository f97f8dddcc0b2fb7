"""Trains the maintenance polarity model (`boundmem.maintain.polarity.PolarityModel`) on CarMem users 51-100.

    python -m boundmem_bench.train.polarity --data ../shared/data/carmem/dataset.jsonl
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np

from boundmem.embed import Embedder
from boundmem.maintain import polarity as _pol
from boundmem.maintain.polarity import ARTEFACT, PolarityModel, features

TRAIN_USERS = range(50, 100)  # 0-based lines of dataset.jsonl; 0-49 are CarMem's test split


def training_examples(dataset: Path, users: Iterable[int] = TRAIN_USERS) -> list[tuple[str, str, str, int]]:
    """(detail name, attribute, utterance, 1 if it negates) from the chosen dataset lines.

    Refuses the test split: CarMem's first 50 users are what the maintenance numbers are reported on.
    """
    users = set(users)
    if users & set(range(50)):
        raise ValueError("users 0-49 are CarMem's test split; train on 50-99 only")
    out = []
    with open(dataset, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i not in users:
                continue
            for conv in json.loads(line)["data"]:
                _, _, detail, attr = [x.strip() for x in conv["user_preference"].split(";", 3)]
                mq = conv["maintenance_questions"]
                out.append((detail, attr, mq["question_equal_preference"], 0))
                out.append((detail, attr, mq["question_negate_preference"], 1))
    return out


def fit_logistic(X: np.ndarray, y: np.ndarray, C: float = 0.05, iters: int = 50) -> tuple[np.ndarray, float]:
    """L2 logistic regression (0.5|w|^2 + C * sum logloss, as sklearn's C) by Newton steps on
    standardised features; returns weights and bias for the raw features."""
    mu, sd = X.mean(0), X.std(0)
    sd[sd < 1e-12] = 1.0
    Z = np.hstack([(X - mu) / sd, np.ones((len(X), 1))])
    w = np.zeros(Z.shape[1])
    reg = np.ones(Z.shape[1]) / C
    reg[-1] = 0.0  # bias is not penalised
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(Z @ w)))
        g = Z.T @ (p - y) + reg * w
        H = (Z * (p * (1 - p))[:, None]).T @ Z + np.diag(reg + 1e-9)
        step = np.linalg.solve(H, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    wr = w[:-1] / sd
    return wr, float(w[-1] - wr @ mu)


def train(embedder: Embedder, examples: Sequence[tuple[str, str, str, int]], C: float = 0.05) -> PolarityModel:
    X = np.vstack([features(embedder, d, a, s) for d, a, s, _ in examples])
    y = np.array([lab for *_, lab in examples], np.float64)
    w, b = fit_logistic(X, y, C)
    return PolarityModel(w=w, b=b, embedder_name=embedder.name, dim=embedder.dim)


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(description="Train the maintenance polarity model on CarMem users 51-100.")
    ap.add_argument("--data", type=Path, required=True, help="CarMem dataset.jsonl")
    ap.add_argument("--out", type=Path, default=Path(_pol.__file__).parent / "data" / ARTEFACT)
    ap.add_argument("-C", type=float, default=0.05)
    a = ap.parse_args(argv)
    from boundmem.embed.minilm_torch import MiniLMEmbedder

    ex = training_examples(a.data)
    model = train(MiniLMEmbedder(), ex, a.C)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    model.save(a.out)
    print(f"trained on {len(ex)} utterances -> {a.out}")


if __name__ == "__main__":
    main()
