"""`boundmem proxy --upstream URL`: an OpenAI-compatible /v1/chat/completions that recalls the user's memory into the
system message, forwards to the upstream model server and learns from the exchange in the background."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Optional

import typer

from .options import DB, EMBEDDER, EXTRACTOR, MAINTAINER, SCHEMA, ErrorExitGroup, cli_default, cli_settings
from ..config import secret_from
from .serve import (BURST, KEYS, MAX_BODY, MAX_TOTAL_CHARS, MAX_TURN_CHARS, MAX_TURNS, RATE, SECRET, STATE,
                    USER_RATE, WORKERS, _fail, _issuer_factory, _limits, _listen, _load_keys, _memory_factory,
                    _run_servers, _throttle)
from .workers import worker_count

app = typer.Typer(help=__doc__, add_completion=False, invoke_without_command=True, cls=ErrorExitGroup)


@app.callback()
def proxy(upstream: str = typer.Option(None, "--upstream", callback=cli_default("service.upstream_url"), show_default=False,
                                       help="The model server's OpenAI base URL, e.g. http://127.0.0.1:11434/v1 "
                                            "(env BOUNDMEM_UPSTREAM_URL)."),
          upstream_key_env: str = typer.Option("BOUNDMEM_UPSTREAM_API_KEY", "--upstream-key-env",
                                               help="Name of the environment variable holding the upstream's API key "
                                                    "(never on the command line)."),
          db: str = DB, schema: Optional[Path] = SCHEMA,
          keys: Optional[Path] = KEYS,
          host: str = typer.Option("127.0.0.1", "--host"), port: int = typer.Option(8001, "--port"),
          k: int = typer.Option(5, "--k", min=1, max=50, help="At most this many memories (preferences and episodes) "
                                "into the system message; only those that would change the answer."),
          gate: bool = typer.Option(True, "--gate/--no-gate", help="The recall gate (default): inject only what would "
                                    "change the answer, often nothing; --no-gate: raw top-k for every request."),
          min_score: Optional[float] = typer.Option(None, "--min-score", min=-1.0, max=1.0,
                                                    help="Raw top-k of at least this cosine (instead of the gate)."),
          timeout: float = typer.Option(120.0, "--timeout", min=1.0, help="Seconds to wait for the upstream."),
          extractor: str = EXTRACTOR, maintainer: str = MAINTAINER, embedder: str = EMBEDDER,
          token_secret: Optional[Path] = SECRET, token_state: Optional[Path] = STATE,
          max_body: int = MAX_BODY,
          max_turns: int = MAX_TURNS, max_turn_chars: int = MAX_TURN_CHARS, max_total_chars: int = MAX_TOTAL_CHARS,
          rate: float = RATE, burst: Optional[int] = BURST, user_rate: float = USER_RATE,
          forward_user: bool = typer.Option(False, "--forward-user/--no-forward-user",
                                            help="Send the request's `user` field on to the upstream (default: "
                                                 "removed, the end user's id stays here)."),
          workers: int = WORKERS):
    """Serve the memory proxy (point any OpenAI SDK's base_url at http://HOST:PORT/v1)."""
    if not upstream:
        _fail("--upstream is required: the OpenAI-compatible base URL of the model server")
    ring = _load_keys(keys)
    from ..proxy.app import create_proxy
    from ..retrieve.format import MemoryFormat

    memory_format = MemoryFormat.from_file(cli_settings().service.memory_template)

    n = worker_count(workers)
    factory = _memory_factory(db, schema, extractor, maintainer, embedder)
    sock = _listen(host, port, reuse_port=n > 1)   # as serve: a taken port is one clear error before the models load (exit 1)
    port = sock.getsockname()[1]

    def build():
        mem = factory()
        mem.warm()
        return create_proxy(mem, ring, upstream, upstream_key=secret_from(upstream_key_env), k=k, tokens=issuer(),
                            timeout=timeout, max_body_bytes=max_body, rate_limit=_throttle(rate, burst, user_rate, n),
                            limits=_limits(max_turns, max_turn_chars, max_total_chars), forward_user=forward_user,
                            gate=gate, min_score=min_score, memory_format=memory_format)

    try:
        with tempfile.TemporaryDirectory(prefix="boundmem-proxy-") as shared:
            issuer = _issuer_factory(token_secret, token_state, shared_dir=Path(shared) if n > 1 else None)
            typer.echo("loading models ...", err=True)
            _run_servers(sock, n, build, f"boundmem proxy for {upstream} on http://{host}:{port}/v1 "
                                         f"({len(ring.tenants)} tenant(s))")
    finally:
        sock.close()
