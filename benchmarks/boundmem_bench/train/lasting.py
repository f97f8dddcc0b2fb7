"""Training the lasting-preference model (`lasting.py`) from data it may learn from.

Sources, each with what it teaches:
* CarMem users 51-100 (never the first 50, the test split): the turn that reveals the preference
  and the maintenance utterances ("from now on ...") are lasting; the retrieval utterances (on-topic
  requests) are not. Other user turns are left out: some of them state preferences too.
* SLURP devel, train part only (slurp_id % 3 != 0; the rest is held out for the benchmark): real
  spoken one-off commands and questions, not lasting; music_likeness / music_dislikeness turns with a
  preference cue are lasting, the others (e.g. "rating") are left out.
* boundmem's in-car challenge set, `split == "train"` only: every clause of a conversation that
  stores nothing is not lasting; one-clause user turns of conversations that store something are.
* one-off commands written for boundmem (`head.ONE_OFF_COMMANDS`).
* boundmem's multi-domain corpus (`data/lasting_corpus.jsonl`, written for boundmem: food, music, smart home,
  work, fitness, ...; no travel or car topics), `split == "train"` only: lasting and not-lasting clauses of
  every kind (implicit preferences, dislikes, one-off commands, wishes for now, other people's tastes).

    python -m boundmem_bench.train.lasting --carmem dataset.jsonl --slurp devel.jsonl \
        --challenge benchmarks/boundmem_bench/challenge_data --out src/boundmem/extract/data/lasting.npz
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from .head import ONE_OFF_COMMANDS, TRAIN_USERS, fit_softmax
from boundmem.extract.lasting import FEATURES, LastingModel, cue_features
from boundmem.extract.speech import clauses, is_english

_MQ = ("question_equal_preference", "question_negate_preference", "question_different_preference")
NEGATIVE_KINDS = ("one_off", "no_value", "other_person", "accepted_suggestion", "question", "odd_input")
SLURP_LIKES = ("music_likeness", "music_dislikeness")


def slurp_heldout(slurp_id: int) -> bool:
    """The part of SLURP devel that training never reads (the benchmark reports it separately)."""
    return int(slurp_id) % 3 == 0


def carmem_items(path: Path, users: Sequence[int] = TRAIN_USERS) -> list[tuple[str, int, str]]:
    keep = set(users)
    out: list[tuple[str, int, str]] = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            if n not in keep or not line.strip():
                continue
            for conv in json.loads(line)["data"]:
                pos = int(conv["meta_info"]["position_user_preference_in_conv"]) - 1
                turn = conv["extraction_conversation"][pos]
                if "USER" in turn:
                    out.append((turn["USER"], 1, "carmem"))
                out.extend((conv["maintenance_questions"][k], 1, "carmem") for k in _MQ)
                out.append((conv["next_conversation_question"], 0, "carmem"))
    return out


def slurp_items(path: Path) -> list[tuple[str, int, str]]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            r = json.loads(line)
            if slurp_heldout(r["slurp_id"]):
                continue
            if r["intent"] in SLURP_LIKES:
                if cue_features(r["sentence"])[FEATURES.index("cue_any")]:
                    out.append((r["sentence"], 1, "slurp"))
                continue
            out.append((r["sentence"], 0, "slurp"))
    return out


def challenge_items(folder: Path) -> list[tuple[str, int, str]]:
    out = []
    for f in sorted(folder.glob("incar*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            if r.get("split") != "train" or "turns" not in r:  # multi-conversation cases ("conversations") are not read
                continue
            users = [t["text"] for t in r["turns"] if t["role"] == "user"]
            if not r["expected"]:
                out.extend((c, 0, "challenge") for u in users for c in clauses(u) if is_english(c))
            elif r["kind"] not in NEGATIVE_KINDS and len(users) == 1 and len(clauses(users[0])) == 1:
                out.append((clauses(users[0])[0], 1, "challenge"))
    return out


CORPUS = Path(__file__).with_name("data") / "lasting_corpus.jsonl"


def corpus_items(path: Path = CORPUS, split: str = "train") -> list[tuple[str, int, str]]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            if r["split"] == split:
                out.append((r["text"], int(bool(r["lasting"])), "corpus"))
    return out


def training_items(carmem: Path, slurp: Optional[Path], challenge: Optional[Path],
                   corpus: Optional[Path] = CORPUS) -> list[tuple[str, int, str]]:
    items = carmem_items(carmem)
    if slurp:
        items += slurp_items(slurp)
    if challenge:
        items += challenge_items(challenge)
    if corpus:
        items += corpus_items(corpus)
    items += [(t, 0, "oneoff") for t in ONE_OFF_COMMANDS]
    return items


def fit(texts: Sequence[str], y: np.ndarray, X: np.ndarray, l2: float, weights: Optional[np.ndarray] = None):
    F = np.vstack([cue_features(t) for t in texts])
    Z = np.hstack([F, X])
    if weights is not None:   # integer weights by repetition keep fit_softmax unchanged
        rep = np.repeat(np.arange(len(y)), weights.astype(int))
        Z, y = Z[rep], y[rep]
    W, b = fit_softmax(Z, y, 2, l2=l2)
    w = W[:, 1] - W[:, 0]
    w_cue = w[: len(FEATURES)].copy()
    w_cue[FEATURES.index("bias")] += b[1] - b[0]
    return w_cue, w[len(FEATURES):]


def main(argv: Sequence[str] | None = None) -> None:
    from boundmem.config import Settings
    from boundmem.embed.registry import make_embedder

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--carmem", required=True, type=Path, help="CarMem dataset.jsonl (only lines 51-100 are read)")
    ap.add_argument("--slurp", type=Path, help="SLURP devel.jsonl (only slurp_id % 3 != 0 is read)")
    ap.add_argument("--challenge", type=Path, help="folder with incar*.jsonl (only split 'train' is read)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--l2", type=float, default=0.1)
    ap.add_argument("--threshold", type=float, default=0.5)
    a = ap.parse_args(argv)
    items = training_items(a.carmem, a.slurp, a.challenge)
    emb = make_embedder("minilm", Settings.from_env())  # a command-line entry point: the environment's settings
    texts = [t for t, _, _ in items]
    X = emb.embed(texts)
    y = np.array([lab for _, lab, _ in items])
    w_cue, w_emb = fit(texts, y, X, a.l2)
    LastingModel(embedder=emb.name, w_cue=w_cue, w_emb=w_emb, threshold=a.threshold).save(a.out)
    print(f"wrote {a.out}: {len(items)} items, {int(y.sum())} lasting")


if __name__ == "__main__":
    main()
