"""Training the in-car head from the CarMem dataset's *training* users (lines 51-100 only).

The first 50 users are the paper's test split and are never read here. Positives are the
user turn the dataset marks as revealing the preference (meta_info.position_user_preference_in_conv)
and the user's maintenance utterances (equal/negate/different, all about the same detail
category); negatives ("none") are the other user turns and the retrieval utterances, which
are on-topic commands that state no lasting preference.

    python -m boundmem_bench.train.head --data dataset.jsonl --out src/boundmem/extract/data/incar_head.npz
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from boundmem.schema.model import Schema
from boundmem.extract.head import Thresholds, TrainedHead

TRAIN_USERS = range(50, 100)

# One-off requests written for boundmem (not from the dataset): they name a category's topic,
# sometimes even one of its attribute values, but say nothing about what the user wants in general.
ONE_OFF_COMMANDS = (
    "Drive me home.", "Navigate to the airport.", "Take me to work.", "Route me to Main Street 12.",
    "How long until we arrive?", "Phone my brother.", "Text Anna that I am running late.", "Dial the office.",
    "Read my new messages.", "What's the weather tomorrow?", "Remind me to buy milk at six.",
    "Change the ambient light to green.", "Make the cabin lights red for now.", "Switch the interior light to white.",
    "Turn the lights off.", "Dim the display.", "Turn the fan up a notch.", "Turn off the seat heating.",
    "Set the temperature to 22 right now.", "Open the window a bit.", "Turn on the air conditioning.",
    "Next song.", "Pause the music.", "Turn the volume down.", "Skip this track.", "Play the radio.",
    "Switch to FM.", "Play the next episode.", "Stop the podcast.",
    "Find a gas station on the way.", "Where is the closest charger?", "Show me parking near the station.",
    "Is there a supermarket nearby?", "Find a restaurant near the hotel.", "Look for a place to eat around here.",
    "Show me the route on the map.", "Avoid this traffic jam.", "Is there traffic ahead?", "Cancel the navigation.",
    "Add a stop at the pharmacy.", "How far is the next rest area?", "Find a car wash.",
)
_MQ = ("question_equal_preference", "question_negate_preference", "question_different_preference")


def training_sentences(data: Path, schema: Schema, users: Sequence[int] = TRAIN_USERS) -> tuple[list[str], list[int]]:
    """(sentences, label index); label len(details) means "no lasting preference"."""
    by_name = {r.detail.name: i for i, r in enumerate(schema.details())}
    none = len(by_name)
    keep = set(users)
    texts: list[str] = []
    labels: list[int] = []
    with open(data, encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            if n not in keep or not line.strip():
                continue
            for conv in json.loads(line)["data"]:
                detail = conv["user_preference"].split(";")[2].strip()
                if detail not in by_name:
                    raise ValueError(f"{data}, line {n + 1}: detail category {detail!r} not in schema {schema.name!r}")
                gt = by_name[detail]
                pos = int(conv["meta_info"]["position_user_preference_in_conv"]) - 1
                for i, turn in enumerate(conv["extraction_conversation"]):
                    if "USER" in turn:
                        texts.append(turn["USER"])
                        labels.append(gt if i == pos else none)
                for k in _MQ:
                    texts.append(conv["maintenance_questions"][k])
                    labels.append(gt)
                texts.append(conv["next_conversation_question"])
                labels.append(none)
    texts += ONE_OFF_COMMANDS
    labels += [none] * len(ONE_OFF_COMMANDS)
    return texts, labels


def fit_softmax(X: np.ndarray, y: np.ndarray, n_classes: int, l2: float = 1e-2, iters: int = 400,
                lr: float = 0.05, scale: float = 20.0) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression, full-batch Adam. Unit-norm inputs are scaled so Adam's
    step size suits them; the returned weights apply to the unscaled embeddings."""
    Xs = X.astype(np.float64) * scale
    n, d = Xs.shape
    W = np.zeros((d, n_classes))
    b = np.zeros(n_classes)
    Y = np.eye(n_classes)[y]
    mom = {k: (np.zeros_like(p), np.zeros_like(p)) for k, p in (("W", W), ("b", b))}
    for t in range(1, iters + 1):
        Z = Xs @ W + b
        Z -= Z.max(1, keepdims=True)
        P = np.exp(Z)
        P /= P.sum(1, keepdims=True)
        G = (P - Y) / n
        grads = {"W": Xs.T @ G + l2 * W, "b": G.sum(0)}
        for k, p in (("W", W), ("b", b)):
            m, v = mom[k]
            g = grads[k]
            m *= 0.9
            m += 0.1 * g
            v *= 0.999
            v += 0.001 * g * g
            p -= lr * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    return (W * scale).astype(np.float32), b.astype(np.float32)


def train_head(data: Path, schema: Schema, embedder, thresholds: Thresholds = Thresholds(),
               l2: float = 1e-2, users: Sequence[int] = TRAIN_USERS) -> TrainedHead:
    texts, labels = training_sentences(data, schema, users)
    X = embedder.embed(texts)
    refs = list(schema.details())
    W, b = fit_softmax(X, np.array(labels), len(refs) + 1, l2=l2)
    return TrainedHead(schema_name=schema.name, embedder=embedder.name, labels=[str(r.path) for r in refs],
                       vocab=[tuple(r.detail.attributes) for r in refs], W=W, b=b, thresholds=thresholds)


def main(argv: Sequence[str] | None = None) -> None:
    from boundmem.embed.minilm_torch import MiniLMEmbedder
    from boundmem.schema.load import builtin_schema

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, type=Path, help="CarMem dataset.jsonl (only lines 51-100 are read)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--first", type=float, default=Thresholds.first)
    ap.add_argument("--further", type=float, default=Thresholds.further)
    ap.add_argument("--vocab-boost", type=float, default=Thresholds.vocab_boost)
    ap.add_argument("--bare", type=float, default=Thresholds.bare)
    ap.add_argument("--l2", type=float, default=1e-2)
    a = ap.parse_args(argv)
    head = train_head(a.data, builtin_schema(), MiniLMEmbedder(), Thresholds(a.first, a.further, a.vocab_boost, a.bare), l2=a.l2)
    head.save(a.out)
    print(f"wrote {a.out} ({a.out.stat().st_size} bytes, {len(head.labels)} categories)")


if __name__ == "__main__":
    main()
