"""`boundmem serve`: the HTTP API + transparency page (default), and `boundmem serve mcp` (stdio MCP server)."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Optional

import typer

from .options import DB, EMBEDDER, EXTRACTOR, MAINTAINER, SCHEMA, ErrorExitGroup, cli_default, cli_settings
from .workers import worker_count
from ..errors import ConfigError, InputError

app = typer.Typer(help=__doc__, add_completion=False, invoke_without_command=True, cls=ErrorExitGroup)
KEYS = typer.Option(None, "--keys", callback=cli_default("service.keys"), show_default=False,
                    help="Keys file (TOML or JSON) mapping API key -> tenant (env BOUNDMEM_KEYS).")


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


def _listen(host: str, port: int, reuse_port: bool = False):
    """The listening socket, bound before anything is loaded or announced and handed to uvicorn, so a taken port
    is one clear error (exit 1, the exit table in docs/reference/errors.md) instead of "serving ..." followed by uvicorn's exit 3.
    `reuse_port` (several workers): the workers bind sockets of their own beside it (cli/workers.py)."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise InputError(f"--host {host!r}: cannot resolve it ({e.strerror})") from None
    family = infos[0][0]
    # the protocol named: asyncio turns Nagle's algorithm off only on sockets that say they are TCP (proto 0 is not),
    # and with it on, a response written as headers then body waits ~40 ms for the client's delayed ACK
    sock = socket.socket(family, socket.SOCK_STREAM, infos[0][2] or socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port and hasattr(socket, "SO_REUSEPORT"):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind(infos[0][4])
    except OSError as e:
        sock.close()
        typer.echo(f"error: cannot listen on {host}:{port}: {e.strerror or e} (another server holds the port? "
                   "choose another --port)", err=True)
        raise typer.Exit(1) from None
    sock.set_inheritable(True)
    return sock


def _memory_factory(db: str, schema: Optional[Path], extractor: str, maintainer: str, embedder: str):
    """Validate the cheap parts now (schema file) and defer building the Memory (model load) to first use."""
    from ..memory import build_memory
    from ..schema.load import builtin_schema, load_schema

    s = load_schema(schema) if schema else builtin_schema()
    settings = cli_settings()
    # endpoint settings are checked now: a missing key or model stops the server at start (exit 2 naming it) instead
    # of answering every request with 500 later; building these clients loads no model and sends nothing
    from ..extract.registry import uses_llm

    if uses_llm(extractor) or maintainer == "llm":
        from ..llm.registry import make_llm_client

        make_llm_client(settings)
    if (embedder or settings.embed.embedder) == "openai":
        from ..embed.registry import make_embedder

        make_embedder("openai", settings)
    return lambda: build_memory(settings, db=db, schema=s, extractor=extractor, maintainer=maintainer, embedder=embedder)


MAX_TURNS = typer.Option(100, "--max-turns", min=1, help="Most turns in one conversation (over it: 413 max_turns).")
MAX_TURN_CHARS = typer.Option(4_000, "--max-turn-chars", min=1, help="Longest turn, in characters (413 max_turn_chars).")
MAX_TOTAL_CHARS = typer.Option(20_000, "--max-total-chars", min=1,
                               help="Most characters in all turns of one conversation (413 max_total_chars).")
SECRET = typer.Option(None, "--token-secret-file", callback=cli_default("service.token_secret_file"), show_default=False,
                      help="File with the secret (>= 32 bytes) that signs user tokens (env BOUNDMEM_TOKEN_SECRET_FILE); "
                           "default for serve: a random one per process, so tokens end with it.")
STATE = typer.Option(None, "--token-state", callback=cli_default("service.token_state"), show_default=False,
                     help="SQLite file of token revocations, shared by servers with the same secret (env BOUNDMEM_TOKEN_STATE); "
                          "default: in memory.")


RATE = typer.Option(20.0, "--rate-limit", min=0.0,
                    help="Requests per second per tenant (0: no limit); over it: 429 + Retry-After.")
BURST = typer.Option(None, "--burst", min=1, help="Bucket size for --rate-limit (default: twice the rate).")
USER_RATE = typer.Option(5.0, "--user-rate-limit", min=0.0,
                         help="Requests per second per user token, inside its tenant's limit (0: none; burst: 4x).")
MAX_BODY = typer.Option(1_000_000, "--max-body-bytes", min=1, help="Refuse request bodies larger than this with 413.")
WORKERS = typer.Option(1, "--workers", min=0, help="Processes serving the port, each with its own models (0: one per "
                                                    "core); the rate limits are the server's, each worker takes its "
                                                    "share.")


def _throttle(rate: float, burst: Optional[int], user_rate: float, workers: int = 1):
    """The rate limits of `serve` and `proxy`; failed authentications per client address are always limited. With
    several workers each takes its share (the kernel spreads connections over them, not exactly evenly)."""
    from ..service.limits import DEFAULT_FAILURE_BURST, DEFAULT_FAILURE_RATE, RateLimiter, Throttle

    if workers > 1:
        rate, user_rate = rate / workers, user_rate / workers
        burst = max(1, -(-burst // workers)) if burst else None
    return Throttle(tenant=RateLimiter(rate, burst or max(1, int(round(2 * rate)))) if rate > 0 else None,
                    user=RateLimiter(user_rate, max(1, int(round(4 * user_rate)))) if user_rate > 0 else None,
                    failures=RateLimiter(DEFAULT_FAILURE_RATE, DEFAULT_FAILURE_BURST))


def _limits(max_turns: int, max_turn_chars: int, max_total_chars: int):
    from ..service.limits import ContentLimits

    return ContentLimits(max_turn_chars=max_turn_chars, max_turns=max_turns, max_total_chars=max_total_chars)


def _issuer(secret_file: Optional[Path], state: Optional[Path], ttl: Optional[int] = None, max_ttl: Optional[int] = None):
    return _issuer_factory(secret_file, state, ttl, max_ttl)()


def _issuer_factory(secret_file: Optional[Path], state: Optional[Path], ttl: Optional[int] = None,
                    max_ttl: Optional[int] = None, shared_dir: Optional[Path] = None):
    """Builds the token issuer of one worker. With `shared_dir` (several workers) the secret is fixed now and the
    revocations go to a file there unless `state` names one: a token minted by one worker verifies in every other,
    and a revocation seen by one is seen by all."""
    import os

    from ..service.tokens import DEFAULT_TTL, MAX_TTL, MIN_SECRET_BYTES, Generations, TokenIssuer, load_secret

    secret = load_secret(secret_file) if secret_file else (os.urandom(MIN_SECRET_BYTES) if shared_dir else None)
    if state is None and shared_dir is not None:
        state = shared_dir / "token-state.db"
    return lambda: TokenIssuer(secret, Generations(state) if state else None, default_ttl=ttl or DEFAULT_TTL,
                               max_ttl=max_ttl or MAX_TTL)


def _run_servers(sock, workers: int, build, banner: str) -> None:
    """Serve the app `build()` makes on `sock`: in this process (one worker), or in `workers` forked processes that
    each build their own (cli/workers.py says why processes). A worker that ends on its own ends the server with
    its exit code."""
    from .workers import run_workers, worker_socket

    if workers == 1:
        app = build()
        typer.echo(banner, err=True)
        _uvicorn(app, sock)
        return
    code = run_workers(workers, sock, lambda ready: _uvicorn(build(), worker_socket(sock), ready),
                       lambda: typer.echo(f"{banner}, {workers} worker processes", err=True))
    if code:
        raise typer.Exit(code)


def _uvicorn(app, sock, ready=None) -> None:
    import uvicorn

    from ..service.accesslog import install

    config = uvicorn.Config(app, log_level="info")   # host and port are the socket's
    install()   # after uvicorn set up its loggers: the access log shows pseudonyms, never user ids
    if ready is not None:
        ready()
    uvicorn.Server(config).run(sockets=[sock])


def _load_keys(keys: Optional[Path]):
    """The KeyRing of a keys file (exit 2 naming the problem if it is missing or bad)."""
    if keys is None:
        raise ConfigError("--keys is required: a TOML or JSON file mapping API key -> tenant")
    from ..service.auth import KeyRing

    return KeyRing.load(keys)


@app.callback()
def serve(ctx: typer.Context, db: str = DB, schema: Optional[Path] = SCHEMA,
          keys: Optional[Path] = KEYS,
          host: str = typer.Option("127.0.0.1", "--host"), port: int = typer.Option(8000, "--port"),
          extractor: str = EXTRACTOR, maintainer: str = MAINTAINER, embedder: str = EMBEDDER,
          max_body: int = MAX_BODY,
          max_turns: int = MAX_TURNS, max_turn_chars: int = MAX_TURN_CHARS, max_total_chars: int = MAX_TOTAL_CHARS,
          rate: float = RATE, burst: Optional[int] = BURST, user_rate: float = USER_RATE,
          token_secret: Optional[Path] = SECRET, token_state: Optional[Path] = STATE,
          token_ttl: int = typer.Option(900, "--token-ttl", min=1, help="Default lifetime of a user token, seconds."),
          token_max_ttl: int = typer.Option(86_400, "--token-max-ttl", min=1, help="Longest lifetime a token may be minted with."),
          workers: int = WORKERS,
          warm: bool = typer.Option(True, "--warm/--lazy", help="Load the models before accepting requests (default), "
                                                                 "or on the first request.")):
    """Serve the REST API (/docs, /openapi.json) and the transparency page (/ui)."""
    if ctx.invoked_subcommand is not None:
        return
    ring = _load_keys(keys)
    from ..service.app import create_app

    if token_ttl > token_max_ttl:
        raise InputError(f"--token-ttl {token_ttl} is longer than --token-max-ttl {token_max_ttl}")
    n = worker_count(workers)
    limits = _limits(max_turns, max_turn_chars, max_total_chars)
    factory = _memory_factory(db, schema, extractor, maintainer, embedder)
    sock = _listen(host, port, reuse_port=n > 1)
    port = sock.getsockname()[1]   # --port 0: the one the system chose

    def build():
        mem = factory
        if warm:  # so the first user does not wait for a model load
            mem = factory()
            mem.warm()
        return create_app(mem, ring, max_body_bytes=max_body, rate_limit=_throttle(rate, burst, user_rate, n),
                          limits=limits, tokens=issuer())

    try:
        with tempfile.TemporaryDirectory(prefix="boundmem-serve-") as shared:
            issuer = _issuer_factory(token_secret, token_state, token_ttl, token_max_ttl, Path(shared) if n > 1 else None)
            if warm:
                typer.echo("loading models ...", err=True)
            _run_servers(sock, n, build, f"boundmem serving {len(ring.tenants)} tenant(s) on http://{host}:{port} "
                                         "(page: /ui, API docs: /docs)")
    finally:
        sock.close()


@app.command("mcp")
def mcp_command(db: str = DB, schema: Optional[Path] = SCHEMA,
                tenant: str = typer.Option("mcp", "--tenant", help="Namespace for user ids (same scheme as the HTTP API's tenants)."),
                user: Optional[str] = typer.Option(None, "--user", "-u", help="The one user this server acts for."),
                token: Optional[str] = typer.Option(None, "--token", callback=cli_default("service.mcp_token"),
                                                    show_default=False,
                                                    help="Or: a user token minted by the HTTP API (POST /v1/users/{user}/tokens) "
                                                         "with the same --token-secret-file; its tenant and user bind the server "
                                                         "(env BOUNDMEM_MCP_TOKEN keeps it out of the process list)."),
                token_secret: Optional[Path] = SECRET, token_state: Optional[Path] = STATE,
                max_frame: int = typer.Option(1_000_000, "--max-frame-bytes", min=1,
                                              help="Longest JSON-RPC message; longer ones get an error reply."),
                max_turns: int = MAX_TURNS, max_turn_chars: int = MAX_TURN_CHARS, max_total_chars: int = MAX_TOTAL_CHARS,
                extractor: str = EXTRACTOR, maintainer: str = MAINTAINER, embedder: str = EMBEDDER):
    """Speak MCP on stdin/stdout for one user: tools add, recall, list_preferences, delete_preference, opt_out, opt_in,
    export, forget."""
    from ..user_id import InvalidUserId

    try:
        from ..service.mcp import Binding, build_server, run_stdio
    except ImportError as e:
        _fail(f"the MCP server needs the 'mcp' package (pip install 'boundmem[mcp]'): {e}")
    from ..service.tokens import TokenError

    if (user is None) == (token is None):
        raise InputError("bind the MCP server to exactly one user: --user USER (with --tenant) or --token TOKEN")
    if token is not None and token_secret is None:
        raise InputError("--token needs --token-secret-file: the secret of the API server that minted it")
    if token is not None and token_state is None:
        typer.echo("warning: no --token-state: a revocation by the API server (DELETE /v1/users/{user}/tokens) is not "
                   "seen by this process, so the token works here until it expires; give the API server's "
                   "--token-state file to see revocations at once", err=True)
    try:
        binding = Binding(tenant, user) if token is None else Binding(token=token, issuer=_issuer(token_secret, token_state))
    except (InvalidUserId, TokenError, ValueError) as e:
        _fail(f"cannot bind the MCP server: {e}")
    factory = _memory_factory(db, schema, extractor, maintainer, embedder)
    run_stdio(build_server(factory, binding, _limits(max_turns, max_turn_chars, max_total_chars)), max_frame)
