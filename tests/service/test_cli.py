"""`boundmem serve` as an operator runs it: a real process, a keys file, a port."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import httpx
import pytest

from typer.testing import CliRunner

from boundmem.service.auth import KeyRing, KeysFileError
from boundmem.cli.serve import app as serve_app

from .conftest import KEY_A, KEY_B

CLI = [sys.executable, "-m", "boundmem.cli", "serve"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_starts_uvicorn_with_the_keys_file(tmp_path):
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[keys]\n"{KEY_A}" = "acme"\n')
    secret = tmp_path / "token.secret"
    secret.write_text("x" * 44 + "\n")
    port = _free_port()
    proc = subprocess.Popen([*CLI, "--db", str(tmp_path / "s.db"), "--keys", str(keys), "--host", "127.0.0.1",
                             "--port", str(port), "--extractor", "keyword", "--maintainer", "rules", "--embedder", "hash",
                             "--token-secret-file", str(secret), "--token-state", str(tmp_path / "tokens.db")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 45
        while True:
            try:
                if httpx.get(f"{base}/openapi.json", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"server did not come up: {proc.stdout.read() if proc.poll() is not None else 'timeout'}")
            time.sleep(0.2)
        assert httpx.get(f"{base}/v1/users/alice/preferences").status_code == 401
        h = {"Authorization": f"Bearer {KEY_A}"}
        r = httpx.post(f"{base}/v1/users/alice/conversations", headers=h,
                       json={"id": "c1", "turns": [{"role": "user", "text": "I love Italian food."}]})
        assert r.status_code == 200, r.text
        r = httpx.get(f"{base}/v1/users/alice/preferences", headers=h)
        assert [(p["attribute"], p["sentence"]) for p in r.json()["preferences"]] == [("Italian", "I love Italian food.")]
        assert httpx.get(f"{base}/v1/schema", headers={"Authorization": f"Bearer {KEY_B}"}).status_code == 401
        assert httpx.get(f"{base}/ui").status_code == 200
        # a user token minted by this server, signed with the secret file: alice only, and its link holds no key
        minted = httpx.post(f"{base}/v1/users/alice/tokens", headers=h).json()
        assert minted["page_url"].startswith(f"{base}/ui#token=") and KEY_A not in minted["page_url"]
        from boundmem.service.tokens import Generations, TokenIssuer

        assert TokenIssuer(secret.read_bytes().strip(), Generations(tmp_path / "tokens.db")).verify(minted["token"]).user == "alice"
        t = {"Authorization": f"Bearer {minted['token']}"}
        assert httpx.get(f"{base}/v1/users/alice/preferences", headers=t).status_code == 200
        assert httpx.get(f"{base}/v1/users/bob/preferences", headers=t).status_code == 403
    finally:
        proc.terminate()
        proc.wait(15)
    log = proc.stdout.read()
    assert "/v1/users/u-" in log and "/preferences" in log   # the access log ran ...
    assert "alice" not in log and "bob" not in log           # ... and names no user


def test_access_log_pseudonyms():
    from boundmem.service.accesslog import PseudonymousAccessLog

    f = PseudonymousAccessLog(b"k" * 32)
    a = f.redact("/v1/users/alice/preferences?category=x")
    assert a.startswith("/v1/users/u-") and a.endswith("/preferences?category=x") and "alice" not in a
    assert f.redact("/v1/users/alice") == a.split("/preferences")[0] == f.redact("/v1/users/%61lice")
    assert f.redact("/v1/users/bob/export") != f.redact("/v1/users/alice/export")
    assert PseudonymousAccessLog().redact("/v1/users/alice") != a.split("/preferences")[0]   # another process, another key
    assert f.redact("/v1/schema") == "/v1/schema" and f.redact("/ui") == "/ui"


@pytest.mark.parametrize("content,name,needle", [
    ("not = [toml", "keys.toml", "not valid TOML"),
    ('{"short": "acme"}', "keys.json", "shorter than"),
    (json.dumps({KEY_A: "acme:evil"}), "keys.json", "acme:evil"),
    ("[1, 2]", "keys.json", "mapping"),
    ("{}", "keys.json", "no API keys"),
])
def test_bad_keys_file_is_refused_naming_the_problem(tmp_path, content, name, needle):
    f = tmp_path / name
    f.write_text(content)
    r = CliRunner().invoke(serve_app, ["--keys", str(f), "--db", str(tmp_path / "x.db")])
    assert r.exit_code == 2 and needle in r.stderr and str(f) in r.stderr
    assert not (tmp_path / "x.db").exists()


def test_keys_file_formats_and_hashed_keys(tmp_path):
    import hashlib

    j = tmp_path / "k.json"
    j.write_text(json.dumps({"keys": {KEY_A: "acme", "sha256:" + hashlib.sha256(KEY_B.encode()).hexdigest(): "globex"}}))
    ring = KeyRing.load(j)
    assert ring.tenant(KEY_A) == "acme" and ring.tenant(KEY_B) == "globex"
    assert ring.tenant("sha256:" + hashlib.sha256(KEY_B.encode()).hexdigest()) is None  # the digest is not a key
    assert ring.tenant(None) is None and ring.tenant("") is None
    t = tmp_path / "k.toml"
    t.write_text(f'"{KEY_B}" = "globex"\n')
    assert KeyRing.load(t).tenant(KEY_B) == "globex"
    with pytest.raises(KeysFileError, match="64 hex"):
        KeyRing({"sha256:abc": "acme"})


def test_serve_without_keys_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("BOUNDMEM_KEYS", raising=False)
    r = CliRunner().invoke(serve_app, ["--db", str(tmp_path / "x.db")])
    assert r.exit_code == 2 and "--keys" in r.stderr


def _sha(key: str) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


@pytest.mark.parametrize("name,content,needles", [
    ("twice.toml", f'"{KEY_A}" = "acme"\n"{KEY_A}" = "globex"\n', ["line 1", "line 2", "acme", "globex"]),
    ("twice.json", f'{{"{KEY_A}": "acme", "{KEY_A}": "globex"}}', ["entry 1", "entry 2", "acme", "globex"]),
    ("raw-and-hash.toml", f'[keys]\n"{KEY_A}" = "acme"\n"{_sha(KEY_A)}" = "globex"\n', ["entry 1", "entry 2", "acme", "globex"]),
    ("hash-and-raw.json", json.dumps({"keys": {_sha(KEY_A).upper().replace("SHA256", "sha256"): "acme", KEY_A: "acme"}}),
     ["entry 1", "entry 2"]),
    ("split.toml", f'"{KEY_A}" = "acme"\n[keys]\n"{KEY_B}" = "globex"\n', ["top level"]),
])
def test_the_same_key_twice_is_an_error_naming_both_entries(tmp_path, name, content, needles):
    f = tmp_path / name
    f.write_text(content)
    with pytest.raises(KeysFileError) as e:
        KeyRing.load(f)
    assert str(f) in str(e.value) and all(n in str(e.value) for n in needles), str(e.value)
    assert KEY_A not in str(e.value)   # the error names entries, never the secret
    r = CliRunner().invoke(serve_app, ["--keys", str(f), "--db", str(tmp_path / "x.db")])
    assert r.exit_code == 2 and needles[0] in r.stderr


@pytest.mark.parametrize("extra,needle", [
    (["--token-secret-file", "SHORT"], "at least 32 bytes"),
    (["--token-secret-file", "MISSING"], "cannot read token secret"),
    (["--token-ttl", "600", "--token-max-ttl", "60"], "--token-ttl"),
])
def test_bad_token_settings_are_refused(tmp_path, extra, needle):
    keys = tmp_path / "k.json"
    keys.write_text(json.dumps({KEY_A: "acme"}))
    (tmp_path / "SHORT").write_text("too short")
    extra = [str(tmp_path / e) if e in ("SHORT", "MISSING") else e for e in extra]
    r = CliRunner().invoke(serve_app, ["--keys", str(keys), "--db", str(tmp_path / "x.db"), *extra])
    assert r.exit_code == 2 and needle in r.stderr, r.stderr


def test_serve_on_a_taken_port_says_so_before_serving(tmp_path, taken_port):
    """a taken port is one clear error with README's exit status for a failed serve (1), not "serving ..."
    followed by uvicorn's exit 3."""
    keys, port = taken_port
    r = subprocess.run([*CLI, "--db", str(tmp_path / "s.db"), "--keys", str(keys), "--port", str(port), "--lazy",
                        "--extractor", "keyword", "--maintainer", "rules", "--embedder", "hash"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr and "--port" in r.stderr and "serving" not in r.stderr
    assert "Traceback" not in r.stderr
