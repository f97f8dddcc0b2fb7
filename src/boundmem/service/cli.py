"""`boundmem serve`: the HTTP API + transparency page (default), and `boundmem serve mcp` (stdio MCP server)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(help=__doc__, add_completion=False, invoke_without_command=True)

DB = typer.Option(os.environ.get("BOUNDMEM_DB", "boundmem.db"), "--db", help="SQLite file or postgresql:// URL (env BOUNDMEM_DB).")
SCHEMA = typer.Option(None, "--schema", help="Schema file (.yaml or CarMem .csv); default: built-in in-car schema.")
EXTRACTOR = typer.Option("local", "--extractor", help="local | keyword | llm")
MAINTAINER = typer.Option("local", "--maintainer", help="local | rules | llm")
EMBEDDER = typer.Option("minilm", "--embedder", help="minilm (or minilm-onnx, minilm-torch) | openai | hash (tests only)")


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


def _memory_factory(db: str, schema: Optional[Path], extractor: str, maintainer: str, embedder: str):
    """Validate the cheap parts now (schema file) and defer building the Memory (model load) to first use."""
    from ..factory import build_memory
    from ..schema.load import SchemaFileError, builtin_schema, load_schema

    try:
        s = load_schema(schema) if schema else builtin_schema()
    except SchemaFileError as e:
        _fail(str(e))
    return lambda: build_memory(db=db, schema=s, extractor=extractor, maintainer=maintainer, embedder=embedder)


@app.callback()
def serve(ctx: typer.Context, db: str = DB, schema: Optional[Path] = SCHEMA,
          keys: Optional[Path] = typer.Option(os.environ.get("BOUNDMEM_KEYS"), "--keys",
                                              help="Keys file (TOML or JSON) mapping API key -> tenant (env BOUNDMEM_KEYS)."),
          host: str = typer.Option("127.0.0.1", "--host"), port: int = typer.Option(8000, "--port"),
          extractor: str = EXTRACTOR, maintainer: str = MAINTAINER, embedder: str = EMBEDDER,
          max_body: int = typer.Option(1_000_000, "--max-body-bytes", min=1,
                                       help="Refuse request bodies larger than this with 413."),
          rate: float = typer.Option(0.0, "--rate-limit", min=0.0,
                                     help="Requests per second per tenant (0: no limit); over it: 429 + Retry-After."),
          burst: Optional[int] = typer.Option(None, "--burst", min=1, help="Bucket size for --rate-limit (default: the rate)."),
          warm: bool = typer.Option(True, "--warm/--lazy", help="Load the models before accepting requests (default), "
                                                                 "or on the first request.")):
    """Serve the REST API (/docs, /openapi.json) and the transparency page (/ui)."""
    if ctx.invoked_subcommand is not None:
        return
    if keys is None:
        _fail("--keys is required: a TOML or JSON file mapping API key -> tenant")
    from .app import create_app
    from .auth import KeyRing, KeysFileError

    try:
        ring = KeyRing.load(keys)
    except KeysFileError as e:
        _fail(str(e))
    factory = _memory_factory(db, schema, extractor, maintainer, embedder)
    if warm:  # so the first user does not wait for a model load
        typer.echo("loading models ...", err=True)
        mem = factory()
        mem.warm()
        factory = mem
    import uvicorn

    typer.echo(f"boundmem serving {len(ring.tenants)} tenant(s) on http://{host}:{port} (page: /ui, API docs: /docs)", err=True)
    from .limits import RateLimiter

    limiter = RateLimiter(rate, burst) if rate > 0 else None
    uvicorn.run(create_app(factory, ring, max_body_bytes=max_body, rate_limit=limiter), host=host, port=port, log_level="info")


@app.command("mcp")
def mcp_command(db: str = DB, schema: Optional[Path] = SCHEMA,
                tenant: str = typer.Option("mcp", "--tenant", help="Namespace for user ids (same scheme as the HTTP API's tenants)."),
                extractor: str = EXTRACTOR, maintainer: str = MAINTAINER, embedder: str = EMBEDDER):
    """Speak MCP on stdin/stdout: tools add, recall, list_preferences, delete_preference."""
    from .auth import TENANT_PATTERN, _TENANT_RE

    if not _TENANT_RE.match(tenant):
        _fail(f"--tenant {tenant!r} must match {TENANT_PATTERN}")
    try:
        from .mcp import build_server
    except ImportError as e:
        _fail(f"the MCP server needs the 'mcp' package (pip install 'boundmem[mcp]'): {e}")
    factory = _memory_factory(db, schema, extractor, maintainer, embedder)
    build_server(factory, tenant).run("stdio")
