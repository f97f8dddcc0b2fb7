"""`boundmem bench reader`: the local extractor (the trained reader) on the annotated turns, by kind and style, with
the held-out writers apart from the dev writers it was calibrated on; SLURP's held-out half (real spoken commands:
stated preferences stored from them are false stores); chit-chat (Synthetic-Persona-Chat turns read with the in-car
schema); and its cost as a ratio to one query embedding, measured in one run."""
from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Optional

import typer

from boundmem.config import Settings
from boundmem.models import Conversation, Turn

from .reader_score import Tally, extract_in_slices, run, table
from .report import machine_info
from .results import Figure, write_results
from .train.reader_data import HELD_OUT_SCHEMAS, annotated_files, read_jsonl, slurp_rows

GROUPS = {"written": lambda r: r.writer.startswith("w"),
          "written, on a schema never trained on": lambda r: r.writer.startswith("w") and r.schema in HELD_OUT_SCHEMAS,
          "CarMem users 51-100 (real)": lambda r: r.writer == "carmem",
          "Synthetic-Persona-Chat (real, persona schema)": lambda r: r.writer.startswith("spc")}


def spc_turns(path: Path, rows: range) -> list[tuple[str, str]]:
    """(User 2's turn before, User 1's turn) of the given conversations."""
    import csv

    out = []
    with path.open(newline="") as f:
        for k, rec in enumerate(csv.DictReader(f)):
            if k not in rows:
                continue
            before = ""
            for line in rec["Best Generated Conversation"].splitlines():
                who, _, text = line.partition(":")
                if who.strip() == "User 1" and text.strip():
                    out.append((before, text.strip()))
                elif text.strip():
                    before = text.strip()
    return out


def chat_stores(extractor, turns: list[tuple[str, str]]) -> tuple[int, int]:
    """Turns of chit-chat from which the in-car schema stores a lasting preference, of all turns read."""
    from boundmem.schema.load import builtin_schema

    convs = [Conversation(id=f"c{k}", turns=((Turn(role="assistant", text=ctx),) if ctx else ()) +
                          (Turn(role="user", text=text),)) for k, (ctx, text) in enumerate(turns)]
    found = extract_in_slices(extractor, convs, builtin_schema())
    return sum(any(c.evidence == "stated" for c in cands) for cands in found), len(convs)


def speed(extractor, embedder, texts: list[str], rounds: int = 3) -> dict:
    """Median cost of reading one turn and of one query embedding, interleaved, one thread each."""
    from boundmem.schema.load import builtin_schema

    schema = builtin_schema()
    extractor.warm(schema)
    embedder.encode_uncached(["warm"])
    read, emb = [], []
    for _ in range(rounds):
        for k, t in enumerate(texts):
            conv = Conversation(id=f"s{k}", turns=(Turn(role="user", text=t),))
            t0 = time.perf_counter()
            extractor.extract(conv, schema)
            read.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            embedder.encode_uncached([t + " "])
            emb.append(time.perf_counter() - t0)
    long = Conversation(id="long", turns=tuple(Turn(role="user" if k % 2 == 0 else "assistant", text=texts[k % len(texts)])
                                               for k in range(2000)))
    n = 0
    while sum(len(t.text) for t in long.turns[:n]) < 20_000:
        n += 1
    long = Conversation(id="long", turns=long.turns[:n])
    t0 = time.process_time()
    extractor.extract(long, schema)
    return {"read_ms": 1000 * statistics.median(read), "embed_ms": 1000 * statistics.median(emb),
            "ratio": statistics.median(read) / statistics.median(emb),
            "long_chars": sum(len(t.text) for t in long.turns), "long_cpu_s": time.process_time() - t0}


def report(tallies: dict[str, Tally], extra: list[str]) -> str:
    lines = ["# The reader on annotated turns", ""]
    for name, tally in tallies.items():
        lines += [f"## {name}", "", *table(tally), ""]
    return "\n".join(lines + extra) + "\n"


def register(app: typer.Typer) -> None:
    @app.command("reader")
    def reader(split: str = typer.Option("heldout", "--split", help="heldout | dev | train"),
               slurp: Optional[Path] = typer.Option(None, "--slurp", help="SLURP devel_slots.jsonl (its held-out half)."),
               spc: Optional[Path] = typer.Option(None, "--spc", help="Synthetic-Persona-Chat valid.csv (chat false stores)."),
               extractor: str = typer.Option("local", "--extractor"),
               out: Path = typer.Option(Path("bench-out/reader"), "--out")):
        """The reader per kind and style (held-out writers by default), SLURP and chat false stores, its speed."""
        from boundmem.embed.registry import make_embedder
        from boundmem.extract.registry import make_extractor

        settings = Settings()
        emb = make_embedder("minilm", settings)
        ex = make_extractor(extractor, settings, emb)
        rows = [r for r in read_jsonl(annotated_files()) if r.split == split]
        tallies = {name: run(ex, [r for r in rows if keep(r)]) for name, keep in GROUPS.items()}
        tallies = {k: v for k, v in tallies.items() if sum(v.cases.values())}
        extra: list[str] = []
        result: dict = {"split": split, "machine": machine_info()}
        if slurp:
            half = [r for r in slurp_rows(slurp) if r.split == ("heldout" if split == "heldout" else "train")]
            tallies["SLURP devel (real spoken commands)"] = run(ex, half)
        if spc:
            k, n = chat_stores(ex, spc_turns(spc, range(500, 960)))
            result["chat_stored"] = [k, n]
            extra.append(f"Chit-chat read with the in-car schema (Synthetic-Persona-Chat conversations 500-959, User 1's "
                         f"turns): a lasting preference stored from {k}/{n} turns ({k / max(1, n):.1%}).")
        texts = [r.text for r in rows[:200]]
        result["speed"] = s = speed(ex, emb, texts)
        extra.append(f"Speed (one run, one thread): reading a turn {s['read_ms']:.1f} ms median, one query embedding "
                     f"{s['embed_ms']:.1f} ms: **{s['ratio']:.2f}x**; a {s['long_chars']:,}-character conversation "
                     f"{s['long_cpu_s']:.2f} s CPU.")
        md = report(tallies, extra)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(md)
        result["tallies"] = {k: {"right": sum(v.right.values()), "cases": sum(v.cases.values()), **v.counts,
                                 "f1": v.f1(), "detail_f1": v.detail_f1()} for k, v in tallies.items()}
        (out / "results.json").write_text(json.dumps(result, indent=1, default=str))
        write_results("reader", out, md, headline(result, split), summary=result, machine=result["machine"])
        typer.echo(md)


def headline(result: dict, split: str) -> list[Figure]:
    """README's figures of a reader run: F1 on the written turns and false stores on SLURP's spoken commands; the
    other groups, chit-chat and the speed on the page."""
    figs = []
    for name, t in result["tallies"].items():
        if name.startswith("SLURP"):   # commands carry no preference: every store is a false one
            figs.append(Figure(f"reader, {name}: turns with a false store", t.get("false_store", 0) / max(1, t["cases"]), "pct"))
        else:
            figs += [Figure(f"reader, {name}, {split} writers: turns read right", t["right"] / max(1, t["cases"]), "pct",
                            readme=name == "written"),
                     Figure(f"reader, {name}, {split} writers: F1", t["f1"], readme=name == "written")]
    if "chat_stored" in result:
        k, n = result["chat_stored"]
        figs.append(Figure("reader, chit-chat turns stored as a preference", k / max(1, n), "pct", readme=False))
    figs.append(Figure("reader: reading a turn, in query embeddings", result["speed"]["ratio"], ".2f", "x", readme=False))
    return figs
