"""`python -m boundmem.cli.mcp ARGS`: the MCP server as one plain command, for agent frameworks that want a
module to run; the same as `boundmem serve mcp ARGS`. Its own module so that the MCP server (service.mcp) never
imports the command line that starts it."""
from __future__ import annotations

import sys


def main() -> None:
    from .serve import app

    app(["mcp", *sys.argv[1:]])


if __name__ == "__main__":
    main()
