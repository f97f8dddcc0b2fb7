"""`boundmem caim`: CAIM memory from the shell; state lives in a SQLite file so it works across processes.

    boundmem caim ingest history.json -u emily          # each dated session -> post-thinking -> long-term memory
    boundmem caim say "I went hiking today" -u emily --date 2023-05-07 [--response "..."]   # one turn into STM
    boundmem caim end -u emily                          # post-think the open session
    boundmem caim recall "What did you recommend on May 4th?" -u emily --today 2023-05-07
    boundmem caim thoughts -u emily [--json]            # everything long-term memory holds about the user
    boundmem caim forget -u emily --yes
    boundmem caim ontology                              # the tag vocabulary
"""
from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from .options import ErrorExitGroup
from .options import cli_choice, cli_default, cli_settings
from ..embed.registry import EMBEDDERS
from ..errors import NotFoundError
from .options import cli_user_id as _user_id  # the one user-id rule, as on the main CLI, the API and MCP

app = typer.Typer(help="CAIM memory: sessions, post-thinking, recall.", no_args_is_help=True, add_completion=False,
                  cls=ErrorExitGroup)
console = Console()
err = Console(stderr=True)

DB = typer.Option(None, "--db", callback=cli_default("caim_db"), show_default=False,
                  help="SQLite file for CAIM memory (env BOUNDMEM_CAIM_DB; default boundmem-caim.db).")


USER = typer.Option(..., "--user", "-u", help="User id (USER, or TENANT:USER).", callback=_user_id)
# CAIM runs on MiniLM or, for tests, without a model ("hash": keyword tags, weak similarity); not on remote embeddings
CAIM_EMBEDDERS = tuple(n for n in EMBEDDERS.choices() if n.startswith("minilm") or n == "hash")
EMBEDDER = typer.Option("minilm", "--embedder", callback=cli_choice(CAIM_EMBEDDERS), help=" | ".join(CAIM_EMBEDDERS))
LLM = typer.Option(False, "--llm", help="Use the LLM from BOUNDMEM_LLM_* / OPENAI_API_KEY (local parts as fallback).")


def _fail(msg: str, code: int = 2):
    err.print(f"[red]error:[/red] {msg}")
    raise typer.Exit(code)


def _day(raw: Optional[str], name: str) -> date:
    if raw is None:
        return date.today()
    try:
        return date.fromisoformat(raw)
    except ValueError:
        _fail(f"{name} {raw!r} is not an ISO date (YYYY-MM-DD)")


def _caim(db: str, embedder: str = "hash", llm: bool = False):
    from ..caim.system import CAIM

    settings = cli_settings()   # --embedder was checked against CAIM_EMBEDDERS by its option
    emb = None
    if embedder != "hash":
        from ..embed.registry import make_embedder

        emb = make_embedder(embedder, settings)
    client = None
    if llm:   # a missing key or model is a ConfigError: exit 2 naming it (the app's ErrorExitGroup)
        from ..llm.registry import make_llm_client

        client = make_llm_client(settings)
    return CAIM(embedder=emb, llm=client, db=db)


def _counts(c: dict) -> str:
    return f"{c['new']} new, {c['duplicate']} merged, {c['contradiction']} superseded"


@app.command()
def ingest(file: Path, user: str = USER, db: str = DB, embedder: str = EMBEDDER, llm: bool = LLM):
    """Post-think each dated session of a dialogue file into long-term memory (the file is checked first)."""
    from ..caim.sessions import read_sessions

    sessions = read_sessions(file)
    mem = _caim(db, embedder, llm)
    if mem.store.stm(user):
        _fail(f"user {user!r} has an open session; run `boundmem caim end -u {user}` first")
    for day, turns in sessions:
        with mem.store.tx(user) as tx:
            for t in turns:
                tx.push(day, t)
        console.print(f"{day}: {len(turns)} turn(s) -> {_counts(mem.end_session(user))}")
    console.print(f"{user}: {len(mem.thoughts(user))} thought(s) in long-term memory")


@app.command()
def say(query: str, user: str = USER, db: str = DB, day: Optional[str] = typer.Option(None, "--date"),
        response: str = typer.Option("", "--response", help="The assistant's reply, if any.")):
    """Add one turn to the user's open session (short-term memory)."""
    mem = _caim(db)
    t = mem.add_turn(user, _day(day, "--date"), query, response)
    console.print(f"added turn {t.id} to the open session of {user}")


@app.command()
def end(user: str = USER, db: str = DB, embedder: str = EMBEDDER, llm: bool = LLM):
    """End the open session: post-think it into long-term memory and clear short-term memory."""
    mem = _caim(db, embedder, llm)
    n = len(mem.store.stm(user))
    if not n:
        console.print("no open session")
        return
    console.print(f"{n} turn(s) -> {_counts(mem.end_session(user))}")


@app.command()
def recall(query: str, user: str = USER, db: str = DB, today: Optional[str] = typer.Option(None, "--today"),
           k: int = typer.Option(5, "-k", min=1), embedder: str = EMBEDDER, llm: bool = LLM,
           always: bool = typer.Option(False, "--always", help="Skip the memory controller."),
           as_json: bool = typer.Option(False, "--json")):
    """What long-term memory holds for this message (after the memory controller's decision)."""
    mem = _caim(db, embedder, llm)
    mem.use_controller = not always
    res = mem.retrieve(user, query, _day(today, "--today"), k)
    if as_json:
        print(res.model_dump_json(indent=2))
        return
    if not res.retrieved:
        console.print("memory controller: no long-term memory needed")
        return
    if not res.items:
        console.print("nothing relevant in long-term memory")
    for i in res.items:
        console.print(f"{i.score:.3f}  [{i.timestamp}] {i.text}  <- {', '.join(i.source_turn_ids)}  "
                      f"[dim]{', '.join(i.tags)}[/dim]")


@app.command()
def thoughts(user: str = USER, db: str = DB, as_json: bool = typer.Option(False, "--json")):
    """Everything long-term memory holds about the user: the thoughts (the turns they cite are kept beside them as
    retrieval keys and erased by forget)."""
    from ..caim.store import CAIMStore

    store = CAIMStore(db)
    ts = store.thoughts(user)
    if as_json:
        print(json.dumps([t.model_dump(mode="json") for t in ts], indent=2))
        return
    t = Table(title=f"{len(ts)} thought(s) for {user}")
    for col in ("id", "date", "thought", "tags", "sources"):
        t.add_column(col, overflow="fold")
    for x in ts:
        t.add_row(x.id[:8], x.timestamp.isoformat(), x.text, "\n".join(x.tags), ", ".join(x.source_turn_ids))
    console.print(t)


@app.command()
def forget(user: str = USER, db: str = DB, yes: bool = typer.Option(False, "--yes", help="Do not ask.")):
    """Erase the user's long-term and short-term memory."""
    from ..caim.store import CAIMStore

    if not yes and not typer.confirm(f"Erase all CAIM memory of {user}?"):
        raise typer.Exit(1)
    store = CAIMStore(db)
    if user not in store.users():
        store.close()
        raise NotFoundError(f"no user {user!r} in {db}: nothing to forget")
    with store.tx(user) as tx:
        n = tx.forget()
    console.print(f"forgot {user}: {n} thought(s) erased")


@app.command()
def ontology(as_json: bool = typer.Option(False, "--json")):
    """The tag vocabulary thoughts are filed under."""
    from ..caim.ontology import builtin_ontology

    o = builtin_ontology()
    if as_json:
        print(o.model_dump_json(indent=2))
        return
    t = Table(title=f"ontology {o.name} v{o.version}: {len(o.tags)} tags")
    t.add_column("tag")
    t.add_column("description")
    for i in o.infos():
        t.add_row(i.tag, i.description)
    console.print(t)
