"""The `boundmem` command's root: the memory commands. The sub-apps (serve, proxy, caim, llm) are sibling modules
loaded lazily, so `boundmem add` never imports FastAPI; `bench` is mounted from the benchmarks' distribution."""
from __future__ import annotations

import json
import sys
from importlib import import_module, resources
from importlib.metadata import entry_points
from pathlib import Path
from typing import Optional, get_args

import typer
from rich.console import Console
from rich.table import Table

from .options import DB, EMBEDDER, EXTRACTOR, MAINTAINER, SCHEMA, ErrorExitGroup, cli_choice, cli_settings
from ..conversation import read_conversations
from ..errors import InputError, NotFoundError, UpstreamError, exit_code
from ..schema.display import category_labels, category_text, choice, reads, value_label
from ..models import Polarity
from ..schema.load import builtin_schema, dump_yaml, load_schema
from .options import cli_user_id as _user_id  # the one user-id rule, as on the API and MCP


app = typer.Typer(help=__doc__, no_args_is_help=True, add_completion=False, cls=ErrorExitGroup)
schema_app = typer.Typer(help="Show and validate category schemas.", no_args_is_help=True)
prefs_app = typer.Typer(help="What is stored for a user: list, export, edit, history, delete, forget; confirm or "
                        "dismiss an observation.", no_args_is_help=True)
app.add_typer(schema_app, name="schema")
app.add_typer(prefs_app, name="prefs")
audit_app = typer.Typer(help="Check the audit log's hash chains.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")
console = Console()
err = Console(stderr=True, soft_wrap=True)

USER = typer.Option(..., "--user", "-u", help="User id (USER, or TENANT:USER for a user of an API tenant or MCP server).",
                    callback=_user_id)
TENANT = typer.Option(None, "--tenant", help="API tenant (or MCP --tenant) of the user: users created through the HTTP "
                      "API or an MCP server are stored as TENANT:USER.")


def _fail(msg: str, code: int = 2):
    err.print(f"[red]error:[/red] {msg}")
    raise typer.Exit(code)


def _sid(user: str, tenant: Optional[str]) -> str:
    """The store's id of a user: USER, or TENANT:USER with --tenant (the API's and MCP's namespace)."""
    if tenant is None:
        return user
    from ..user_id import namespaced

    return namespaced(tenant, user)


def _existing(store, db: str, user: str, tenant: Optional[str]) -> str:
    """The store id of a user the store holds; anything else is an error naming the user (never "0 erased")."""
    sid = _sid(user, tenant)
    if store.has_user(sid):
        return sid
    why = f"no user {sid!r} in {db}"
    if store.verify_audit(sid).entries:   # the chains of a forgotten id stay in the log
        why += " (that user was forgotten; nothing is held)"
    elif tenant is None:
        near = [u for u in store.users() if u.endswith(f":{user}")]
        if near:
            why += (" (users created through the API are stored as TENANT:USER; did you mean "
                    + " or ".join(f"--tenant {u.rsplit(':', 1)[0]}" for u in near[:3]) + "?)")
    raise NotFoundError(why)


def _schema(path: Optional[Path]):
    return load_schema(path) if path else builtin_schema()


# opt-out/opt-in embed nothing: the local embedder (lazy, never loaded) keeps them independent of BOUNDMEM_EMBEDDER,
# so an endpoint's missing key cannot stop a user from switching a category off
NO_EMBEDDING = "minilm"


def _memory(db: str, schema: Optional[Path], extractor: str = "local", maintainer: str = "local",
            embedder: Optional[str] = None):
    from ..memory import build_memory

    return build_memory(cli_settings(), db=db, schema=_schema(schema), extractor=extractor, maintainer=maintainer,
                        embedder=embedder)


# --- schema -------------------------------------------------------------------------------
@schema_app.command("show")
def schema_show(schema: Optional[Path] = SCHEMA, tool: bool = typer.Option(False, "--tool", help="Print the LLM tool JSON."),
                as_yaml: bool = typer.Option(False, "--yaml", help="Print as YAML."),
                opt_out: list[str] = typer.Option([], "--opt-out", help="Prune a category first (repeatable).")):
    s = _schema(schema).prune(opt_out)
    if tool:
        from ..schema.tool import tool_definition

        print(json.dumps(tool_definition(s), indent=2))
        return
    if as_yaml:
        print(dump_yaml(s))
        return
    m, sb, d = s.counts()
    t = Table(title=f"{s.name} ({m} main, {sb} sub, {d} detail categories)")
    for col in ("main", "sub", "detail", "type", "attributes"):
        t.add_column(col)
    for ref in s.details():
        t.add_row(ref.main.name, ref.sub.name, ref.detail.name, "multi" if ref.detail.multiple else "single",
                  ", ".join(ref.detail.attributes[:6]) + (" ..." if len(ref.detail.attributes) > 6 else ""))
    console.print(t)


@schema_app.command("validate")
def schema_validate(path: Path):
    s = _schema(path)
    m, sb, d = s.counts()
    console.print(f"[green]ok[/green] {path}: {m} main, {sb} sub, {d} detail categories")


@schema_app.command("migrate")
def schema_migrate(schema: Optional[Path] = SCHEMA, db: str = DB,
                   yes: bool = typer.Option(False, "--yes", help="Do not ask.")):
    """Record another schema for a store deliberately (a store refuses any schema but the one it records).
    Preferences under categories the new schema lacks are kept, listed by `prefs list` under their path and
    erasable (`prefs delete`, `prefs forget`); they are counted here first."""
    import json as _json

    from ..store.schema_record import schema_record

    store, s = _store(db), _schema(schema)
    held = store.schema_record()
    old = _json.loads(held) if held else None
    if old is not None and (old.get("name"), old.get("fingerprint")) == (s.name, s.fingerprint):
        console.print(f"{db} already records schema {s.name!r}; nothing to do")
        return
    orphans = sum(1 for u in store.users() for p in store.preferences(u) if not s.allows(p.path))
    console.print(f"{db}: schema {old.get('name') if old else 'none recorded'!r} -> {s.name!r} (version {s.version}, "
                  f"fingerprint {s.fingerprint}); {orphans} stored preference(s) under categories the new schema "
                  "lacks (kept, visible and erasable)", soft_wrap=True)
    if not yes and not typer.confirm("Record the new schema?"):
        raise typer.Exit(1)
    store.record_schema(schema_record(s), replace=True)
    console.print(f"recorded schema {s.name!r}")


# --- ingest / recall ------------------------------------------------------------------------
@app.command()
def ingest(file: Path, user: str = USER, db: str = DB, schema: Optional[Path] = SCHEMA,
           extractor: str = EXTRACTOR, maintainer: str = MAINTAINER, embedder: str = EMBEDDER,
           tenant: Optional[str] = TENANT):
    """Extract and store the preferences in a conversation file (.json or .jsonl). Bad files store nothing."""
    convs = read_conversations(file)
    mem = _memory(db, schema, extractor, maintainer, embedder)
    user = _sid(user, tenant)
    for i, c in enumerate(convs):
        try:
            r = mem.add(c, user)
        except UpstreamError as e:   # says which conversation failed and what of the file was stored
            _fail(f"{c.id}: {e} (nothing stored from it; {i} earlier conversation(s) of this file were stored)",
                  exit_code(e))
        for d in r.decisions:
            pol = "" if d.candidate.polarity == "like" else f" ({d.candidate.polarity})"
            console.print(f"{c.id}: [bold]{d.action}[/bold] {d.candidate.path} = {d.candidate.attribute!r}{pol}")
        for b in r.blocked:
            console.print(f"{c.id}: [yellow]blocked[/yellow] {b.path} (opted out)")
        for o in r.observed:
            console.print(f"{c.id}: [bold]observed[/bold] {o.path} = {o.attribute!r} ({o.polarity}; a one-off choice, "
                          "not a preference yet)", soft_wrap=True)
        for p in r.promoted:
            console.print(f"{c.id}: [bold]promoted[/bold] {p.path} = {p.attribute!r} ({p.polarity}; chosen in enough "
                          "conversations)", soft_wrap=True)
        if not r.decisions and not r.blocked and not r.observed:
            console.print(f"{c.id}: nothing to remember (the {extractor} extractor found no lasting preference "
                          "in the allowed categories)")
    console.print(f"ingested {len(convs)} conversation(s) for {user}")


@app.command()
def recall(utterance: str, user: str = USER, db: str = DB, schema: Optional[Path] = SCHEMA,
           k: Optional[int] = typer.Option(5, "-k", help="How many; 0 = dynamic (the best match's subcategory)."),
           embedder: str = EMBEDDER, tenant: Optional[str] = TENANT,
           gate: bool = typer.Option(True, "--gate/--no-gate", help="Only what would change the answer (the recall "
                                     "gate); --no-gate: raw cosine top-k."),
           min_score: Optional[float] = typer.Option(None, "--min-score", min=-1.0, max=1.0,
                                                     help="Raw top-k of at least this cosine (instead of the gate).")):
    """The stored preferences that would change the answer to what the user just said (often none). A user the
    store does not hold is an error (exit 2; a user of an API tenant is named with --tenant), never "nothing stored"."""
    mem = _memory(db, schema, embedder=embedder)
    ns = _existing(mem.store, db, user, tenant)
    hits = mem.recall(utterance, ns, k=None if k == 0 else k, gate=gate, min_score=min_score)
    if not hits:
        console.print("nothing stored would change the answer (--no-gate: raw top-k)" if gate and min_score is None
                      and mem.store.preferences(ns) else "nothing stored for this user")
    for h in hits:
        p = h.preference
        why = f"  ({h.why})" if h.why else ""
        console.print(f"{h.score:.3f}  {p.path}  {_reads(mem.schema, p)!r}  <- \"{p.sentence}\"{why}")


@app.command("opt-out")
def opt_out(category: str, user: str = USER, db: str = DB, schema: Optional[Path] = SCHEMA, tenant: Optional[str] = TENANT):
    """Stop remembering a category (main, sub or detail; key, name or path) and purge what is stored there.

    The opt-out is kept apart from the user's data: it outlives `prefs forget`; only `opt-in` lifts it."""
    mem = _memory(db, schema, embedder=NO_EMBEDDING)
    purged = mem.opt_out(_sid(user, tenant), category)
    console.print(f"opted out of {mem.schema.resolve_prefix(category)}; purged {len(purged)} preference(s)")


@app.command("opt-in")
def opt_in(category: str, user: str = USER, db: str = DB, schema: Optional[Path] = SCHEMA, tenant: Optional[str] = TENANT):
    """Lift an opt-out: the category may be remembered again."""
    mem = _memory(db, schema, embedder=NO_EMBEDDING)
    changed = mem.opt_in(_sid(user, tenant), category)
    console.print("opted back in" if changed else "was not opted out")


# --- prefs ------------------------------------------------------------------------------------
def _store(db: str):
    from ..store.registry import open_store

    return open_store(db, cli_settings())


_label = category_text   # sub > detail in labels (a preference from another schema version still gets shown)
_reads = reads           # the value with its polarity ("Dislikes: Jazz", "Avoids: Highways") and the schema's label


def _print_prefs(prefs, title: str, schema=None):
    schema = schema or builtin_schema()
    t = Table(title=title)
    for col in ("id", "category", "preference", "said", "conversation", "updated"):
        t.add_column(col, overflow="fold")
    for p in prefs:
        t.add_row(p.id[:8], _label(schema, p.path), _reads(schema, p), p.sentence, p.conversation_id or "",
                  p.updated_at.strftime("%Y-%m-%d %H:%M"))
    console.print(t)


def _print_observations(obs, title: str, schema) -> None:
    t = Table(title=title)
    for col in ("id", "category", "choice", "said", "conversation", "noticed"):
        t.add_column(col, overflow="fold")
    for o in obs:
        t.add_row(o.id[:8], _label(schema, o.path),
                  choice(category_labels(schema, o.path)[-1], value_label(schema, o.path, o.attribute), o.polarity),
                  o.sentence, o.conversation_id or "", o.created_at.strftime("%Y-%m-%d %H:%M"))
    console.print(t)


def _print_pref_blocks(prefs, title: str, schema) -> None:
    """Preferences as lines that read the same at any width and through a pipe."""
    console.print(f"{title}: {len(prefs)} preference(s)", soft_wrap=True)
    for p in prefs:
        console.print(f"- {_label(schema, p.path)} = {_reads(schema, p)}", soft_wrap=True, markup=False)
        console.print(f'    said: "{p.sentence}"', soft_wrap=True, markup=False)
        console.print(f"    from conversation {p.conversation_id or '-'}, id {p.id[:8]}, "
                      f"updated {p.updated_at:%Y-%m-%d %H:%M}", soft_wrap=True, markup=False)


@prefs_app.command("list")
def prefs_list(user: str = USER, db: str = DB, as_json: bool = typer.Option(False, "--json"),
               schema: Optional[Path] = SCHEMA, tenant: Optional[str] = TENANT,
               observed: bool = typer.Option(False, "--observed", help="List the observations instead: one-off "
                                             "choices, not preferences until repeated or confirmed.")):
    """Every stored preference, with its polarity and the sentence it came from (--observed: the observations). A
    user the store does not hold is an error (exit 2; a user of an API tenant is named with --tenant), never
    "0 preference(s)"."""
    from ..store.schema_record import check_schema

    store, s = _store(db), _schema(schema)
    check_schema(store, s)   # labels from another schema would name the wrong categories
    sid = _existing(store, db, user, tenant)
    if observed:
        obs = store.observations(sid)
        if as_json:
            print(json.dumps([o.model_dump(mode="json") for o in obs], indent=2))
        else:
            _print_observations(obs, f"{len(obs)} observation(s) for {sid}: one-off choices, not remembered as "
                                     "preferences (prefs confirm ID / prefs dismiss ID)", s)
        return
    prefs = store.preferences(sid)
    if as_json:
        print(json.dumps([p.model_dump(mode="json") for p in prefs], indent=2))
    else:
        _print_prefs(prefs, f"{len(prefs)} preference(s) stored for {sid}", s)


def _observation(mem, db: str, user: str, tenant: Optional[str], obs_id: str):
    """(store id, the observation) for an id or a unique id prefix; an unknown one is an error naming it."""
    sid = _sid(user, tenant)
    matches = [o for o in mem.observations(sid) if o.id.startswith(obs_id)]
    if not matches:
        if not mem.store.has_user(sid):
            _existing(mem.store, db, user, tenant)   # says whether the user is missing or under a tenant
        raise NotFoundError(f"no observation id {obs_id!r} for user {sid!r}")
    if len(matches) > 1:
        raise InputError(f"ambiguous observation id {obs_id!r} for user {sid!r}")
    return sid, matches[0]


@prefs_app.command("confirm")
def prefs_confirm(obs_id: str = typer.Argument(..., metavar="ID", help="An observation id or a unique prefix of it."),
                  user: str = USER, db: str = DB, schema: Optional[Path] = SCHEMA, tenant: Optional[str] = TENANT,
                  embedder: str = EMBEDDER):
    """Remember an observation (a one-off choice) as a preference now."""
    mem = _memory(db, schema, embedder=embedder)
    sid, o = _observation(mem, db, user, tenant, obs_id)
    p = mem.confirm(sid, o.id)
    console.print(f"remembered {_label(mem.schema, p.path)}: {_reads(mem.schema, p)} (preference id {p.id[:8]})",
                  soft_wrap=True, markup=False)


@prefs_app.command("dismiss")
def prefs_dismiss(obs_id: str = typer.Argument(..., metavar="ID", help="An observation id or a unique prefix of it."),
                  user: str = USER, db: str = DB, schema: Optional[Path] = SCHEMA, tenant: Optional[str] = TENANT):
    """Erase an observation (a one-off choice); it is not remembered."""
    mem = _memory(db, schema, embedder=NO_EMBEDDING)
    sid, o = _observation(mem, db, user, tenant, obs_id)
    mem.dismiss(sid, o.id)
    console.print(f"dismissed {_label(mem.schema, o.path)}: {o.attribute!r} ({o.polarity})", soft_wrap=True,
                  markup=False)


@prefs_app.command("export")
def prefs_export(user: str = USER, db: str = DB, out: Optional[Path] = typer.Option(None, "--out", "-o"),
                 tenant: Optional[str] = TENANT):
    """Everything held about a user (preferences, observations, opt-outs, audit log) as JSON."""
    store = _store(db)
    data = store.export(_existing(store, db, user, tenant)).model_dump_json(indent=2)
    if out:
        out.write_text(data)
        console.print(f"wrote {out}")
    else:
        print(data)


@prefs_app.command("delete")
def prefs_delete(pref_id: str, user: str = USER, db: str = DB, tenant: Optional[str] = TENANT):
    """Delete one preference (by id or a unique id prefix); it is erased from the audit log too."""
    store = _store(db)
    user = _existing(store, db, user, tenant)
    p = store.delete(user, _unique_id([p.id for p in store.preferences(user)], pref_id, user),
                     cause="deleted by user (cli)")
    console.print(f"deleted {p.path} = {p.attribute!r}")


def _unique_id(ids, prefix: str, user: str) -> str:
    """The one preference id that starts with `prefix` (the 8 characters `prefs list` shows are enough)."""
    matches = sorted({i for i in ids if i.startswith(prefix)})
    if not matches:
        raise NotFoundError(f"no preference id {prefix!r} for user {user!r}")
    if len(matches) > 1:
        raise InputError(f"ambiguous preference id {prefix!r} for user {user!r}: {', '.join(m[:12] for m in matches[:5])}")
    return matches[0]


_polarity = cli_choice(get_args(Polarity))
POLARITY = typer.Option(None, "--polarity", callback=lambda ctx, param, v: v if v is None else _polarity(ctx, param, v),
                        help=" | ".join(get_args(Polarity)))


@prefs_app.command("edit")
def prefs_edit(pref_id: str, value: Optional[str] = typer.Option(None, "--value", help="The corrected value."),
               polarity: Optional[str] = POLARITY, user: str = USER, db: str = DB, schema: Optional[Path] = SCHEMA,
               tenant: Optional[str] = TENANT, embedder: str = EMBEDDER):
    """Correct one preference's value and/or polarity (by id or a unique id prefix); audited as edited by the user."""
    if value is None and polarity is None:
        raise InputError("nothing to change: give --value and/or --polarity")
    mem = _memory(db, schema, embedder=embedder)
    sid = _existing(mem.store, db, user, tenant)
    p = mem.update(sid, _unique_id([p.id for p in mem.store.preferences(sid)], pref_id, sid), attribute=value,
                   polarity=polarity)
    console.print(f"edited {_label(mem.schema, p.path)} = {p.attribute!r} ({p.polarity}), id {p.id[:8]}",
                  soft_wrap=True, markup=False)


@prefs_app.command("history")
def prefs_history(pref_id: str, user: str = USER, db: str = DB, schema: Optional[Path] = SCHEMA,
                  tenant: Optional[str] = TENANT, as_json: bool = typer.Option(False, "--json")):
    """How one preference (by id or a unique id prefix; also a deleted one) was learned, seen, updated and edited."""
    mem = _memory(db, schema, embedder=NO_EMBEDDING)
    sid = _existing(mem.store, db, user, tenant)
    pid = _unique_id([a.preference_id for a in mem.store.audit(sid) if a.preference_id], pref_id, sid)
    entries = mem.history(sid, pid)
    if as_json:
        print(json.dumps([a.model_dump(mode="json") for a in entries], indent=2))
        return
    console.print(f"history of preference {pid} ({len(entries)} entries)", soft_wrap=True)
    for a in entries:
        console.print(f"{a.seq:>4}  {a.at:%Y-%m-%d %H:%M}  {a.op:<7} {_change(a)}  ({a.why}"
                      + (f"; {a.cause}" if a.cause and a.cause != "erased" else "") + ")", soft_wrap=True, markup=False)


def _change(a) -> str:
    """What an audit entry changed, in one phrase ("'Italian' -> 'Mexican'"); "content erased" after a deletion."""
    def said(d):
        return f"{d['attribute']!r}" + ("" if d.get("polarity", "like") == "like" else f" ({d['polarity']})")

    if a.before is None and a.after is None:
        return "content erased" if a.cause == "erased" else "-"
    if a.before and a.after and "attribute" in a.before and "attribute" in a.after:
        return f"{said(a.before)} -> {said(a.after)}"
    d = a.after or a.before
    return said(d) if "attribute" in d else ", ".join(f"{k}={v!r}" for k, v in d.items())


@prefs_app.command("forget")
def prefs_forget(user: str = USER, db: str = DB, yes: bool = typer.Option(False, "--yes", help="Do not ask."),
                 tenant: Optional[str] = TENANT):
    """Erase everything stored about a user (the id is pseudonymised); the erasure itself is recorded, opt-outs stay."""
    store = _store(db)
    sid = _existing(store, db, user, tenant)
    if not yes and not typer.confirm(f"Erase all memory of {sid}?"):
        raise typer.Exit(1)
    from ..jobs import JobQueue

    jobs = JobQueue(store)
    try:
        jobs.forget_user(sid)   # conversations queued for the user (by the API's async ingest) go first
    finally:
        jobs.close()
    n = store.forget(sid, cause="user asked to be forgotten (cli)")
    console.print(f"forgot {sid}: {n} preference(s) erased")


# --- audit ------------------------------------------------------------------------------------
@audit_app.command("verify")
def audit_verify(user: Optional[str] = typer.Option(None, "--user", "-u", help="Only this user (default: every user)."),
                 db: str = DB, tenant: Optional[str] = TENANT):
    """Recompute the audit log's per-user hash chains. Exit 0 if intact, 1 naming the first broken entry."""
    store = _store(db)
    sid = None if user is None else _sid(user, tenant)
    check = store.verify_audit(sid)
    if sid is not None and not check.entries and not store.has_user(sid):
        raise NotFoundError(f"no user {sid!r} in {db}")
    if not check.ok:
        err.print(f"[red]audit log broken[/red]: user {check.user!r}, entry seq {check.seq}: {check.reason}")
        raise typer.Exit(1)
    console.print(f"audit log ok: {check.entries} entries of {check.users} user(s), every chain intact")


# --- demo -------------------------------------------------------------------------------------
@app.command()
def demo(db: str = typer.Option("boundmem-demo.db", "--db"), user: str = typer.Option("demo-driver", "--user", callback=_user_id),
         utterance: str = typer.Option("I'm hungry, where should we stop for lunch?", "--ask")):
    """Ingest a few in-car conversations on the embedded defaults, show what was kept and why, then recall."""
    from ..conversation import render
    from ..demo.wording import decision_text, recall_text

    mem = _memory(db, None, embedder="minilm")   # the embedded defaults, whatever BOUNDMEM_EMBEDDER says
    if mem.store.has_user(user):   # a fresh demo on every run
        mem.forget(user)
    src = resources.files("boundmem.demo").joinpath("conversations.json")
    with resources.as_file(src) as p:
        convs = read_conversations(p)
    for c in convs:
        console.rule(f"conversation {c.id}")
        console.print(render(c), soft_wrap=True, markup=False)
        held = mem.preferences(user)
        r = mem.add(c, user)
        if not r.decisions:
            console.print("[dim]-> nothing worth remembering[/dim]")
        for d in r.decisions:
            console.print(f"[green]->[/green] {decision_text(mem.schema, d, held)}", soft_wrap=True, highlight=False)
    console.rule("stored")
    prefs = mem.preferences(user)
    if console.is_terminal and console.width >= 120:
        _print_prefs(prefs, f"what boundmem holds about {user}", mem.schema)
    else:  # piped or narrow: one block per preference, never a table folded into 9-character columns
        _print_pref_blocks(prefs, f"what boundmem holds about {user}", mem.schema)
    console.rule(f"recall: {utterance!r}")
    console.print(recall_text(mem.schema, mem.recall(utterance, user, k=None)), soft_wrap=True, markup=False)


# --- sub-apps, each in its own module of this package ---------------------------------------------
_LAZY = {"caim": ("boundmem.cli.caim", "CAIM memory: sessions, post-thinking, recall."),
         "serve": ("boundmem.cli.serve", "HTTP API and transparency page; MCP server."),
         "proxy": ("boundmem.cli.proxy", "OpenAI-compatible chat proxy that adds the user's memory and learns."),
         "llm": ("boundmem.cli.llm", "LLM endpoints: a local offline llama.cpp server, the extraction tool, usage logs.")}
# Commands other distributions add (the benchmarks' `bench`, from `boundmem-bench`): entry points of this group, each a
# typer app. A command users look for that is not installed gets a hint instead of "No such command".
COMMAND_GROUP = "boundmem.commands"
_NOT_INSTALLED = {"bench": "`boundmem bench` comes with the benchmarks: pip install --no-deps -e ./benchmarks "
                           "(from a checkout of the repository)"}


def _plugins() -> dict[str, object]:
    return {ep.name: ep for ep in entry_points(group=COMMAND_GROUP)}


def _mount(only: Optional[str] = None) -> None:
    """Add the lazily imported sub-apps (all of them, or just the one a command line names, to keep start-up fast)."""
    mounted = {g.name for g in app.registered_groups}
    for name, (mod, help_) in _LAZY.items():
        if name in mounted or (only is not None and only != name):
            continue
        # no ImportError is swallowed here: a broken install must say what is missing, not "No such command"
        app.add_typer(import_module(mod).app, name=name, help=help_)
    for name, ep in _plugins().items():
        if name in mounted or name in _LAZY or (only is not None and only != name):
            continue
        sub = ep.load()
        app.add_typer(sub, name=name, help=(sub.info.help or None))


def full_app() -> typer.Typer:
    """The `boundmem` app with every sub-app mounted, as `boundmem --help` shows it: what the docs' CLI reference
    is generated from."""
    _mount()
    return app


def main() -> None:
    first = sys.argv[1] if len(sys.argv) > 1 else None
    if first in _LAZY:
        _mount(first)
    elif first in _NOT_INSTALLED and first not in _plugins():
        err.print(f"[red]{first}[/red]: not installed. {_NOT_INSTALLED[first]}")
        raise SystemExit(2)
    elif first is not None and first in _plugins():
        _mount(first)
    elif first is None or first.startswith("-"):  # top-level help lists everything
        _mount()
    app()


if __name__ == "__main__":
    main()
