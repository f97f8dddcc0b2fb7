"""Training the stance model (`stance_model.py`) from data it may learn from.

* boundmem's multi-domain corpus (`data/lasting_corpus.jsonl`), `split == "train"`: kind `dislike` is a
  dislike; `explicit`, `habit`, `implicit`, `identity` are likes.
* boundmem's challenge sets (`boundmem_bench/challenge_data/*.jsonl`), `split == "train"`: a user turn that names
  the one expected value, with its polarity.
* SLURP devel, train part only (slurp_id % 3 != 0): `music_dislikeness` dislikes, `music_likeness` likes.

    python -m boundmem_bench.train.stance --slurp devel.jsonl \
        --challenge benchmarks/boundmem_bench/challenge_data --out src/boundmem/extract/data/stance.npz
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from .head import fit_softmax
from .lasting import slurp_heldout
from boundmem.extract.stance_model import StanceModel, features

CORPUS = Path(__file__).with_name("data") / "lasting_corpus.jsonl"
LIKE_KINDS = ("explicit", "habit", "implicit", "identity")


def examples(slurp: Path | None, challenge: Path | None, split: str = "train") -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if (r["split"] == "train") == (split == "train") and (r["kind"] == "dislike" or r["kind"] in LIKE_KINDS):
            out.append((r["text"], int(r["kind"] == "dislike")))
    if challenge is not None:
        for f in sorted(challenge.glob("*.jsonl")):
            for line in f.read_text(encoding="utf-8").splitlines():
                r = json.loads(line) if line.strip() else {}
                if (r.get("split") == "train") != (split == "train") or len(r.get("expected") or []) != 1 or "turns" not in r:
                    continue
                e = r["expected"][0]
                if e.get("polarity", "like") not in ("like", "dislike"):
                    continue
                names = [e["attribute"].split("(")[0].strip().lower(), *(a.lower() for a in e.get("accept", []))]
                for t in r["turns"]:
                    if t["role"] == "user" and any(n and n in t["text"].lower() for n in names):
                        out.append((t["text"], int(e["polarity"] == "dislike")))
    if slurp is not None:
        for line in slurp.read_text(encoding="utf-8").splitlines():
            r = json.loads(line) if line.strip() else {}
            intent = f"{r.get('scenario')}_{r.get('action')}" if "action" in r else r.get("intent", "")
            if intent in ("music_likeness", "music_dislikeness") and slurp_heldout(r["slurp_id"]) == (split != "train"):
                out.append((r.get("sentence") or r.get("text", ""), int(intent == "music_dislikeness")))
    return [(t, y) for t, y in out if t.strip()]


def train(rows: Sequence[tuple[str, int]], embedder, l2: float = 1e-2) -> StanceModel:
    texts = [t for t, _ in rows]
    W, b = fit_softmax(features(texts, embedder.embed(texts)), np.array([y for _, y in rows]), 2, l2=l2)
    return StanceModel(embedder=embedder.name, W=W, b=b)


def main(argv: Sequence[str] | None = None) -> None:
    from boundmem.config import Settings
    from boundmem.embed.registry import make_embedder

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slurp", type=Path, help="SLURP devel.jsonl (its train part only)")
    ap.add_argument("--challenge", type=Path, help="the challenge-set folder (train split only)")
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args(argv)
    emb = make_embedder("minilm", Settings())
    rows = examples(a.slurp, a.challenge)
    model = train(rows, emb)
    held = examples(a.slurp, a.challenge, split="heldout")
    if held:
        p = model.dislike_probability([t for t, _ in held], emb.embed([t for t, _ in held]))
        acc = float(np.mean((p >= 0.5) == np.array([y for _, y in held], bool)))
        print(f"held-out accuracy {acc:.3f} on {len(held)} clauses ({sum(y for _, y in held)} dislikes)")
    model.save(a.out)
    print(f"wrote {a.out} ({a.out.stat().st_size} bytes, trained on {len(rows)} clauses, {sum(y for _, y in rows)} dislikes)")


if __name__ == "__main__":
    main()
