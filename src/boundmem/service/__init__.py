"""boundmem as a service: `create_app(memory, keys)` (REST API + transparency page at /ui) and an MCP server.

    boundmem serve --db mem.db --keys keys.toml --host 127.0.0.1 --port 8000
    boundmem serve mcp --db mem.db --tenant my-agent

keys.toml maps API keys to tenants (`"<key>" = "tenant"` or `"sha256:<hex>" = "tenant"`, optionally under [keys]).
"""
