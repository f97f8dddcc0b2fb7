"""What every boundmem command line shares: options backed by the Settings (an option left out takes the value of its
environment variable, a stage option accepts only its registry's names) and the one mapping of errors to exit
codes. Kept apart from config.py so the library never needs typer."""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import typer
from pydantic import SecretStr
from typer.core import TyperGroup

from ..config import Settings, env_name
from ..embed.registry import EMBEDDERS
from ..errors import BoundmemError, ConfigError, exit_code
from ..extract.registry import EXTRACTORS
from ..maintain.registry import MAINTAINERS
from ..user_id import InvalidUserId, check_store_user_id

_META_KEY = "boundmem.settings"


def cli_settings(ctx: Optional[typer.Context] = None) -> Settings:
    """The Settings of the running command, read from the environment. Given the click context, they are read once
    per invocation and kept in its `meta` (shared by every option and subcommand of that invocation), so no state
    outlives the command. An invalid variable ends the command with exit code 2 and a message naming it."""
    if ctx is not None and _META_KEY in ctx.meta:
        return ctx.meta[_META_KEY]
    try:
        settings = Settings.from_env()
    except ConfigError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from e
    if ctx is not None:
        ctx.meta[_META_KEY] = settings
    return settings


def cli_default(field: Optional[str], choices: Sequence[str] = ()) -> Callable[..., Any]:
    """A typer option callback: an option left out takes Settings' value of `field` ("db", "embed.embedder",
    "service.keys"; the settings' types are the options' own: str, Path); with `choices` (a registry's), any other
    name is a usage error that lists them and says where the name came from."""

    def fill(ctx: typer.Context, param: Any, value: Any) -> Any:
        source = ""
        if value is None and field is not None:
            value = cli_settings(ctx)
            for part in field.split("."):
                value = getattr(value, part)
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            if value is None:
                return None
            source = f" (from {env_name(field)})"
        if choices and value not in choices:
            raise typer.BadParameter(f"{value!r}{source} is not one of {', '.join(choices)}", ctx, param)
        return value

    return fill


def cli_choice(choices: Sequence[str]) -> Callable[..., Any]:
    """A typer option callback that accepts only `choices` (a registry's), naming them otherwise."""
    return cli_default(None, choices)


# --- the options every command that opens a memory shares: one definition, so names, help and checks agree ---------
DB = typer.Option(None, "--db", callback=cli_default("db"), show_default=False,
                  help="SQLite file or postgresql:// URL (env BOUNDMEM_DB; default boundmem.db).")
SCHEMA = typer.Option(None, "--schema", help="Schema file (.yaml or CarMem .csv); default: built-in in-car schema.")
EMBEDDER = typer.Option(None, "--embedder", callback=cli_default("embed.embedder", EMBEDDERS.choices()), show_default=False,
                        help=f"{' | '.join(EMBEDDERS.choices())} (env BOUNDMEM_EMBEDDER; default minilm; minilm-onnx and "
                             "minilm-torch give minilm's vectors; hash: tests only); must match what the store was "
                             "filled with.")
EXTRACTOR = typer.Option("local", "--extractor", callback=cli_choice(EXTRACTORS.choices()),
                         help=" | ".join(EXTRACTORS.choices()))
MAINTAINER = typer.Option("local", "--maintainer", callback=cli_choice(MAINTAINERS.choices()),
                          help=" | ".join(MAINTAINERS.choices()))


class ErrorExitGroup(TyperGroup):
    """The one place a command's deliberate errors become an exit status (`errors.EXIT_CODES`) and one line
    "error: <message>" on stderr, without a traceback; anything else keeps its traceback. Every boundmem command
    group sets it (the root `boundmem` and `serve`, `caim`, `proxy`, `bench`, `llm`), so a subcommand behaves the
    same whether it runs under `boundmem` or on its own."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BoundmemError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(exit_code(e)) from e


def cli_user_id(value: object) -> object:
    """The user-id rule as an option callback (main CLI and `boundmem caim`): USER or TENANT:USER, else a usage error
    naming the value and the rule (the rule itself is user_id's, as on the API and MCP)."""
    if value is None:
        return value
    try:
        return check_store_user_id(value)
    except InvalidUserId as e:
        raise typer.BadParameter(str(e)) from e
