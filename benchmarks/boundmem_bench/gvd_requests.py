"""`boundmem bench gvd --requests FILE`: does CAIM's controller retrieve for preference-dependent requests?

Each line of FILE is `{"id", "split", "statement", "distractors": [...], "request"}` (the challenge set
`challenge_data/travel-requests.jsonl`, or any file of that shape). For every case a fresh user says the distractors
and the statement, one per day (the statement at a position fixed by the case id), each as a dialogue turn; the next
day the request is asked ("can you suggest a dinner spot?" after "I'm vegetarian"). Scored per system: did it
retrieve at all (MemoryBank always does), and is the statement's turn among the top k retrieved. For CAIM the report
also says why the controller retrieved (a recall/advice rule, or a stored memory close to the request).
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel

from boundmem.caim.base import DialogueTurn

DEFAULT_FILE = Path(__file__).parent / "challenge_data" / "travel-requests.jsonl"
START = date(2023, 5, 1)
REPLY = "Okay, I'll keep that in mind."


class RequestCase(BaseModel):
    id: str
    split: str = "train"
    statement: str
    distractors: list[str] = []
    request: str
    domain: str = ""


def load_requests(path: Path) -> list[RequestCase]:
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(RequestCase.model_validate(json.loads(line)))
        except (ValueError, TypeError) as e:
            raise ValueError(f"{path}: line {n}: {e}") from None
    if not out:
        raise ValueError(f"{path}: no cases")
    return out


def sessions(case: RequestCase) -> tuple[list[tuple[date, DialogueTurn]], str, date]:
    """The case as one-turn sessions, the statement's turn id, and the day the request is asked."""
    texts = list(case.distractors)
    pos = int(hashlib.blake2b(case.id.encode(), digest_size=4).hexdigest(), 16) % (len(texts) + 1)
    texts.insert(pos, case.statement)
    out = []
    for i, t in enumerate(texts):
        d = START + timedelta(days=i)
        out.append((d, DialogueTurn(id=f"{d.isoformat()}#0", query=t, response=REPLY)))
    return out, out[pos][1].id, START + timedelta(days=len(texts))


def _reason_kind(why: str) -> str:
    if why.startswith("close to a stored memory"):
        return "near a stored memory"
    if why.startswith("asks for a recommendation"):
        return "advice/recommendation request"
    if why in ("small talk", "controller off") or why.startswith("no recall cue"):
        return why
    return "recall rule"


def run_requests(path: Path, embedder: Any, k: int = 5, seed: int = 0) -> dict:
    from boundmem_bench.baselines import MemoryBank
    from boundmem.caim.system import CAIM

    cases = load_requests(path)
    caim, mb = CAIM(embedder=embedder), MemoryBank(embedder, None, forgetting=False, seed=seed)
    rows = []
    for c in cases:
        user = f"req-{c.id}"
        turns, gold, today = sessions(c)
        for d, t in turns:
            caim.add_session(user, d, [t])
            mb.add_session(user, d, [t])
        ctx = caim.prepare(user, c.request, today, with_tags=False)
        ok, why = caim.decide(ctx)
        ranked = caim.rank(caim.add_tags(ctx), k)  # what it would return if it retrieved (the controller-off figure)
        caim_hit = any(gold in i.source_turn_ids for i in ranked)
        mb_items = mb.retrieve(user, c.request, today, k).items
        rows.append({"id": c.id, "split": c.split, "domain": c.domain, "request": c.request,
                     "caim_retrieved": ok, "caim_reason": why, "caim_hit": bool(ok and caim_hit),
                     "caim_hit_controller_off": caim_hit, "nearest": ctx.nearest,
                     "memorybank_hit": any(gold in i.source_turn_ids for i in mb_items)})
    caim.close()
    n = len(rows)

    def rate(key: str, rs: Optional[list] = None) -> float:
        rs = rows if rs is None else rs
        return sum(1 for r in rs if r[key]) / len(rs) if rs else 0.0

    by = {}
    for field in ("domain", "split"):
        for v in sorted({r[field] for r in rows if r[field]}):
            rs = [r for r in rows if r[field] == v]
            by[f"{field} {v}"] = {"n": len(rs), "retrieval_rate": rate("caim_retrieved", rs),
                                  "caim_hit": rate("caim_hit", rs), "memorybank_hit": rate("memorybank_hit", rs)}
    return {"file": str(path), "k": k, "cases": n, "retrieval_rate": rate("caim_retrieved"),
            "caim_hit": rate("caim_hit"), "caim_hit_controller_off": rate("caim_hit_controller_off"),
            "memorybank_hit": rate("memorybank_hit"),
            "reasons": dict(Counter(_reason_kind(r["caim_reason"]) for r in rows)), "by": by, "rows": rows}


def requests_section(rep: Any, res: dict) -> None:
    k = res["k"]
    rep.h2("Preference-dependent requests: does the controller retrieve?")
    rep.para(f"{res['cases']} cases from `{res['file']}`: a fresh user says the distractors and the statement (one "
             f"turn a day), then asks the request. hit@{k} = the statement's turn is among the top {k} (a CAIM "
             "controller decision not to retrieve is a miss).")
    pct = lambda x: f"{100 * x:.0f} %"  # noqa: E731
    rows = [("all", res["cases"], pct(res["retrieval_rate"]), f"{res['caim_hit']:.3f}",
             f"{res['caim_hit_controller_off']:.3f}", f"{res['memorybank_hit']:.3f}")]
    rows += [(name, b["n"], pct(b["retrieval_rate"]), f"{b['caim_hit']:.3f}", "", f"{b['memorybank_hit']:.3f}")
             for name, b in res["by"].items()]
    rep.table(["cases", "n", "CAIM controller retrieved", f"CAIM hit@{k}", f"CAIM hit@{k}, controller off",
               f"MemoryBank hit@{k}"], rows)
    rep.para("Why the controller retrieved (or not): " + ", ".join(f"{k_}: {v}" for k_, v in res["reasons"].items()))
    declined = [r for r in res["rows"] if not r["caim_retrieved"]]
    if declined:
        rep.bullets([f"declined `{r['id']}`: {r['request']!r} (best cosine to a memory "
                     f"{r['nearest']:.2f})" for r in declined])
