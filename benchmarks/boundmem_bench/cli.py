"""Mounts each benchmark module's command. Every command is always there: the modules import only core
dependencies at the top and load optional ones (matplotlib, openai, CAIM's parts) inside the command, so a missing
extra shows up as its own ImportError when the command runs, never as "No such command"."""
from __future__ import annotations

import functools

import typer

from boundmem.cli.options import ErrorExitGroup
from . import carmem, challenge, gvd, multisession, peer, perf, reader_bench, recall, render, scale, voice
from .report import PLOTTING, require_plots

app = typer.Typer(help="Reproduce the papers' experiments and measure performance.", no_args_is_help=True,
                  cls=ErrorExitGroup)



def _needs_plots(fn):
    """Run `require_plots` before the command (after click has handled --help), so nothing runs for minutes first."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        require_plots()
        return fn(*args, **kwargs)
    return run


for _mod in (carmem, gvd, multisession, perf, challenge, scale, peer, recall, reader_bench, voice, render):
    _mod.register(app)  # each module adds `@app.command(name)` for itself
for _cmd in app.registered_commands:
    if (_cmd.name or _cmd.callback.__name__) in PLOTTING:
        _cmd.callback = _needs_plots(_cmd.callback)
