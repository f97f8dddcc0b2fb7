"""`boundmem bench challenge`: what a new user's memory holds after each challenge conversation.

Each conversation of the challenge sets (`boundmem_bench/challenge_data/`, see its FORMAT.md) goes through the real
`Memory` facade (`Memory.add`: extract -> maintain -> store) into a fresh user of one temporary SQLite store;
the user's stored preferences are then compared with the conversation's `expected` (challenge_metrics.py).
Optionally every SLURP devel sentence is ingested the same way as a one-turn conversation with the in-car
schema: nothing should be stored from a voice command, except possibly for the music like/dislike intents.
Every figure is given for the `train` and `heldout` splits separately and for both together.
"""
from __future__ import annotations

import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Optional

import typer
from pydantic import BaseModel, Field

from boundmem.cli.options import cli_settings
from boundmem.config import Settings
from boundmem.models import Conversation, Turn
from boundmem.schema.load import builtin_schema
from .carmem import EMBEDDERS, EXTRACTORS, MAINTAINERS, Components, build_components, extractor_stats
from .challenge_sets import (KINDS, SETS, SLURP_PREFERENCE_INTENTS, SPLITS, STYLES, ChallengeDataError, ChallengeItem,
                             ChallengeSet, available_sets, default_data_dir, load_set, load_slurp)
from .challenge_metrics import (Pref, fabricated, score_case, score_conversation, slurp_summary,
                                summarise, summarise_values)
from .report import Report, Stopwatch, fmt, machine_info, progress, timing_section, track, write_json
from .results import Figure, write_results

SetChoice = Literal["incar", "travel", "incar-words", "smarthome", "chat", "chat-travel", "chat-smarthome", "all"]
SplitChoice = Literal["train", "heldout", "all"]


class ChallengeConfig(BaseModel):
    set: SetChoice = "all"
    slurp: Optional[Path] = None
    split: SplitChoice = "all"
    out: Path = Path("bench-out/challenge")
    data_dir: Optional[Path] = None  # None = the packaged challenge_data
    extractor: str = "local"
    maintainer: str = "local"
    embedder: str = "minilm"
    show_progress: bool = True
    settings: Settings = Field(default_factory=Settings, exclude=True)  # the command's (environment); not reported


def _splits(cfg: ChallengeConfig) -> list[str]:
    return [*SPLITS, "all"] if cfg.split == "all" else [cfg.split]


def _in_split(split: str, chosen: str) -> bool:
    return chosen == "all" or split == chosen


# --- ingest ----------------------------------------------------------------------------------
def _pref_json(p: Any) -> dict[str, Any]:
    return {"path": str(p.path), "attribute": p.attribute, "polarity": getattr(p, "polarity", "like"),
            "sentence": p.sentence}


def ingest(mem: Any, user: str, conversation: Conversation | tuple[Conversation, ...]) -> dict[str, Any]:
    """One conversation, or a user's several in order, into a fresh user through `Memory.add`; what the user's
    memory holds afterwards (preferences, and observations when the memory keeps them: `observed` None if not),
    and what each ingest promoted."""
    convs = conversation if isinstance(conversation, tuple) else (conversation,)
    decisions: list[dict] = []
    promoted: list[dict] = []
    error = None
    for conv in convs:
        try:
            res = mem.add(conv, user=user)
        except Exception as e:  # noqa: BLE001 - one failing ingest (e.g. an LLM error) is counted, the run goes on
            error = error or f"{type(e).__name__}: {e}"
            continue
        decisions += [{"action": d.action, "path": str(d.candidate.path), "attribute": d.candidate.attribute,
                       "polarity": d.candidate.polarity, "evidence": d.candidate.evidence} for d in res.decisions]
        promoted += [_pref_json(p) | {"conversation": conv.id} for p in getattr(res, "promoted", [])]
    stored = [_pref_json(p) for p in mem.preferences(user)]
    observations = getattr(mem, "observations", None)
    observed = [_pref_json(o) for o in observations(user)] if callable(observations) else None
    return {"stored": stored, "observed": observed, "promoted": promoted if observed is not None else None,
            "decisions": decisions, "error": error}


def schema_items(schema: Any) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """(path -> listed items of each closed category, path -> listed items of every category)."""
    closed, listed = {}, {}
    for ref in schema.details():
        items = tuple(ref.detail.attributes)
        listed[str(ref.path)] = items
        if ref.detail.value_kind == "closed":
            closed[str(ref.path)] = items
    return closed, listed


def _expected_json(it: ChallengeItem) -> list[dict]:
    return [{"path": str(e.path), "attribute": e.attribute, "polarity": e.polarity, "accept": list(e.accept)}
            for e in it.expected]


def _prefs_of(rows: Optional[list[dict]]) -> Optional[list[Pref]]:
    return None if rows is None else [Pref(path=r["path"], attribute=r["attribute"], polarity=r["polarity"]) for r in rows]


def user_text(convs: tuple[Conversation, ...]) -> str:
    return "\n".join(t.text for c in convs for t in c.turns if t.role == "user")


def score_item(it: ChallengeItem, got: dict[str, Any], items: tuple[dict, dict] = ({}, {})) -> dict[str, Any]:
    """`items`: `schema_items(schema)` of the set (closed items for fabricated values, listed items for fragments)."""
    expected = _expected_json(it)
    exp, stored = [Pref(**e) for e in expected], _prefs_of(got["stored"]) or []
    sc = score_conversation(exp, stored)
    exp_obs = None if it.expected_observed is None else [
        Pref(path=str(e.path), attribute=e.attribute, polarity=e.polarity, accept=e.accept) for e in it.expected_observed]
    sc["values"] = score_case(it.kind, exp, stored, user_text(it.conversations), items[0], items[1],
                               promoted=_prefs_of(got.get("promoted")), observed=_prefs_of(got.get("observed")),
                               expected_observed=exp_obs)
    turns = [[{"role": t.role, "text": t.text} for t in c.turns] for c in it.conversations]
    return {"id": it.id, "set": it.set, "split": it.split, "style": it.style, "kind": it.kind,
            "file": Path(it.file).name, "line": it.line, "note": it.note,
            "turns": [t for c in turns for t in c], "conversations": len(turns),
            "expected": expected, "expected_observed": None if exp_obs is None else [
                {"path": e.path, "attribute": e.attribute, "polarity": e.polarity} for e in exp_obs],
            **got, "score": sc}


def _flat(rec: dict) -> dict:
    return {**rec["score"], "kind": rec["kind"], "style": rec["style"]}


def summarise_set(records: list[dict], splits: list[str]) -> dict[str, Any]:
    return {sp: summarise([_flat(r) for r in records if sp == "all" or r["split"] == sp], KINDS, STYLES)
            | {"errors": sum(1 for r in records if r["error"] and (sp == "all" or r["split"] == sp)),
               "values": summarise_values([r["score"]["values"] for r in records if sp == "all" or r["split"] == sp])}
            for sp in splits}


# --- the run ---------------------------------------------------------------------------------
def run_challenge(cfg: ChallengeConfig, components: Optional[Components] = None) -> dict[str, Any]:
    """Run the chosen sets (and SLURP), write report.md and results.json into cfg.out, return the results."""
    from boundmem.memory import Memory
    from boundmem.store.sqlite import SQLiteStore

    watch, machine = Stopwatch(), machine_info()
    data_dir = Path(cfg.data_dir) if cfg.data_dir else default_data_dir()
    with watch.stage("load data + components"):
        names = available_sets(data_dir) if cfg.set == "all" else [cfg.set]
        sets: list[ChallengeSet] = [load_set(n, data_dir) for n in names]
        slurp = [s for s in load_slurp(cfg.slurp) if _in_split(s.split, cfg.split)] if cfg.slurp else []
        if not sets and not slurp:
            raise ChallengeDataError(str(data_dir), f"no challenge data file there ({', '.join(f for s in SETS.values() for f in s.files)})"
                                                    " and no --slurp file")
        comp = components or build_components(cfg)  # type: ignore[arg-type]  # reads extractor/maintainer/embedder
    splits = _splits(cfg)
    results: dict[str, Any] = {"sets": {}, "slurp": None}
    with progress(cfg.show_progress) as prog, tempfile.TemporaryDirectory(prefix="challenge-bench-") as tmp:
        stores: list[SQLiteStore] = []

        def fresh_store(name: str) -> SQLiteStore:   # one per schema: a store records the schema that filled it
            stores.append(SQLiteStore(Path(tmp) / f"{name}.db"))
            return stores[-1]

        try:
            for cs in sets:
                mem = Memory(schema=cs.schema, store=fresh_store(cs.name), extractor=comp.extractor, maintainer=comp.maintainer,
                             embedder=comp.embedder)
                with watch.stage(f"warm ({cs.name} schema)"):
                    mem.warm()
                items = [it for it in cs.items if _in_split(it.split, cfg.split)]
                sch_items = schema_items(cs.schema)
                with watch.stage(f"ingest {cs.name}"):
                    records = [score_item(it, ingest(mem, f"{cs.name}.{it.id}", it.conversations), sch_items)
                               for it in track(prog, items, f"{cs.name}: ingest")]
                results["sets"][cs.name] = {
                    "schema": cs.schema.name, "zero_shot": cs.zero_shot, "files": list(cs.files),
                    "missing_files": list(cs.missing_files), "n": len(records),
                    "summary": summarise_set(records, splits), "items": records}
            if slurp:
                mem = Memory(schema=builtin_schema(), store=fresh_store("slurp"), extractor=comp.extractor, maintainer=comp.maintainer,
                             embedder=comp.embedder)
                with watch.stage("warm (SLURP, incar schema)"):
                    mem.warm()
                closed, _ = schema_items(builtin_schema())
                with watch.stage("ingest SLURP"):
                    rows = []
                    for s in track(prog, slurp, "SLURP: ingest"):
                        conv = Conversation(id=s.id, turns=(Turn(role="user", text=s.sentence),))
                        got = ingest(mem, f"slurp.{s.slurp_id}", conv)
                        held = _prefs_of(got["stored"]) or []
                        got["fabricated"] = [held[j].attribute for j in fabricated(held, [], s.sentence, closed)]
                        rows.append({"slurp_id": s.slurp_id, "split": s.split, "intent": s.intent, "scenario": s.scenario,
                                     "sentence": s.sentence, **got})
                results["slurp"] = {
                    "file": str(cfg.slurp), "excluded_intents": list(SLURP_PREFERENCE_INTENTS),
                    "summary": {sp: slurp_summary([r for r in rows if sp == "all" or r["split"] == sp], SLURP_PREFERENCE_INTENTS)
                                | {"errors": sum(1 for r in rows if r["error"] and (sp == "all" or r["split"] == sp)),
                                   "fabricated": sum(len(r["fabricated"]) for r in rows if sp == "all" or r["split"] == sp)}
                                for sp in splits},
                    "items": rows}
        finally:
            for store in stores:
                store.close()
    results["config"] = cfg.model_dump(mode="json") | {
        "data_dir": str(data_dir), "extractor_class": type(comp.extractor).__name__,
        "extractor_stats": extractor_stats(comp.extractor),
        "maintainer_class": type(comp.maintainer).__name__, "embedder_class": type(comp.embedder).__name__}
    results["machine"] = machine
    results["timing"] = watch.summary()
    out = Path(cfg.out)
    write_json(out / "results.json", results)
    render_report(results, watch, machine).write(out / "report.md")
    return results


# --- report ----------------------------------------------------------------------------------
def _rate(k: Optional[int], n: Optional[int], r: Optional[float]) -> str:
    return "–" if not n else f"{fmt(r, pct=True)} ({k}/{n})"


def _turn_text(rec: dict) -> str:
    text = " / ".join(f"{'U' if t['role'] == 'user' else 'A'}: {t['text']}" for t in rec["turns"])
    return text if len(text) <= 160 else text[:159] + "…"


def _prefs(prefs: list[dict]) -> str:
    return "; ".join(f"{p['path']} = {('not ' if p.get('polarity') == 'dislike' else '')}{p['attribute']}"
                     for p in prefs) or "(nothing)"


def _set_section(rep: Report, name: str, data: dict, splits: list[str]) -> None:
    summ = data["summary"]
    rep.h2(f"Set `{name}` (schema `{data['schema']}`{', zero-shot' if data['zero_shot'] else ''})")
    counts = ", ".join(f"{sp} {summ[sp]['n']}" for sp in splits)
    rep.para(f"Files: {', '.join(data['files'])}"
             + (f"; **not there yet: {', '.join(data['missing_files'])}**" if data["missing_files"] else "")
             + f". Conversations: {counts}."
             + (" Ingest errors (an ingest is one transaction: nothing stored for those): "
                + ", ".join(f"{sp} {summ[sp]['errors']}" for sp in splits) + "."
                if any(summ[sp]["errors"] for sp in splits) else ""))
    rep.h3("Categories: precision / recall / F1 (micro over (conversation, path prefix) pairs)")
    rows = []
    for sp in splits:
        for lv in ("main", "sub", "detail"):
            m = summ[sp][lv]
            rows.append([sp, lv, m["precision"], m["recall"], m["f1"], m["tp"], m["fp"], m["fn"]])
    rep.table(["split", "level", "P", "R", "F1", "TP", "FP", "FN"], rows)
    rep.h3("Attributes and polarity (over detail-level matches)")
    rep.table(["split", "detail matches", "attribute + polarity right", "accuracy", "expected dislikes matched",
               "… stored right", "**dislike stored as like**"],
              [[sp, summ[sp]["attribute"]["matches"], summ[sp]["attribute"]["correct"], summ[sp]["attribute"]["accuracy"],
                summ[sp]["dislike"]["matches"], summ[sp]["dislike"]["correct"], summ[sp]["dislike"]["stored_as_like"]]
               for sp in splits])
    rep.h3("False stores and recall by kind and by style")
    rep.para("False-store rate: over the conversations that expect nothing, the share where anything was stored. "
             "Recall: detail-level, over the expected preferences of the conversations that expect some. "
             "Attribute accuracy: as above, over that kind's detail matches. Stored something unexpected: conversations "
             "that expect something but also stored a preference that matches none of the expected ones (another "
             "category, or a second value in the expected one, e.g. the other person's).")
    rep.table(["split", "conversations expecting nothing", "false stores", "false-store rate"],
              [[sp, summ[sp]["false_store"]["n"], summ[sp]["false_store"]["stored"],
                fmt(summ[sp]["false_store"]["rate"], pct=True)] for sp in splits])
    for key, values in (("by_kind", KINDS), ("by_style", STYLES)):
        rows = []
        for v in values:
            groups = [summ[sp][key][v] for sp in splits]
            if not any(g["n"] for g in groups):
                continue
            if any(g["false_store"]["n"] for g in groups):
                rows.append([v, "false-store rate"] + [_rate(g["false_store"]["stored"], g["false_store"]["n"],
                                                             g["false_store"]["rate"]) for g in groups])
            if any(g["expecting"] for g in groups):
                rows.append([v, "detail recall"] + [fmt(g["detail_recall"]) + f" ({g['expecting']} conv.)" if g["expecting"]
                                                    else "–" for g in groups])
                rows.append([v, "attribute accuracy"] + [fmt(g["attribute_accuracy"]) + f" ({g['attribute_matches']} matches)"
                                                         if g["attribute_matches"] else "–" for g in groups])
                rows.append([v, "stored something unexpected"] + [
                    _rate(g["stored_unexpected"], g["expecting"], g["stored_unexpected_rate"]) for g in groups])
        rep.table([key.replace("by_", ""), "measure", *splits], rows)
    _values_section(rep, summ, splits)
    items = data["items"]
    fab = [r for r in items if r["score"]["values"]["fabricated"]]
    if fab:
        rep.h3(f"Fabricated values ({len(fab)} cases{', first 25' if len(fab) > 25 else ''})")
        rep.table(["id", "split", "kind", "conversation", "expected", "fabricated"],
                  [[r["id"], r["split"], r["kind"], _turn_text(r), _prefs(r["expected"]),
                    "; ".join(r["score"]["values"]["fabricated"])] for r in fab[:25]])
    wrong = [r for r in items if r["score"]["expects_none"] and r["stored"]]
    dis = [r for r in items if r["score"]["dislike_as_like"]]
    missed = [r for r in items if r["score"]["levels"]["detail"]["fn"]]
    for title, sel in (("False stores", wrong), ("Dislikes stored as likes", dis), ("Expected preferences not stored", missed)):
        if not sel:
            continue
        rep.h3(f"{title} ({len(sel)}{', first 25' if len(sel) > 25 else ''}; all in results.json)")
        rep.table(["id", "split", "style", "kind", "conversation", "expected", "stored"],
                  [[r["id"], r["split"], r["style"], r["kind"], _turn_text(r), _prefs(r["expected"]), _prefs(r["stored"])]
                   for r in sel[:25]])


def _share(d: Optional[dict]) -> str:
    return "–" if not d or not d["n"] else f"{fmt(d['rate'], pct=True)} ({d['right']}/{d['n']})"


def _values_section(rep: Report, summ: dict, splits: list[str]) -> None:
    """The value figures of one set, a row per measure, a column per split ("–": no case of that kind here)."""
    vals = {sp: summ[sp]["values"] for sp in splits}
    rep.h3("Values the user said, polarity, change of mind, promotion")
    rep.para("Fabricated: a stored value whose content words (lightly stemmed, stopwords and the words every listed "
             "item of its category shares left out) are not all in the user's turns, unless it is a listed item of a "
             "closed category that the gold says the user's words implied. Polarity flip: a stored value the gold "
             "expects in that category with the other polarity. Open values / negation: the case's final state is "
             "exactly the gold (values and polarities, nothing else). Change of mind: every expected like held, an "
             "expected dislike held as one or not held, nothing else in those categories. Promotion: over the choice "
             "cases, promoted preferences that a repeated-choice gold expects (precision) and expected ones promoted "
             "(recall). Fragment: a value made only of stopwords/pronouns/negation words or starting/ending with a "
             "function word ('not living', 'your watch'), listed items excepted.")
    rows: list[list] = [
        ["fabricated values (cases)"] + [f"{vals[sp]['fabricated']['n']} ({vals[sp]['fabricated']['cases']})" for sp in splits],
        ["polarity flips"] + [vals[sp]["polarity_flips"] for sp in splits],
        ["fragment values / stored"] + [f"{vals[sp]['fragments']['n']} / {vals[sp]['fragments']['of_stored']}" for sp in splits]]
    for key, label in (("open_values_right", "open values in the user's words"),
                       ("no_value_nothing_stored", "requests naming no value: nothing stored"),
                       ("negation_right", "negation right"), ("change_of_mind_right", "change of mind: final state right")):
        if any(vals[sp][key]["n"] for sp in splits):
            rows.append([label] + [_share(vals[sp][key]) for sp in splits])
    kinds = summ[splits[-1]]["by_kind"]
    if kinds.get("chat", {}).get("n"):
        rows.append(["chat messages: false-store rate"] + [
            _rate(summ[sp]["by_kind"]["chat"]["false_store"]["stored"], summ[sp]["by_kind"]["chat"]["false_store"]["n"],
                  summ[sp]["by_kind"]["chat"]["false_store"]["rate"]) for sp in splits])
    if any(summ[sp]["by_kind"][k]["n"] for sp in splits for k in ("repeated_choice", "mixed_choices", "single_choice",
                                                                   "not_evidence")):
        if all(vals[sp]["promotion"] is None for sp in splits):
            rows.append(["promotion", *["not measured: the memory keeps no observations"] * len(splits)])
        else:
            pro = {sp: vals[sp]["promotion"] or {} for sp in splits}
            rows += [["promotion precision"] + [_rate(pro[sp].get("right"), pro[sp].get("promoted"), pro[sp].get("precision"))
                                                for sp in splits],
                     ["promotion recall"] + [_rate(pro[sp].get("found"), pro[sp].get("expected"), pro[sp].get("recall"))
                                             for sp in splits],
                     ["single or mixed choices promoted (cases)"] + [pro[sp].get("single_or_mixed_promoted", "–") for sp in splits],
                     ["not-evidence cases promoted"] + [pro[sp].get("not_evidence_promoted", "–") for sp in splits],
                     ["observations held as expected"] + [_share(vals[sp].get("observations_right")) for sp in splits]]
    rep.table(["measure", *splits], rows)


def _slurp_section(rep: Report, data: dict, splits: list[str]) -> None:
    summ = data["summary"]
    rep.h2("SLURP devel (one-turn voice commands, in-car schema)")
    rep.para(f"`{data['file']}`: each sentence is ingested as a one-turn conversation of a fresh user. Split: "
             f"heldout = slurp_id % 3 == 0, train = the rest. Every store counts as false, except for the intents "
             f"{', '.join(data['excluded_intents'])} (a genuine music preference may be stated there), which are excluded "
             f"from the rates and listed below. SLURP: Bastianelli et al., EMNLP 2020 (text CC BY 4.0).")
    rep.table(["split", "sentences", "with a store", "false-store rate", "preferences stored", "fabricated values",
               "errors"],
              [[sp, summ[sp]["n"], summ[sp]["stored"], fmt(summ[sp]["rate"], pct=True), summ[sp]["preferences_stored"],
                summ[sp]["fabricated"], summ[sp]["errors"]] for sp in splits])
    per = {sp: {d["intent"]: d for d in summ[sp]["by_intent"]} for sp in splits}
    order = [d["intent"] for d in summ[splits[-1]]["by_intent"]]
    shown = [i for i in order if per[splits[-1]][i]["stored"]]
    rep.h3(f"False-store rate by intent, worst first ({len(shown)} of {len(order)} intents stored anything)")
    rep.table(["intent", *splits], [[i] + [_rate(per[sp][i]["stored"], per[sp][i]["n"], per[sp][i]["rate"])
                                           if i in per[sp] else "–" for sp in splits] for i in shown])
    rows = [r for r in data["items"] if r["intent"] in data["excluded_intents"]]
    if rows:
        rep.h3("Music like/dislike intents (not counted): what was stored")
        rep.table(["slurp_id", "split", "intent", "sentence", "stored"],
                  [[r["slurp_id"], r["split"], r["intent"], r["sentence"], _prefs(r["stored"])] for r in rows])
    wrong = [r for r in data["items"] if r["intent"] not in data["excluded_intents"] and r["stored"]]
    if wrong:
        rep.h3(f"False stores ({len(wrong)}{', first 30' if len(wrong) > 30 else ''}; all in results.json)")
        rep.table(["slurp_id", "split", "intent", "sentence", "stored"],
                  [[r["slurp_id"], r["split"], r["intent"], r["sentence"], _prefs(r["stored"])] for r in wrong[:30]])


def render_report(res: dict, watch: Stopwatch, machine: dict) -> Report:
    cfg = res["config"]
    splits = _splits(ChallengeConfig(split=cfg["split"]))
    rep = Report("boundmem challenge benchmark")
    rep.para(f"Run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC. Extractor `{cfg['extractor']}` ({cfg['extractor_class']}), "
             f"maintainer `{cfg['maintainer']}` ({cfg['maintainer_class']}), embedder `{cfg['embedder']}` "
             f"({cfg['embedder_class']}). Data: `{cfg['data_dir']}`; split {cfg['split']}. Each conversation went "
             "through `Memory.add` into a fresh user of one temporary SQLite store; what that user's memory then held "
             "is compared with the conversation's `expected`. `train` may have been used to build or tune the "
             "extractor; `heldout` never was.")
    rep.para("A stored preference matches an expected one at a level if the path prefix (main, main/sub, "
             "main/sub/detail) is the same. An attribute is right if it equals the expected attribute or an `accept` "
             "spelling (case, whitespace and punctuation ignored) with the right polarity: a stored attribute starting "
             "with \"not \", \"no \", \"never \" or \"avoid \" is a dislike of the rest (unless it is literally an expected "
             "like, e.g. the vocabulary item \"No (cheapest prefered)\"). Each expected preference is paired with at most "
             "one stored preference of its detail category (as many right pairs as possible); those pairs are the "
             "detail-level matches.")
    if not res["sets"]:
        rep.para("No challenge set file was found; only SLURP was run.")
    for name, data in res["sets"].items():
        _set_section(rep, name, data, splits)
    if res.get("slurp"):
        _slurp_section(rep, res["slurp"], splits)
    timing_section(rep, watch, machine)
    return rep


# --- command ---------------------------------------------------------------------------------
def register(app: typer.Typer) -> None:
    @app.command("challenge")
    def challenge(
        set_: str = typer.Option("all", "--set", help=" | ".join([*SETS, "all"]) + " (all = every set with data files)."),
        slurp: Optional[Path] = typer.Option(None, "--slurp", exists=True, dir_okay=False,
                                             help="SLURP devel.jsonl (e.g. ../shared/data/slurp/devel.jsonl): false stores on voice commands."),
        split: str = typer.Option("all", "--split", help="train | heldout | all"),
        out: Path = typer.Option(Path("bench-out/challenge"), "--out", help="Output folder (report.md, results.json)."),
        data_dir: Optional[Path] = typer.Option(None, "--data-dir", file_okay=False,
                                                help="Folder with the set files (default: the packaged challenge_data)."),
        extractor: str = typer.Option("local", "--extractor", help=" | ".join(EXTRACTORS)),
        maintainer: str = typer.Option("local", "--maintainer", help=" | ".join(MAINTAINERS)),
        embedder: str = typer.Option("minilm", "--embedder", help=" | ".join(EMBEDDERS) + " (hash: model-free, harness checks only)"),
        no_progress: bool = typer.Option(False, "--no-progress", help="No progress bars."),
    ):
        """What a fresh user's memory holds after each challenge conversation (and SLURP command), vs what it should."""
        for name, val, allowed in (("--set", set_, (*SETS, "all")), ("--split", split, (*SPLITS, "all")),
                                   ("--extractor", extractor, EXTRACTORS), ("--maintainer", maintainer, MAINTAINERS),
                                   ("--embedder", embedder, EMBEDDERS)):
            if val not in allowed:
                raise typer.BadParameter(f"{val!r} is not one of {', '.join(allowed)}", param_hint=name)
        cfg = ChallengeConfig(set=set_, slurp=slurp, split=split, out=out, data_dir=data_dir, extractor=extractor,
                              maintainer=maintainer, embedder=embedder, show_progress=not no_progress,
                              settings=cli_settings())
        try:
            res = run_challenge(cfg)
        except ChallengeDataError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2)
        write_results("challenge", out, (out / "report.md").read_text(encoding="utf-8"), headline(res),
                      summary={"sets": {k: v["summary"] for k, v in res["sets"].items()},
                               "slurp": (res.get("slurp") or {}).get("summary")}, machine=res["machine"])
        for line in summary_lines(res):
            typer.echo(line)
        typer.echo(f"wrote {out / 'report.md'} in {res['timing']['total']['wall_s']:.0f} s")


def summary_lines(res: dict) -> list[str]:
    """One line per set (and SLURP) per split: the headline figures."""
    lines = []
    for name, data in res["sets"].items():
        for sp, s in data["summary"].items():
            vals = s["values"]
            lines.append(f"{name} {sp}: detail F1 {fmt(s['detail']['f1'])}, attribute accuracy {fmt(s['attribute']['accuracy'])}, "
                         f"false stores {s['false_store']['stored']}/{s['false_store']['n']}, "
                         f"dislike stored as like {s['dislike']['stored_as_like']}, "
                         f"fabricated {vals['fabricated']['n']}, polarity flips {vals['polarity_flips']}")
    if res.get("slurp"):
        for sp, s in res["slurp"]["summary"].items():
            lines.append(f"SLURP {sp}: false-store rate {fmt(s['rate'], pct=True)} ({s['stored']}/{s['n']}), "
                         f"fabricated {s['fabricated']}")
    return lines


def headline(res: dict) -> list[Figure]:
    """README's figures of a challenge run: per set its held-out split's detail F1 and false-store rate (the in-car
    set in README, the others on the page), and SLURP's false-store rate."""
    figs = []
    for name, data in res["sets"].items():
        sp = "heldout" if "heldout" in data["summary"] else next(iter(data["summary"]))
        s = data["summary"][sp]
        figs += [Figure(f"challenge {name} ({sp}): detail F1", s["detail"]["f1"], readme=name == "incar"),
                 Figure(f"challenge {name} ({sp}): false stores", s["false_store"]["rate"], "pct", readme=name == "incar")]
    if res.get("slurp"):
        summ = res["slurp"]["summary"]
        sp = "heldout" if "heldout" in summ else next(iter(summ))
        figs.append(Figure(f"SLURP voice commands ({sp}): false-store rate", summ[sp]["rate"], "pct"))
    return figs
