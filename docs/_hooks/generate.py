"""MkDocs hook: the reference pages that are generated from the code, never written by hand.

Why: a settings table, a CLI listing or a route list copied into Markdown drifts from the code the day either
changes. A page asks for one with a marker line (`<!-- generate: settings -->`, `cli`, `http`, `changelog`) and the
marker is replaced at build time from `Settings`, the click app behind the `boundmem` command, the service's
OpenAPI document and CHANGELOG.md. `mkdocs build --strict` fails on a marker nobody knows."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- generate: ([a-z-]+) -->$", re.M)


def _cell(text: Any) -> str:
    """One Markdown table cell: pipes escaped, line breaks joined."""
    return " ".join(str(text).split()).replace("|", "\\|")


def settings_table() -> str:
    """Every field of `Settings`, its variable, default and meaning, from the field's own description."""
    from pydantic import BaseModel

    from boundmem.config import Settings, env_name

    rows = ["| variable | field | default | what it does |", "|---|---|---|---|"]

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                walk(ann, f"{prefix}{name}.")
                continue
            path = f"{prefix}{name}"
            desc = field.description or ""
            var = env_name(path)
            if not re.fullmatch(r"[A-Z][A-Z0-9_]+", var):
                continue   # not read from the environment (the LLM client's name: one so far)
            what = desc[len(var):].lstrip(":, ") if desc.startswith(var) else desc
            default = field.default
            shown = "unset" if default is None else ("" if default == () else default)
            shown = str(shown).replace(str(Path.home()), "~")
            rows.append(f"| `{var}` | `{path}` | `{_cell(shown)}` | {_cell(what)} |")

    walk(Settings, "")
    return "\n".join(rows)


def cli_reference() -> str:
    """Every command of `boundmem`, its help and its options, walked from the click app typer builds."""
    import typer

    from boundmem.cli.root import full_app

    out: list[str] = []

    def walk(cmd: Any, path: list[str], parent: Any) -> None:
        ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent)
        if len(path) > 1:
            out.append(f"## `{' '.join(path)}`\n")
            out.append(f"```text\n{' '.join(path)} {' '.join(cmd.collect_usage_pieces(ctx))}\n```\n")
            if cmd.help:
                out.append(cmd.help.strip().replace("\b\n", "") + "\n")
            rows = []
            for p in cmd.get_params(ctx):
                rec = p.get_help_record(ctx) or (p.name.upper(), getattr(p, "help", None) or "argument")
                rows.append(f"| `{_cell(rec[0])}` | {_cell(rec[1])} |")
            if rows:
                out.append("| option | what it does |\n|---|---|\n" + "\n".join(rows) + "\n")
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, [*path, name], ctx)

    walk(typer.main.get_command(full_app()), ["boundmem"], None)
    return "\n".join(out)


def openapi_document() -> dict[str, Any]:
    """The service's OpenAPI document, built from the app without opening a store (no request is served)."""
    from boundmem.service.app import create_app

    def no_memory() -> Any:
        raise RuntimeError("the docs build serves no request")

    return create_app(no_memory, {"a-long-secret-key-for-the-docs": "docs"}).openapi()


def _schema_name(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " or ".join(_schema_name(s) for s in schema["anyOf"])
    if schema.get("type") == "array":
        return f"list of {_schema_name(schema.get('items', {}))}"
    return schema.get("type", "object")


def http_reference() -> str:
    """Every route of the service: what it takes (path, query, body fields) and what it answers."""
    doc = openapi_document()
    comps = doc.get("components", {}).get("schemas", {})
    out: list[str] = []
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            out.append(f"## `{method.upper()} {path}`\n")
            if op.get("summary") or op.get("description"):
                out.append(_cell(op.get("description") or op.get("summary")) + "\n")
            rows = [f"| `{p['name']}` | {p['in']} | {_schema_name(p.get('schema', {}))} | "
                    f"{_cell(p.get('description', ''))} |" for p in op.get("parameters", [])]
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body:
                name = _schema_name(body)
                model = comps.get(name, {})
                for field, spec in model.get("properties", {}).items():
                    rows.append(f"| `{field}` | body ({name}) | {_schema_name(spec)} | "
                                f"{_cell(spec.get('description', ''))} |")
            if rows:
                out.append("| name | in | type | meaning |\n|---|---|---|---|\n" + "\n".join(rows) + "\n")
            answers = [f"{code} {_schema_name(r.get('content', {}).get('application/json', {}).get('schema', {}))}"
                       if r.get("content") else f"{code} {r.get('description', '')}"
                       for code, r in op.get("responses", {}).items()]
            out.append("Answers: " + _cell(", ".join(answers)) + "\n")
    return "\n".join(out)


def changelog() -> str:
    """CHANGELOG.md without its own title (the page has one)."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    return text.split("\n", 1)[1] if text.startswith("# ") else text


GENERATORS: dict[str, Callable[[], str]] = {
    "settings": settings_table, "cli": cli_reference, "http": http_reference, "changelog": changelog}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def replace(m: re.Match[str]) -> str:
        if m.group(1) not in GENERATORS:
            raise ValueError(f"{page.file.src_path}: no generator named {m.group(1)!r}")
        return GENERATORS[m.group(1)]()

    return MARKER.sub(replace, markdown)


def on_files(files: Any, config: Any) -> Any:
    """The OpenAPI document itself, beside the HTTP reference page, for tools that read it."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, "reference/openapi.json", content=json.dumps(openapi_document(), indent=1)))
    return files
