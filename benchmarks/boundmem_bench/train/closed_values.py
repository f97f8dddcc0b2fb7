"""Training the closed-value model (`closed_values.py`) from data it may learn from.

Examples (sentence -> the listed item it means), per closed category of the in-car schema:
* CarMem users 51-100 (never the first 50, the test split): the turn that reveals the preference and
  the "equal" maintenance utterance -> the preference's item; the "different" utterance -> its
  `different_attribute`. The "negate" utterance is left out (it says which item is *not* wanted).
* boundmem's in-car challenge set, `split == "train"` only: the user turns of a conversation that
  expects one item of a closed category and states it (a preference cue, or its only user turn).

The probability threshold is calibrated on users 91-100 held out of a first fit (the smallest threshold
whose accepted answers there are right at least `--precision` of the time); the shipped model is then
fitted on everything with that threshold.

    python -m boundmem_bench.train.closed_values --carmem dataset.jsonl \
        --challenge benchmarks/boundmem_bench/challenge_data --out src/boundmem/extract/data/incar_closed.npz
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from boundmem.schema.model import Schema
from boundmem.extract.closed_values import ClosedValueModel
from .head import TRAIN_USERS, fit_softmax
from boundmem.extract.lasting import explicit_cue

CALIBRATION_USERS = range(90, 100)


def closed_refs(schema: Schema) -> dict[str, tuple[str, ...]]:
    return {str(r.path): tuple(r.detail.attributes) for r in schema.details()
            if r.detail.value_kind == "closed" and len(r.detail.attributes) >= 2}


def carmem_examples(data: Path, schema: Schema, users: Sequence[int]) -> list[tuple[str, str, str]]:
    """(path, sentence, item) from the given CarMem users (0-based lines; only 50-99 may be asked for)."""
    if any(u not in TRAIN_USERS for u in users):
        raise ValueError("only CarMem users 51-100 (lines 50-99) may be read for training")
    refs = closed_refs(schema)
    by_name = {r.detail.name: str(r.path) for r in schema.details()}
    keep = set(users)
    out = []
    with open(data, encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            if n not in keep or not line.strip():
                continue
            for conv in json.loads(line)["data"]:
                parts = [p.strip() for p in conv["user_preference"].split(";")]
                path = by_name.get(parts[2])
                if path not in refs or parts[3] not in refs[path]:
                    continue
                pos = int(conv["meta_info"]["position_user_preference_in_conv"]) - 1
                turns = conv["extraction_conversation"]
                if 0 <= pos < len(turns) and "USER" in turns[pos]:
                    out.append((path, turns[pos]["USER"], parts[3]))
                mq = conv["maintenance_questions"]
                out.append((path, mq["question_equal_preference"], parts[3]))
                if mq.get("different_attribute") in refs[path]:
                    out.append((path, mq["question_different_preference"], mq["different_attribute"]))
    return out


def challenge_examples(folder: Path, schema: Schema) -> list[tuple[str, str, str]]:
    refs = closed_refs(schema)
    out = []
    for f in sorted(folder.glob("incar-*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            if r.get("split") != "train" or len(r.get("expected") or []) != 1 or "conversations" in r:
                continue
            e = r["expected"][0]
            if e["path"] not in refs or e["attribute"] not in refs[e["path"]] or e.get("polarity", "like") != "like":
                continue
            users = [t["text"] for t in r["turns"] if t["role"] == "user"]
            said = users if len(users) == 1 else [u for u in users if explicit_cue(u)]
            out.extend((e["path"], u, e["attribute"]) for u in said)
    return out


def fit(examples: list[tuple[str, str, str]], schema: Schema, embedder, threshold: float,
        l2: float = 3e-2) -> ClosedValueModel:
    refs = closed_refs(schema)
    heads = {}
    for path, items in refs.items():
        rows = [(s, items.index(v)) for p, s, v in examples if p == path]
        if len({y for _, y in rows}) < 2:
            continue
        X = embedder.embed([s for s, _ in rows])
        W, b = fit_softmax(X, np.array([y for _, y in rows]), len(items), l2=l2)
        heads[path] = (items, W, b)
    return ClosedValueModel(embedder=embedder.name, dim=embedder.dim, threshold=threshold, heads=heads)


def calibrate(model: ClosedValueModel, examples: list[tuple[str, str, str]], schema: Schema, embedder,
              precision: float) -> tuple[float, list[tuple[float, bool]]]:
    scored = []
    X = embedder.embed([s for _, s, _ in examples])
    for (path, _, item), x in zip(examples, X):
        got, p = model.implied(schema.resolve(path), x)
        if got is not None:
            scored.append((p, got == item))
    for t in np.arange(0.3, 1.0, 0.02):
        kept = [ok for p, ok in scored if p >= t]
        if kept and sum(kept) / len(kept) >= precision:
            return float(round(t, 2)), scored
    return 0.99, scored


def main(argv: Sequence[str] | None = None) -> None:
    from boundmem.config import Settings
    from boundmem.embed.registry import make_embedder
    from boundmem.schema.load import builtin_schema

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--carmem", required=True, type=Path, help="CarMem dataset.jsonl (only lines 51-100 are read)")
    ap.add_argument("--challenge", required=True, type=Path, help="the challenge-set folder (train split only)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--precision", type=float, default=0.9)
    a = ap.parse_args(argv)
    schema, emb = builtin_schema(), make_embedder("minilm", Settings())
    fit_users = [u for u in TRAIN_USERS if u not in CALIBRATION_USERS]
    first = fit(carmem_examples(a.carmem, schema, fit_users) + challenge_examples(a.challenge, schema), schema, emb, 0.0)
    held = carmem_examples(a.carmem, schema, list(CALIBRATION_USERS))
    threshold, scored = calibrate(first, held, schema, emb, a.precision)
    kept = [ok for p, ok in scored if p >= threshold]
    print(f"calibration (users 91-100, {len(scored)} sentences): threshold {threshold}, accepted {len(kept)} "
          f"({len(kept) / max(1, len(scored)):.0%}), right {sum(kept) / max(1, len(kept)):.1%}; "
          f"argmax right overall {sum(ok for _, ok in scored) / max(1, len(scored)):.1%}")
    examples = carmem_examples(a.carmem, schema, list(TRAIN_USERS)) + challenge_examples(a.challenge, schema)
    model = fit(examples, schema, emb, threshold)
    model.save(a.out)
    print(f"wrote {a.out} ({a.out.stat().st_size} bytes, {len(model.heads)} categories, {len(examples)} sentences)")


if __name__ == "__main__":
    main()
