"""boundmem as a service: `create_app(memory, keys)` (REST API + transparency page at /ui) and an MCP server.

    boundmem serve --db mem.db --keys keys.toml --host 127.0.0.1 --port 8000
    boundmem serve mcp --db mem.db --tenant my-agent --user alice      (or --token, a user token)

keys.toml maps API keys to tenants (`"<key>" = "tenant"` or `"sha256:<hex>" = "tenant"`, optionally under [keys]).
The tenant key mints per-user tokens (`POST /v1/users/{user}/tokens`, see tokens.py) for the page and for MCP.
"""
