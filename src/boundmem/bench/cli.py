"""Mounts each benchmark module's command; a module that is missing or cannot import is skipped."""
from __future__ import annotations

from importlib import import_module

import typer

app = typer.Typer(help="Reproduce the papers' experiments and measure performance.", no_args_is_help=True)

for _name in ("carmem", "gvd", "perf", "challenge"):
    try:
        _mod = import_module(f"boundmem.bench.{_name}")
    except ImportError:
        continue
    _mod.register(app)  # each module adds `@app.command(name)` for itself
