"""`boundmem proxy` on a taken port (as `serve`): one clear error, exit 1 (README's "serve failed"), before the
models load or the proxy is announced; not uvicorn's exit 3."""
from __future__ import annotations

from typer.testing import CliRunner

from boundmem.cli.proxy import app as proxy_app


def test_proxy_on_a_taken_port_says_so_before_loading(tmp_path, taken_port):
    keys, port = taken_port
    r = CliRunner().invoke(proxy_app, ["--upstream", "http://127.0.0.1:9/v1", "--db", str(tmp_path / "s.db"),
                                       "--keys", str(keys), "--port", str(port), "--extractor", "keyword",
                                       "--maintainer", "rules", "--embedder", "hash"])
    assert r.exit_code == 1, r.output
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr and "--port" in r.stderr
    assert "loading models" not in r.stderr and "proxy for" not in r.stderr
