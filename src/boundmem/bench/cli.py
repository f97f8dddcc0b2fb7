"""Mounts each benchmark module's command. Every command is always there: the modules import only core
dependencies at the top and load optional ones (matplotlib, openai, CAIM's parts) inside the command, so a missing
extra shows up as its own ImportError when the command runs, never as "No such command"."""
from __future__ import annotations

import typer

from ..cli_options import ErrorExitGroup
from . import carmem, challenge, gvd, perf

app = typer.Typer(help="Reproduce the papers' experiments and measure performance.", no_args_is_help=True,
                  cls=ErrorExitGroup)

for _mod in (carmem, gvd, perf, challenge):
    _mod.register(app)  # each module adds `@app.command(name)` for itself
