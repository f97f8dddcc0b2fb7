"""Calibrate the reader's thresholds on the dev writers, through the run-time code, and write reader.json beside the
model (with the hash of the files it is valid for).

    python -m boundmem_bench.train.reader_calibrate [--model DIR]

The held-out writers are never read here. Each threshold is moved in turn (two passes) to the value that makes the
most dev cases right, counting a value stored from nothing (or someone else's) twice: a made-up value is worse than a
missed one.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from boundmem.config import Settings
from boundmem.embed.registry import make_embedder
from boundmem.extract.reader import ReaderExtractor
from boundmem.extract.reader_model import ReaderModel, ReaderSettings, input_hash

from ..reader_score import Case, Tally, cases, schemas, score_case
from .reader import OUT
from .reader_data import annotated_files, read_jsonl

GRID = {
    "span": [0.2, 0.3, 0.4, 0.5, 0.6, 0.7],
    "category": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
    "item": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7],
    "implied": [0.5, 0.7, 0.8, 0.9, 0.95, 1.01],
    "other": [0.2, 0.3, 0.5, 0.7, 0.8],
    "evidence": [0.0, 0.1, 0.2, 0.3, 0.5],
}


# a stored value the user never said costs this many right cases: the product stores nothing rather than a guess
MADE_UP_COST = 5


def objective(t: Tally) -> float:
    c = t.counts
    return (sum(t.right.values()) - MADE_UP_COST * (c["fabricated"] + c["other_leak"] + c["polarity_flip"])
            - c["cases_empty_stored"])


class _Replay:
    """The extractor with the model's readings of every dev turn kept, so each threshold setting costs no forward
    pass."""

    def __init__(self, extractor: ReaderExtractor):
        self.extractor = extractor
        self.memo: dict = {}
        inner = extractor.model.read_many

        def read_many(turns):
            key = tuple(turns)
            if key not in self.memo:
                self.memo[key] = inner(turns)
            return self.memo[key]

        extractor.model.read_many = read_many


def evaluate(extractor: ReaderExtractor, grouped: dict[str, list[Case]], loaded: dict) -> Tally:
    tally = Tally()
    for name, group in grouped.items():
        for case in group:
            score_case(case, extractor.extract(case.conversation, loaded[name]).candidates, tally)
    return tally


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=OUT)
    args = ap.parse_args(argv)
    meta = json.loads((args.model / "training.json").read_text())
    settings = ReaderSettings(input_hash=input_hash(args.model), category_scale=meta["category_scale"],
                              category_none=meta["category_none"], item_scale=meta["item_scale"],
                              item_none=meta["item_none"],
                              avoidance_as_sentiment=meta.get("avoidance_as_sentiment", False))
    model = ReaderModel(args.model, settings=settings)
    extractor = ReaderExtractor(make_embedder("minilm", Settings()), model)
    _Replay(extractor)
    rows = [r for r in read_jsonl(annotated_files()) if r.split == "dev"]
    loaded = schemas()
    grouped: dict[str, list[Case]] = {}
    for case in cases(rows):
        grouped.setdefault(case.schema, []).append(case)
    best = objective(evaluate(extractor, grouped, loaded))
    print(f"start: {best}", flush=True)
    for _ in range(2):
        for name, values in GRID.items():
            for v in values:
                model._settings = settings.model_copy(update={name: v})
                score = objective(evaluate(extractor, grouped, loaded))
                if score > best:
                    best, settings = score, model._settings
            model._settings = settings
            print(f"{name} = {getattr(settings, name)}: {best}", flush=True)
    settings = settings.model_copy(update={"calibrated_on": sorted({r.writer for r in rows})})
    (args.model / "reader.json").write_text(settings.model_dump_json(indent=1) + "\n")
    final = evaluate(extractor, grouped, loaded)
    from ..reader_score import table

    print("\n".join(table(final)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
