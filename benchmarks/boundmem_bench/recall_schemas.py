"""Recall request sets per schema (`recall_data/*.yaml`): related, unrelated and own-value requests, asked by users
who hold a few of the schema's preferences, and how the recall gate answers them.

Each file names a schema and a pool of stated preferences, and per writer three lists (recall_data/FORMAT.md):
related requests with the preferences that are the right memory, unrelated requests no preference should shape,
and commands that name their own value. A related request is asked by a user who holds its preferences and three
others of other subcategories; an unrelated one by a user with four; an own-value command twice: by a user who holds
a like of the same subcategory (nothing should come back), and, where the file names one, by a user who also holds
a dislike of the named value, stated last (that dislike should come first, so the assistant can ask; in a
category that holds one preference it replaces the like).

Held out: whole schemas (`HELD_OUT_SCHEMAS`) and whole writers (`HELD_OUT_WRITERS`); a calibration may read only
the other schemas' other writers.

With episodes (`run(episodes=True)`, `boundmem bench recall --per-schema`), every user also holds the episodes of
three past sessions (`recall_data/episodes/past.yaml`), recall goes through `Memory.recall_all` (one gate, both
kinds, one cap), and each schema adds questions about that past, which must get the right episode first; unrelated
requests and own-value commands must then get no episode either.
"""
from __future__ import annotations

import random
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import yaml

DATA = Path(__file__).resolve().parent / "recall_data"
PAST = DATA / "episodes" / "past.yaml"
TUESDAY, FRIDAY = "2024-05-07", "2024-05-10"
HELD_OUT_SCHEMAS = frozenset({"support"})
HELD_OUT_WRITERS = frozenset({"w3"})
SEED = 34


@dataclass(frozen=True)
class Pref:
    path: str
    attribute: str
    polarity: str
    sentence: str


@dataclass(frozen=True)
class SchemaCase:
    schema: str
    writer: str
    kind: str                  # related, unrelated, own_value, constrained
    text: str
    prefs: tuple[Pref, ...]    # what the asking user holds
    expect: tuple[str, ...]    # paths of the right first memory; empty: nothing should come back

    @property
    def held_out(self) -> bool:
        return self.schema in HELD_OUT_SCHEMAS or self.writer in HELD_OUT_WRITERS


def load_set(path: Path):
    """(schema, cases) of one request file."""
    from boundmem.schema.load import builtin_schema, load_schema

    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    ref = str(doc["schema"])
    schema = builtin_schema(ref.split(":", 1)[1]) if ref.startswith("builtin:") else load_schema(path.parent.parent / ref)
    pool = {k: Pref(*v) for k, v in doc["prefs"].items()}
    rng = random.Random(f"{SEED}:{schema.name}")

    def sub(p: Pref) -> str:
        return "/".join(p.path.split("/")[:2])

    def others(held: Sequence[Pref], n: int) -> tuple[Pref, ...]:
        subs = {sub(p) for p in held}
        free = [p for k, p in sorted(pool.items()) if sub(p) not in subs]
        return tuple(rng.sample(free, min(n, len(free))))

    out: list[SchemaCase] = []
    for writer, sets in doc["writers"].items():
        for text, ids in sets.get("related", []):
            held = tuple(pool[i] for i in ids)
            out.append(SchemaCase(schema.name, writer, "related", text, held + others(held, 3),
                                  tuple(p.path for p in held)))
        for text in sets.get("unrelated", []):
            out.append(SchemaCase(schema.name, writer, "unrelated", text, others((), 4), ()))
        for item in sets.get("own_value", []):
            held = (pool[item["holds"]],)
            out.append(SchemaCase(schema.name, writer, "own_value", item["text"], held + others(held, 2), ()))
            if item.get("avoid"):
                path, value = item["avoid"]
                dis = Pref(path, value, "dislike", f"I can't stand {value}.")
                out.append(SchemaCase(schema.name, writer, "constrained", item["text"],
                                      held + others(held + (dis,), 2) + (dis,), (path,)))
    return schema, out


def load_sets(data: Path = DATA) -> list[tuple[object, list[SchemaCase]]]:
    return [load_set(p) for p in sorted(data.glob("*.yaml"))]


def store_case_users(mem, cases: Sequence[SchemaCase], prefix: str = "u") -> list[str]:
    """One user per case holding the case's preferences; their ids, in case order."""
    from boundmem.models import Candidate
    from boundmem.schema.model import CategoryPath

    ids = []
    for n, c in enumerate(cases):
        uid = f"{prefix}{n}"
        cands = [Candidate(path=CategoryPath(**dict(zip(("main", "sub", "detail"), p.path.split("/")))),
                           attribute=p.attribute, sentence=p.sentence, polarity=p.polarity) for p in c.prefs]
        mem.apply(cands, uid, f"recall-schemas-{uid}")
        ids.append(uid)
    return ids


def right_first(case: SchemaCase, got: Sequence[str]) -> bool:
    return bool(got) and any(got[0] == t or got[0].startswith(t + "/") for t in case.expect)


def past_cases(schema: str, pool: Sequence[Pref]) -> list[SchemaCase]:
    """Questions about the past sessions, asked by users holding two of the schema's preferences; `expect` holds the
    words the first episode must contain."""
    doc = yaml.safe_load(PAST.read_text(encoding="utf-8"))
    rng = random.Random(f"{SEED}:past:{schema}")
    return [SchemaCase(schema, "past", "past", text, tuple(rng.sample(list(pool), min(2, len(pool)))), (want,))
            for text, want in doc["questions"]]


def _episodes(mem, users: Sequence[str]) -> None:
    from datetime import date

    talks = yaml.safe_load(PAST.read_text(encoding="utf-8"))["talks"]
    for uid in users:
        for n, talk in enumerate(talks):
            mem.remember_episode(talk, uid, day=date.fromisoformat(TUESDAY), conversation_id=f"past-{uid}-{n}")


def evaluate(mem, schema_cases: Sequence[SchemaCase], recall=None, tokens=None, episodes: bool = False) -> list[dict]:
    """One row per case: the paths recall returned (`recall(mem, text, user)`, default `Memory.recall`), whether
    that is right, and the tokens the formatted memory would add to a prompt (`tokens(text)`, when given). With
    `episodes`, each user also holds the past sessions' episodes and recall is `Memory.recall_all` (a "past" case is
    right when its first episode holds the expected words)."""
    from datetime import date

    from boundmem.retrieve.format import MemoryFormat

    fmt = MemoryFormat()
    users = store_case_users(mem, schema_cases)
    if episodes:
        _episodes(mem, users)
    rows = []
    for c, uid in zip(schema_cases, users):
        eps: list[str] = []
        if episodes:
            got_all = mem.recall_all(c.text, uid, today=date.fromisoformat(FRIDAY))
            hits = got_all.preferences
            eps = [h.episode.text for h in (got_all.episodes.hits if got_all.episodes else [])]
        else:
            hits = recall(mem, c.text, uid) if recall is not None else mem.recall(c.text, uid)
        got = [str(h.preference.path) for h in hits]
        if c.kind == "past":
            ok = bool(eps) and c.expect[0].lower() in eps[0].lower()
        else:
            ok = right_first(c, got) if c.expect else not got
        added = tokens(fmt.preferences(mem.schema, hits)) if tokens is not None and hits else 0
        rows.append({"schema": c.schema, "writer": c.writer, "held_out": c.held_out, "kind": c.kind, "text": c.text,
                     "expect": list(c.expect), "got": got, "ok": ok, "tokens_added": added,
                     "episodes": eps if episodes else None, "why": [h.why for h in hits]})
    return rows


def summarise(rows: Sequence[dict]) -> dict:
    """Per schema and part (visible / held out): related hit@1, unrelated empty, own-value empty, constrained
    hit@1 (the dislike of the named value first), tokens added (mean over the cases that got memory)."""
    out: dict[str, dict] = {}
    for schema in sorted({r["schema"] for r in rows}):
        for part in ("visible", "held_out"):
            rs = [r for r in rows if r["schema"] == schema and r["held_out"] == (part == "held_out")]
            if not rs:
                continue
            s: dict[str, object] = {}
            for kind, name in (("related", "related_hit@1"), ("unrelated", "unrelated_empty"),
                               ("own_value", "own_value_empty"), ("constrained", "constrained_hit@1")):
                ks = [r["ok"] for r in rs if r["kind"] == kind]
                if ks:
                    s[name] = round(sum(ks) / len(ks), 3)
                    s[name.split("_")[0] + "_n"] = len(ks)
            for kind, name in (("unrelated", "unrelated_episodes_empty"), ("own_value", "own_value_episodes_empty")):
                es = [not r["episodes"] for r in rs if r["kind"] == kind and r.get("episodes") is not None]
                if es:
                    s[name] = round(sum(es) / len(es), 3)
            ps = [r["ok"] for r in rs if r["kind"] == "past"]
            if ps:
                s["past_episode_hit@1"] = round(sum(ps) / len(ps), 3)
                s["past_n"] = len(ps)
            toks = [r["tokens_added"] for r in rs if r["got"]]
            s["tokens_added_mean"] = round(statistics.mean(toks), 1) if toks else 0.0
            out[f"{schema}/{part}"] = s
    return out


def markdown(summary: dict) -> str:
    lines = ["| schema / part | related hit@1 | unrelated empty | own-value empty | constrained hit@1 | tokens added | "
             "unrelated: no episode | own-value: no episode | past: episode first |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for k, s in summary.items():
        def f(name: str) -> str:
            v: Optional[float] = s.get(name)  # type: ignore[assignment]
            n = s.get(name.split("_")[0] + "_n")
            return "-" if v is None else f"{v:.3f} ({n})"
        def e(name: str) -> str:
            v = s.get(name)
            return "-" if v is None else f"{v:.3f}"
        lines.append(f"| {k} | {f('related_hit@1')} | {f('unrelated_empty')} | {f('own_value_empty')} | "
                     f"{f('constrained_hit@1')} | {s['tokens_added_mean']} | {e('unrelated_episodes_empty')} | "
                     f"{e('own_value_episodes_empty')} | {f('past_episode_hit@1')} |")
    return "\n".join(lines) + "\n"


def run(embedder: str = "minilm", data: Path = DATA, work: Optional[Path] = None,
        episodes: bool = False) -> tuple[dict, list[dict]]:
    import tempfile

    from boundmem.config import EpisodicSettings, Settings
    from boundmem.memory import build_memory

    from .recall import _tokens

    settings = Settings.from_env()
    if episodes:
        settings = settings.model_copy(update={"episodic": EpisodicSettings(enabled=True)})
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(work or tmp)
        count = _tokens()
        for schema, cs in load_sets(data):
            if episodes:
                pool = sorted({p for c in cs for p in c.prefs if p.polarity == "like"}, key=lambda p: p.path)
                cs = cs + past_cases(schema.name, pool)
            mem = build_memory(settings, db=base / f"{schema.name}.db", schema=schema, embedder=embedder)
            try:
                rows += evaluate(mem, cs, tokens=count, episodes=episodes)
            finally:
                mem.close_jobs()
                mem.store.close()
    return summarise(rows), rows


if __name__ == "__main__":
    import json
    import sys

    summary, rows = run(episodes="--episodes" in sys.argv)
    print(markdown(summary))
    sys.argv = [a for a in sys.argv if a != "--episodes"]
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text("".join(json.dumps(r) + "\n" for r in rows))
