"""`boundmem bench recall`: how often each entry point injects memory that cannot help, and how often it gets the
right memory first when one should.

Sets (`recall_sets`): SLURP's real spoken commands (devel split) and boundmem's own unrelated requests (weather,
calls, wipers, jokes, "thanks, that's all", navigation to a named place, ...), which no stored preference should
shape, and requests one should shape ("find me a place for dinner", "it's a bit chilly in here"), asked by users who
hold such a preference: CarMem's training users (51-100) in the in-car schema and generated residents in the
smart-home schema. Each figure is given for the visible part (what the gate was trained on) and the held-out part
(other users asking requests of other templates, and other SLURP commands), never mixed.

Entry points, all at their default call: the library (`Memory.recall(text, user)`), the HTTP route
(`POST /v1/users/{user}/recall`) and the proxy (`/v1/chat/completions` with a scripted upstream that records the
prompt). For the proxy, the tokens the memory added to the prompt are counted with the bundled MiniLM WordPiece
tokenizer (not the upstream model's; a rough count). The scripted upstream answers 400, so the proxy learns nothing
from the benchmark's requests and every request sees the same stored preferences.
"""
from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import typer

from .report import machine_info
from .results import Figure, write_results
from .recall_sets import (Case, cases, incar_users, related_requests, slurp_requests, smarthome_users, store_users,
                          unrelated_requests)

TENANT, KEY = "bench", "bench-recall-key"
POINTS = ("library", "http", "proxy")


def _memories(work: Path, users, embedder: str) -> dict[str, Any]:
    from boundmem.memory import build_memory
    from boundmem.schema.load import builtin_schema
    from boundmem.user_id import namespaced

    out = {}
    for domain in ("incar", "smarthome"):
        mem = build_memory(db=work / f"{domain}.db", schema=builtin_schema(domain), embedder=embedder)
        mine = [u for u in users if u.domain == domain]
        store_users(mem, [type(u)(namespaced(TENANT, u.user), u.domain, u.part, u.prefs) for u in mine])
        out[domain] = mem
    return out


class _Upstream:
    """A scripted model server: records each chat request's messages and answers 400 (so the proxy learns nothing)."""

    def __init__(self) -> None:
        import httpx

        self.last: Optional[list] = None
        self.transport = httpx.MockTransport(self._answer)

    def _answer(self, request):
        import httpx

        self.last = json.loads(request.content)["messages"]
        return httpx.Response(400, json={"error": {"message": "scripted", "type": "invalid_request_error"}})


def _tokens():
    from importlib import resources

    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(resources.files("boundmem.embed").joinpath("data", "minilm-tokenizer.json").read_text())
    tok.no_truncation()
    tok.no_padding()
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


def measure(mems: dict[str, Any], cs: Sequence[Case], progress: bool = False) -> list[dict]:
    """One record per case: what each entry point returned or injected."""
    from fastapi.testclient import TestClient

    from boundmem.proxy.app import create_proxy
    from boundmem.service.app import create_app
    from boundmem.user_id import namespaced

    count = _tokens()
    rows: list[dict] = []
    for domain, mem in mems.items():
        mine = [c for c in cs if c.user.domain == domain]
        if not mine:
            continue
        up = _Upstream()
        with TestClient(create_app(mem, {KEY: TENANT}, rate_limit=None)) as api, \
                TestClient(create_proxy(mem, {KEY: TENANT}, "http://upstream.invalid/v1", transport=up.transport,
                                        rate_limit=None)) as proxy:
            auth = {"Authorization": f"Bearer {KEY}"}
            for n, c in enumerate(mine):
                text, ns = c.request.text, namespaced(TENANT, c.user.user)
                t0 = time.perf_counter()
                lib = mem.recall(text, ns)
                ms = (time.perf_counter() - t0) * 1000
                r = api.post(f"/v1/users/{c.user.user}/recall", json={"utterance": text}, headers=auth)
                http = [h["preference"]["path"] for h in r.json()["hits"]] if r.status_code == 200 else None
                http = [f"{x['main']}/{x['sub']}/{x['detail']}" for x in http] if http is not None else None
                system = "You are a helpful assistant."
                sent = [{"role": "system", "content": system}, {"role": "user", "content": text}]
                up.last = None
                p = proxy.post("/v1/chat/completions", json={"model": "m", "user": c.user.user, "messages": sent},
                               headers=auth)
                got = up.last or sent
                added = count(" ".join(str(m.get("content", "")) for m in got)) - count(system + " " + text)
                header = p.headers.get("x-boundmem-recall")
                rows.append({
                    "kind": c.request.kind, "family": c.request.family, "part": c.part, "domain": domain,
                    "text": text, "user": c.user.user, "targets": list(c.request.targets),
                    "library": [str(h.preference.path) for h in lib], "why": [h.why for h in lib],
                    "http": http,
                    "proxy": 0 if header in (None, "none") else int(header), "proxy_header": header,
                    "tokens_added": added, "library_ms": round(ms, 2)})
                if progress and n % 200 == 0:
                    typer.echo(f"  {domain}: {n}/{len(mine)}", err=True)
    return rows


def _share(xs: list[bool]) -> Optional[float]:
    return round(sum(xs) / len(xs), 4) if xs else None


def _pct(xs: list[float], q: float) -> Optional[float]:
    if not xs:
        return None
    s = sorted(xs)
    return float(s[min(len(s) - 1, int(round(q * (len(s) - 1))))])


def summarise(rows: list[dict]) -> dict:
    """Per part (visible, held_out, held_out_2) and set: share with nothing injected per entry point; for related requests,
    hit@1 (the first hit lies in one of the request's target categories) and the proxy's added tokens."""
    out: dict[str, dict] = {}
    for part in ("visible", "held_out", "held_out_2"):
        res: dict[str, dict] = {}
        for kind in ("slurp", "unrelated", "related"):
            rs = [r for r in rows if r["part"] == part and r["kind"] == kind]
            if not rs:
                continue
            s: dict[str, Any] = {"requests": len(rs)}
            s["none"] = {"library": _share([not r["library"] for r in rs]),
                         "http": _share([not r["http"] for r in rs if r["http"] is not None]),
                         "proxy": _share([r["proxy"] == 0 for r in rs])}
            for d in ("incar", "smarthome"):
                ds = [r for r in rs if r["domain"] == d]
                if ds:
                    s[f"none_library_{d}"] = _share([not r["library"] for r in ds])
            if kind == "related":
                def right(r):
                    return bool(r["library"]) and any(r["library"][0] == t or r["library"][0].startswith(t + "/")
                                                      for t in r["targets"])
                s["hit@1"] = _share([right(r) for r in rs])
                for d in ("incar", "smarthome"):
                    ds = [r for r in rs if r["domain"] == d]
                    if ds:
                        s[f"hit@1_{d}"] = _share([right(r) for r in ds])
                s["returned_mean"] = round(statistics.mean(len(r["library"]) for r in rs), 2)
            toks = [r["tokens_added"] for r in rs]
            s["proxy_tokens_added"] = {"median": _pct(toks, 0.5), "p95": _pct(toks, 0.95), "mean": round(statistics.mean(toks), 1)}
            s["agree_library_http"] = _share([r["http"] == r["library"] for r in rs])
            s["library_ms_median"] = _pct([r["library_ms"] for r in rs], 0.5)
            res[kind] = s
        out[part] = res
    return out


def markdown(summary: dict, meta: dict) -> str:
    lines = ["# bench recall", "", f"{meta['cases']} requests; embedder {meta['embedder']}; {meta['seconds']:.0f} s.", "",
             "| part | set | requests | none: library | none: HTTP | none: proxy | hit@1 | proxy tokens added median / p95 |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for part, res in summary.items():
        for kind, s in res.items():
            n = s["none"]
            tk = s["proxy_tokens_added"]
            lines.append(f"| {part} | {kind} | {s['requests']} | {_f(n['library'])} | {_f(n['http'])} | {_f(n['proxy'])} | "
                         f"{_f(s.get('hit@1'))} | {tk['median']:g} / {tk['p95']:g} |")
    return "\n".join(lines) + "\n"


def _f(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.3f}"


def run_recall(carmem: Path, slurp: Path, embedder: str = "minilm", per_request: int = 2, limit: Optional[int] = None,
               progress: bool = False) -> tuple[dict, list[dict], dict]:
    t0 = time.perf_counter()
    users = incar_users(carmem) + smarthome_users()
    requests = unrelated_requests() + related_requests()
    own = cases(requests, users, per_request=per_request)
    sl = cases(slurp_requests(slurp), users, per_request=1)
    cs = own + sl
    if limit is not None:
        cs = cs[::max(1, len(cs) // limit)][:limit]
    with tempfile.TemporaryDirectory() as tmp:
        mems = _memories(Path(tmp), users, embedder)
        try:
            rows = measure(mems, cs, progress)
        finally:
            for m in mems.values():
                m.close_jobs()
                m.store.close()
    meta = {"cases": len(cs), "embedder": embedder, "seconds": time.perf_counter() - t0,
            "users": {d: {p: sum(u.domain == d and u.part == p for u in users) for p in ("visible", "held_out")}
                      for d in ("incar", "smarthome")}}
    return summarise(rows), rows, meta


def register(app: typer.Typer) -> None:
    @app.command("recall")
    def recall(carmem: Path = typer.Option(Path("../shared/data/carmem/dataset.jsonl"), "--carmem",
                                           help="CarMem dataset.jsonl (its users 51-100 hold the in-car preferences)."),
               slurp: Path = typer.Option(Path("../shared/data/slurp/devel.jsonl"), "--slurp",
                                          help="SLURP devel.jsonl: real spoken commands, no preference should shape them."),
               embedder: str = typer.Option("minilm", "--embedder", help="What the memory embeds with (the gate was "
                                            "trained on minilm)."),
               per_request: int = typer.Option(2, "--per-request", min=1, help="Users asking each of boundmem's own requests."),
               limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only this many requests (a quick run)."),
               per_schema: bool = typer.Option(False, "--per-schema", help="Instead: the hand-written request sets "
                                               "per schema (in-car, smart home, travel, persona, customer support; "
                                               "boundmem_bench/recall_data), held-out schemas and writers apart, "
                                               "with episodes (no data files needed)."),
               out: Path = typer.Option(Path("bench-out/recall"), "--out")):
        """Memory injected per entry point for unrelated requests and SLURP commands; hit@1 and prompt tokens for
        related ones; visible and held-out parts apart. `--per-schema`: related hit@1, unrelated empty, own-value
        empty and tokens added on each schema's own requests."""
        if per_schema:
            from .recall_schemas import markdown as schema_markdown, run as run_schemas

            summary, rows = run_schemas(embedder, episodes=True)
            out.mkdir(parents=True, exist_ok=True)
            (out / "per-schema.json").write_text(json.dumps(summary, indent=2))
            (out / "per-schema-rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            md = "# bench recall --per-schema\n\n" + schema_markdown(summary)
            (out / "per-schema.md").write_text(md)
            typer.echo(md)
            return
        for p, what in ((carmem, "--carmem"), (slurp, "--slurp")):
            if not p.is_file():
                raise typer.BadParameter(f"{p} is not a file", param_hint=what)
        machine = machine_info()
        summary, rows, meta = run_recall(carmem, slurp, embedder, per_request, limit, progress=True)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps({"meta": meta, "summary": summary}, indent=2))
        (out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        md = markdown(summary, meta)
        (out / "report.md").write_text(md)
        write_results("recall", out, md, headline(summary), summary={"meta": meta, "summary": summary}, machine=machine)
        typer.echo(md)


def headline(summary: dict) -> list[Figure]:
    """README's figures of a recall run: the held-out part where there is one (the gate never saw it)."""
    def part(kind: str) -> tuple[str, dict]:
        name = next((p for p in ("held_out", "held_out_2", "visible") if kind in summary.get(p, {})), "")
        return name.replace("_", "-"), summary.get(name, {}).get(kind, {})

    (pr, rel), (pu, unrel), (ps, sl) = part("related"), part("unrelated"), part("slurp")
    return [Figure(f"recall gate, {pr} related requests: hit@1", rel.get("hit@1")),
            Figure(f"recall gate, {pu} unrelated requests: nothing injected", (unrel.get("none") or {}).get("library"), "pct"),
            Figure(f"recall gate, SLURP commands ({ps}): nothing injected", (sl.get("none") or {}).get("library"), "pct")]
