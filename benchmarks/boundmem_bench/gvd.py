"""`boundmem bench gvd`: CAIM against MemoryBank and TiM on GVD (MemoryBank's probing questions), scored automatically.

Every system gets the same embedder, the same k, the same answer prompt and the same 10 daily sessions per user, in
date order; then the user's probing questions are asked on the day after the last session. Retrieval is scored
against hand-made gold evidence turns and answers against gold keyword groups (see gvd_metrics for the rules).
Without an LLM there is no generated answer: the "answer" is the text of the top retrieved memory (or an abstention
when nothing was retrieved), reported as "extractive answer (no LLM)", so correctness then measures whether the
best memory contains the answer words, not what a model would say.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from boundmem.caim.base import DialogueMemory
from boundmem.cli.options import cli_settings
from boundmem.config import Settings
from boundmem.embed.registry import EMBEDDERS as EMBEDDER_REGISTRY
from .gvd_data import GVDDataError, GVDDataset, load_gvd
from .gvd_eval import ABSTENTION, evaluate_question
from .report import Report, Stopwatch, code_version, fmt, machine_info, plot_lines, progress, ratio, timing_section, write_json
from .results import Figure, write_results

DEFAULT_SYSTEMS = ("caim", "caim-nocontroller", "caim-notags", "caim-nodates", "caim-nofilter", "caim-nosources",
                   "caim-raw", "memorybank", "memorybank-forget", "tim")
EMBEDDERS = EMBEDDER_REGISTRY.choices()
NO_LLM_MODE = "extractive answer (no LLM)"
SYSTEM_NOTES = {
    "caim": "CAIM: memory controller + dense pool (thoughts scored by the best of their text and their source turns, "
            "day summaries) re-ranked by tag/date bonuses + relevance cutoff + post-thinking (src/boundmem/caim).",
    "caim-nocontroller": "CAIM ablation: no memory controller (always retrieves).",
    "caim-notags": "CAIM ablation: no tag bonus (query not tagged).",
    "caim-nodates": "CAIM ablation: no date bonus (dates in the query ignored).",
    "caim-nofilter": "CAIM ablation: no relevance cutoff (the top k of the re-ranked pool, however far).",
    "caim-nosources": "CAIM ablation: thoughts only (no source turns kept beside them, no day summaries).",
    "caim-raw": "CAIM ablation: no post-thinking; long-term memory holds the raw turns (<= 400-character pieces).",
    "memorybank": "MemoryBank: turn documents + daily summaries, cosine top-k, no forgetting.",
    "memorybank-forget": "MemoryBank with forgetting R = exp(-t/S), fixed seed.",
    "tim": "TiM: per-turn thoughts in a 16-bucket random-projection LSH table, cosine top-k in the bucket.",
}


# --- systems ------------------------------------------------------------------------------------------------
def _caim(embedder: Any, llm: Any, workdir: Path, **switches: Any) -> Any:
    """CAIM with the shared embedder and LLM, one SQLite file per variant; the switches are its ablations."""
    from boundmem.caim.system import CAIM  # written beside this bench; imported only when asked for

    db = workdir / f"caim-{len(list(workdir.iterdir()))}.db"
    return CAIM(embedder=embedder, llm=llm, db=db, **switches)


def system_factories() -> dict[str, Callable[[Any, Any, Path, int], DialogueMemory]]:
    from boundmem_bench.baselines import MemoryBank, TiM

    return {
        "caim": lambda e, l, w, s: _rename(_caim(e, l, w), "caim"),
        "caim-nocontroller": lambda e, l, w, s: _rename(_caim(e, l, w, controller=False), "caim-nocontroller"),
        "caim-notags": lambda e, l, w, s: _rename(_caim(e, l, w, tags=False), "caim-notags"),
        "caim-nodates": lambda e, l, w, s: _rename(_caim(e, l, w, dates=False), "caim-nodates"),
        "caim-nofilter": lambda e, l, w, s: _rename(_caim(e, l, w, relevance_filter=False), "caim-nofilter"),
        "caim-nosources": lambda e, l, w, s: _rename(_caim(e, l, w, sources=False), "caim-nosources"),
        "caim-raw": lambda e, l, w, s: _rename(_caim(e, l, w, postthink=False), "caim-raw"),
        "memorybank": lambda e, l, w, s: MemoryBank(e, l, forgetting=False, seed=s),
        "memorybank-forget": lambda e, l, w, s: MemoryBank(e, l, forgetting=True, seed=s),
        "tim": lambda e, l, w, s: TiM(e, l, seed=s),
    }


def _rename(system: Any, name: str) -> Any:
    try:
        system.name = name
    except AttributeError:
        pass
    return system


# --- running ------------------------------------------------------------------------------------------------
@dataclass
class SystemRun:
    name: str
    questions: list[dict] = field(default_factory=list)
    storage: dict[str, dict] = field(default_factory=dict)  # user -> {items, chars, raw_chars}
    ingest_s: float = 0.0
    question_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def run_system(name: str, system: DialogueMemory, data: GVDDataset, users: list[str], k: int, llm: Any,
               on_user: Callable[[], None] = lambda: None, watch: Optional[Stopwatch] = None) -> SystemRun:
    import time

    watch = watch or Stopwatch()
    run = SystemRun(name=name)
    today = data.session_date
    for user in users:
        u = data.users[user]
        t0 = time.perf_counter()
        with watch.stage(f"ingest {name}"):
            for s in u.sessions:
                system.add_session(user, s.day, list(s.turns))
        t1 = time.perf_counter()
        st = system.storage(user)
        run.storage[user] = {"items": st.items, "chars": st.chars, "raw_chars": u.raw_chars,
                             "raw_turns": sum(len(s.turns) for s in u.sessions)}
        with watch.stage(f"questions {name}"):
            for q in data.questions_for(user):
                run.questions.append(evaluate_question(system, llm, q, today, k))
        run.ingest_s += t1 - t0
        run.question_s += time.perf_counter() - t1
        on_user()
    for attr in ("llm_failures",):
        if hasattr(system, attr):
            run.extra[attr] = getattr(system, attr)
    if callable(getattr(system, "stats", None)):
        for u in users:
            for key, v in system.stats(u).items():
                if isinstance(v, int):
                    run.extra[f"{key}_items"] = run.extra.get(f"{key}_items", 0) + v
    return run


def _mean(xs: list[float]) -> Optional[float]:
    return sum(xs) / len(xs) if xs else None


def summarise(run: SystemRun, k: int) -> dict:
    ret = [q for q in run.questions if "hit_at" in q]
    scored = [q for q in run.questions if "correctness" in q]
    answerable = [q for q in scored if q["answerable"]]
    pol = [q for q in scored if q.get("polarity")]
    una = [q for q in scored if not q["answerable"]]
    items = sum(s["items"] for s in run.storage.values())
    chars = sum(s["chars"] for s in run.storage.values())
    raw = sum(s["raw_chars"] for s in run.storage.values())
    return {
        "system": run.name,
        "questions": len(run.questions), "retrieval_questions": len(ret), "scored_questions": len(scored),
        "hit_at": [_mean([q["hit_at"][j] for q in ret]) for j in range(k)],
        "recall_at": [_mean([q["recall_at"][j] for q in ret]) for j in range(k)],
        "mrr": _mean([q["mrr"] for q in ret]),
        "retrieval_rate": _mean([1.0 if q["retrieved"] else 0.0 for q in run.questions]),
        "no_retrieval_on_memory_questions": sum(1 for q in ret if not q["retrieved"]),
        "correctness": _mean([q["correctness"] for q in scored]),
        "correctness_answerable": _mean([q["correctness"] for q in answerable]),
        "fully_correct": _mean([1.0 if q["correctness"] == 1.0 else 0.0 for q in scored]),
        "partly_correct": _mean([1.0 if q["correctness"] == 0.5 else 0.0 for q in scored]),
        "polarity_ok": _mean([1.0 if q["polarity_ok"] else 0.0 for q in pol]), "polarity_questions": len(pol),
        "abstained_correctly": _mean([q["correctness"] for q in una]), "unanswerable_questions": len(una),
        "storage_items": items, "storage_chars": chars, "raw_chars": raw,
        "storage_ratio": ratio(chars, raw), "items_per_user": ratio(items, len(run.storage)),
        "ingest_s": run.ingest_s, "question_ms": 1000 * run.question_s / max(1, len(run.questions)),
        **run.extra,
    }


# --- report -------------------------------------------------------------------------------------------------
def write_outputs(out: Path, data: GVDDataset, runs: list[SystemRun], summaries: list[dict], cfg: dict,
                  watch: Stopwatch, machine: dict, skipped: dict[str, str], cv: Optional[dict] = None,
                  requests: Optional[dict] = None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    k = cfg["k"]
    plot = plot_lines(list(range(1, k + 1)), {s["system"]: s["hit_at"] for s in summaries}, out / "gvd_hit_at_k.png",
                      f"GVD retrieval hit@k ({summaries[0]['retrieval_questions'] if summaries else 0} questions "
                      f"with gold evidence)", "k", "hit@k")
    rep = Report("GVD benchmark: CAIM vs MemoryBank vs TiM")
    rep.para(f"Data: {cfg['data']} ({len(cfg['users'])} users, {sum(len(data.questions_for(u)) for u in cfg['users'])} "
             f"probing questions, of which {sum(1 for u in cfg['users'] for q in data.questions_for(u) if q.gold)} "
             f"have gold annotations from {cfg['gold']}). Questions asked on {data.session_date.isoformat()}, the day "
             f"after the last dialogue day. Embedder: {cfg['embedder']}; k = {k}; seed = {cfg['seed']}; code "
             f"{cfg.get('code', 'unknown')}. "
             f"Answers: {cfg['answer_mode']}.")
    if cfg["answer_mode"] == NO_LLM_MODE:
        rep.para("No LLM was used: each system's local fallbacks ran (extractive summaries, local thoughts, rule-based "
                 "controller and relevance filter), and the answer is the text of the top retrieved memory, or "
                 f"\"{ABSTENTION}\" when nothing was retrieved. Correctness therefore measures whether the best memory "
                 "holds the gold keywords; yes/no questions cannot be answered this way (polarity needs a generated "
                 "answer), and long turn documents (MemoryBank) contain more words than short thoughts (TiM, CAIM), "
                 "which favours them on keyword matching.")
    rep.bullets([f"`{s}`: {SYSTEM_NOTES.get(s, '')}" for s in cfg["systems"]] +
                [f"`{s}` skipped: {why}" for s, why in skipped.items()])
    rep.h2("Retrieval (questions with gold evidence)")
    rep.para("An item is relevant when its source turns include a gold evidence turn, or when it is a daily summary of "
             "a gold date. A controller decision not to retrieve counts as a miss.")
    rep.table(["system", "n", *(f"hit@{j}" for j in range(1, k + 1)), f"recall@{k}", "MRR", "no retrieval"],
              [(s["system"], s["retrieval_questions"], *s["hit_at"], s["recall_at"][-1], s["mrr"],
                s["no_retrieval_on_memory_questions"]) for s in summaries])
    rep.image(plot.name, "hit@k per system")
    rep.h2("Answer correctness (gold keyword groups)")
    rep.para("1 = every keyword group matched, 0.5 = some, 0 = none; yes/no questions with a false premise also need "
             "the right polarity word first (else 0); the unanswerable question needs an abstention.")
    rep.table(["system", "n", "mean", "answerable mean", "fully correct", "partly correct", "polarity ok",
               "abstained (unanswerable)"],
              [(s["system"], s["scored_questions"], s["correctness"], s["correctness_answerable"],
                fmt(s["fully_correct"], pct=True), fmt(s["partly_correct"], pct=True),
                f"{fmt(s['polarity_ok'])} of {s['polarity_questions']}",
                f"{fmt(s['abstained_correctly'])} of {s['unanswerable_questions']}") for s in summaries])
    rep.h2("Memory storage (after 10 sessions, before the questions)")
    rep.table(["system", "items", "items/user", "chars", "chars / raw dialogue chars", "merged", "forgotten"],
              [(s["system"], s["storage_items"], s["items_per_user"], s["storage_chars"],
                fmt(s["storage_ratio"], pct=True), s.get("merged_items", "–"), s.get("forgotten_items", "–"))
               for s in summaries])
    rep.para("merged / forgotten: organisation steps of the baselines (TiM merges same-head or near-duplicate "
             "thoughts and forgets contradicted ones; MemoryBank-forget drops memories by the forgetting curve, "
             "counted over ingest and questions).")
    rep.para(f"Raw dialogue: {summaries[0]['raw_chars'] if summaries else 0} characters (queries + responses).")
    caim_rows = [s for s in summaries if s["system"].startswith("caim")]
    if len(caim_rows) > 1:
        rep.h2("CAIM ablations")
        rep.table(["variant", f"hit@{k}", "MRR", "retrieval rate (all questions)", "correctness", "items"],
                  [(s["system"], s["hit_at"][-1], s["mrr"], s["retrieval_rate"], s["correctness"],
                    s["storage_items"]) for s in caim_rows])
    if cv is not None:
        from .gvd_cv import cv_section

        cv_section(rep, cv)
    if requests is not None:
        from .gvd_requests import requests_section

        requests_section(rep, requests)
    rep.h2("Speed")
    rep.para("All systems share one embedder and its text cache (as they would share one process), so a text already "
             "embedded by an earlier system costs a later one nothing: compare ingest times only between systems that "
             "store different texts (memorybank-forget reuses memorybank's documents; the CAIM variants share thoughts "
             "when their post-thinking is deterministic). Wall times on a shared machine include waiting for the CPU.")
    rep.table(["system", "ingest s (all users)", "ms per question", "LLM failures (fell back to local)"],
              [(s["system"], s["ingest_s"], s["question_ms"], s.get("llm_failures", "–")) for s in summaries], digits=2)
    rep.h2(f"Per question (hit@{k} / correctness)")
    by_q: dict[str, dict[str, dict]] = {}
    for r in runs:
        for q in r.questions:
            if q["scored"]:
                by_q.setdefault(q["qid"], {})[r.name] = q
    rows = []
    for qid, per in by_q.items():
        any_q = next(iter(per.values()))
        cells = []
        for r in runs:
            q = per.get(r.name)
            if q is None:
                cells.append("–")
            else:
                h = fmt(q["hit_at"][-1], 0) if "hit_at" in q else "n/a"
                cells.append(f"{h} / {fmt(q['correctness'], 1)}")
        rows.append((qid, any_q["question"][:70], ",".join(any_q["gold_evidence"]) or "none", *cells))
    rep.table(["qid", "question", "evidence", *(r.name for r in runs)], rows)
    timing_section(rep, watch, machine)
    rep.write(out / "report.md")
    write_json(out / "results.json", {"config": cfg, "summary": summaries, "skipped": skipped, "cv": cv,
                                      "requests": requests,
                                      "timing": watch.summary(), "machine": machine,
                                      "questions": {r.name: r.questions for r in runs},
                                      "storage": {r.name: r.storage for r in runs}})
    return out / "report.md"


def _code_version() -> str:
    """The commit the numbers came from (plus "+dirty" when the bench or memory code had local changes)."""
    code = code_version()
    return (code["commit"] or "unknown")[:7] + ("" if code["dirty"] is False else "+dirty" if code["dirty"] else "+unknown")


def run_gvd(data_dir: Path, gold: Optional[Path], out: Path, systems: list[str], k: int = 5, llm: Any = None,
            embedder: Any = None, embedder_name: str = "minilm", users: Optional[list[str]] = None, seed: int = 0,
            show_progress: bool = True, strict: bool = False, cv: bool = False, cv_folds: int = 5,
            cv_ablations: bool = True, requests: Optional[Path] = None, settings: Settings = Settings()) -> dict:
    """Load, run every system over every user, score, write report.md / results.json / the plot; returns the summary.

    A CAIM variant that cannot be built (CAIM not there yet, or without an ablation option) is skipped with the
    reason in the report, unless `strict`. `cv`: also cross-validate CAIM's knobs over the gold users (`gvd_cv`);
    `requests`: also measure the controller on preference-dependent requests (`gvd_requests`).
    """
    watch = Stopwatch()
    machine = machine_info()
    data = load_gvd(data_dir, gold)
    factories = system_factories()
    unknown = [s for s in systems if s not in factories]
    if unknown:
        raise ValueError(f"unknown system(s) {unknown}; choose from {', '.join(factories)}")
    if users:
        missing = [u for u in users if u not in data.users]
        if missing:
            raise ValueError(f"unknown user(s) {missing}; the data has {', '.join(data.users)}")
    user_list = users or list(data.users)
    if embedder is None:
        with watch.stage("load embedder"):
            from boundmem.embed.registry import make_embedder

            embedder = make_embedder(embedder_name, settings)
            embedder.embed(["warm-up"])
    runs, skipped = [], {}
    with tempfile.TemporaryDirectory() as tmp, progress(show_progress) as prog:
        for name in systems:
            try:
                system = factories[name](embedder, llm, Path(tmp), seed)
            except (ImportError, ValueError, TypeError) as e:
                if strict:
                    raise
                skipped[name] = f"{type(e).__name__}: {e}"
                continue
            task = prog.add_task(f"{name:<18}", total=len(user_list))
            runs.append(run_system(name, system, data, user_list, k, llm, lambda: prog.advance(task), watch))
            close = getattr(system, "close", None)
            if callable(close):
                close()
    summaries = [summarise(r, k) for r in runs]
    cv_res = req_res = None
    if cv:
        from .gvd_cv import run_cv

        with watch.stage("cross-validation"):
            cv_res = run_cv(data, embedder, k=k, n_folds=cv_folds, seed=seed, ablations=cv_ablations)
    if requests is not None:
        from .gvd_requests import run_requests

        with watch.stage("requests"):
            req_res = run_requests(Path(requests), embedder, k=k, seed=seed)
    gold_used = gold or (Path(data_dir) / "gold_en.jsonl" if (Path(data_dir) / "gold_en.jsonl").exists() else None)
    cfg = {"data": str(data_dir), "gold": str(gold_used) if gold_used else "none", "k": k, "seed": seed,
           "code": _code_version(),
           "embedder": getattr(embedder, "name", embedder_name), "systems": systems, "users": user_list,
           "answer_mode": NO_LLM_MODE if llm is None else f"LLM ({getattr(llm, 'model', type(llm).__name__)})",
           "session_date": data.session_date.isoformat()}
    if llm is not None and hasattr(llm, "usage"):
        cfg["llm_usage"] = llm.usage.model_dump() if hasattr(llm.usage, "model_dump") else str(llm.usage)
    report = write_outputs(Path(out), data, runs, summaries, cfg, watch, machine, skipped, cv_res, req_res)
    return {"report": str(report), "summary": summaries, "skipped": skipped, "cv": cv_res, "requests": req_res}


def register(app: typer.Typer) -> None:
    @app.command("gvd")
    def gvd(
        data: Path = typer.Option(..., "--data", help="Folder with memory_bank_en.json and probing_questions_en.jsonl.",
                                  exists=True, file_okay=False),
        gold: Optional[Path] = typer.Option(None, "--gold", help="Gold annotations (default: DATA/gold_en.jsonl).",
                                            exists=True, dir_okay=False),
        out: Path = typer.Option(Path("bench-out/gvd"), "--out", help="Output folder (report.md, results.json, PNG)."),
        systems: str = typer.Option(",".join(DEFAULT_SYSTEMS), "--systems", help="Comma-separated: "
                                    + ", ".join(DEFAULT_SYSTEMS)),
        k: int = typer.Option(5, "--k", min=1, help="Memories retrieved per question (same for every system)."),
        llm: bool = typer.Option(False, "--llm", help="Use the LLM from BOUNDMEM_LLM_* / OPENAI_API_KEY for "
                                                      "summaries, thoughts, CAIM steps and answers."),
        embedder: str = typer.Option("minilm", "--embedder", help=" | ".join(EMBEDDERS) + " (hash: harness checks only)"),
        users: Optional[str] = typer.Option(None, "--users", help="Comma-separated user names (default: all)."),
        seed: int = typer.Option(0, "--seed", help="Seed for LSH projections and random forgetting."),
        strict: bool = typer.Option(False, "--strict", help="Fail instead of skipping a system that cannot be built."),
        quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
        cv: bool = typer.Option(False, "--cv", help="Also choose CAIM's knobs by leave-users-out cross-validation over "
                                                    "the gold users and report mean/spread over folds (with MemoryBank "
                                                    "on the same folds and the ablations)."),
        folds: int = typer.Option(5, "--folds", min=2, help="Folds for --cv (users split evenly)."),
        requests: Optional[Path] = typer.Option(None, "--requests", help="Preference-dependent requests (JSONL: id, "
                                                "split, statement, distractors, request); default: "
                                                "challenge_data/travel-requests.jsonl when it exists.",
                                                dir_okay=False),
        no_requests: bool = typer.Option(False, "--no-requests", help="Skip the requests sub-report."),
    ):
        """CAIM vs MemoryBank vs TiM on GVD: retrieval hit@k/recall/MRR, answer correctness, memory storage."""
        if embedder not in EMBEDDERS:
            raise typer.BadParameter(f"{embedder!r} is not one of {', '.join(EMBEDDERS)}", param_hint="--embedder")
        names = [s.strip() for s in systems.split(",") if s.strip()]
        from .gvd_requests import DEFAULT_FILE

        req = None if no_requests else requests or (DEFAULT_FILE if DEFAULT_FILE.exists() else None)
        if req is not None and not Path(req).exists():
            typer.echo(f"error: {req}: file not found", err=True)
            raise typer.Exit(2)
        client = None
        settings = cli_settings()
        if llm:
            from boundmem.llm import LLMError
            from boundmem.llm.registry import make_llm_client

            try:
                client = make_llm_client(settings)
            except LLMError as e:
                typer.echo(f"error: {e}", err=True)
                raise typer.Exit(2)
        machine = machine_info()
        try:
            res = run_gvd(data, gold, out, names, k=k, llm=client, embedder_name=embedder,
                          users=[u.strip() for u in users.split(",")] if users else None, seed=seed,
                          show_progress=not quiet, strict=strict, cv=cv, cv_folds=folds, requests=req, settings=settings)
        except GVDDataError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2)
        except ValueError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2)
        for s, why in res["skipped"].items():
            typer.echo(f"skipped {s}: {why}", err=True)
        for s in res["summary"]:
            typer.echo(f"{s['system']:<18} hit@{k}={fmt(s['hit_at'][-1])} MRR={fmt(s['mrr'])} "
                       f"correct={fmt(s['correctness'])} items={s['storage_items']}")
        if res["cv"]:
            c, mb = res["cv"]["caim"], res["cv"]["memorybank"]
            typer.echo(f"CV ({folds} folds) hit@{k}: caim {fmt(c['hit']['mean'])} ± {fmt(c['hit']['sd'])} "
                       f"(pooled {fmt(c['pooled_hit'])}), memorybank {fmt(mb['hit']['mean'])} ± {fmt(mb['hit']['sd'])}")
        if res["requests"]:
            r = res["requests"]
            typer.echo(f"requests ({r['cases']}): caim retrieved {fmt(r['retrieval_rate'])}, hit@{k} caim "
                       f"{fmt(r['caim_hit'])}, memorybank {fmt(r['memorybank_hit'])}")
        write_results("gvd", out, Path(res["report"]).read_text(encoding="utf-8"), headline(res, k, "GVD"),
                      summary={"summary": res["summary"], "skipped": res["skipped"], "cv": res["cv"]}, machine=machine)
        typer.echo(f"report: {res['report']}")


def headline(res: dict, k: int, dataset: str, readme: bool = True) -> list[Figure]:
    """README's figures of a GVD-format run: with cross-validation, CAIM's and MemoryBank's leave-users-out hit@k
    (knobs never chosen on the users scored); else CAIM's hit@k. Every system's hit@k and MRR on the page."""
    cv, figs = res.get("cv"), []
    if cv:
        c, mb = cv["caim"]["hit"]["mean"], cv["memorybank"]["hit"]["mean"]
        figs.append(Figure(f"{dataset}, leave-users-out hit@{k}: CAIM / MemoryBank", f"{c:.3f} / {mb:.3f}", readme=readme))
    for s in res["summary"]:
        main = readme and s["system"] == "caim" and not cv
        figs += [Figure(f"{dataset}, {s['system']}: retrieval hit@{k}", s["hit_at"][-1] if s["hit_at"] else None,
                        readme=main),
                 Figure(f"{dataset}, {s['system']}: MRR", s["mrr"], readme=False)]
    return figs
