"""Wire check: `boundmem ingest --extractor llm --maintainer llm` in a real process, configured only by env vars."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from boundmem.schema.tool import TOOL_NAME
from boundmem.store.sqlite import SQLiteStore

from .fake_openai import tool_call


def _cuisine(value: str, said: str) -> dict:
    return {"preferences": [{"sentence": said, "category": "Restaurant > Favorite Cuisine", "value": value,
                             "polarity": "like"}]}


def _run(fake, tmp_path, convs: list[dict]):
    f = tmp_path / "convs.json"
    f.write_text(json.dumps({"conversations": convs}))
    env = {**os.environ, "BOUNDMEM_LLM_BASE_URL": fake.base_url, "BOUNDMEM_LLM_MODEL": "fake-llm",
           "BOUNDMEM_LLM_TIMEOUT": "5", "BOUNDMEM_LLM_MAX_RETRIES": "1", "BOUNDMEM_LLM_BACKOFF": "0.01",
           "BOUNDMEM_EMBEDDER": "hash"}
    for k in ("OPENAI_API_KEY", "BOUNDMEM_LLM_API_KEY", "BOUNDMEM_LLM_AZURE_ENDPOINT", "OPENAI_BASE_URL"):
        env.pop(k, None)
    db = tmp_path / "m.db"
    r = subprocess.run([sys.executable, "-m", "boundmem.cli", "ingest", str(f), "-u", "alice", "--db", str(db),
                        "--extractor", "llm", "--maintainer", "llm"],
                       env=env, capture_output=True, text=True, timeout=120)
    return r, db


def test_cli_ingest_with_llm(fake, tmp_path):
    fake.push(tool_call(TOOL_NAME, _cuisine("Italian", "I love Italian food.")),
              tool_call(TOOL_NAME, _cuisine("Mexican", "Mexican is my other favourite.")),
              tool_call("append_preference", {"incoming_preference": "Mexican"}))
    r, db = _run(fake, tmp_path, [
        {"id": "c1", "turns": [{"role": "user", "text": "I love Italian food."}]},
        {"id": "c2", "turns": [{"role": "user", "text": "Mexican is my other favourite."}]}])
    assert r.returncode == 0, r.stderr
    assert "c1: insert" in r.stdout and "c2: append" in r.stdout
    assert [q.json["model"] for q in fake.requests] == ["fake-llm"] * 3
    assert sorted(fake.requests[2].tool_names) == ["append_preference", "pass_preference", "update_preference"]
    s = SQLiteStore(db)
    try:
        assert sorted(p.attribute for p in s.preferences("alice")) == ["Italian", "Mexican"]
    finally:
        s.close()


def test_cli_ingest_invalid_llm_output_stores_nothing(fake, tmp_path, monkeypatch):
    """In-process (CliRunner) to stay fast; env is read when the extractor is built, not at import."""
    from typer.testing import CliRunner

    from boundmem.cli import app
    from boundmem.extract.base import ExtractionError

    monkeypatch.setenv("BOUNDMEM_LLM_BASE_URL", fake.base_url)
    monkeypatch.setenv("BOUNDMEM_LLM_MAX_RETRIES", "0")
    fake.push(tool_call(TOOL_NAME, {"nonsense": 1}), tool_call(TOOL_NAME, {"nonsense": 2}))
    f, db = tmp_path / "c.json", tmp_path / "m.db"
    f.write_text(json.dumps({"id": "c1", "turns": [{"role": "user", "text": "I love Italian food."}]}))
    r = CliRunner().invoke(app, ["ingest", str(f), "-u", "alice", "--db", str(db), "--extractor", "llm",
                                 "--maintainer", "rules", "--embedder", "hash"])
    assert r.exit_code != 0
    assert isinstance(r.exception, ExtractionError) or "invalid twice" in r.output
    assert len(fake.requests) == 2
    s = SQLiteStore(db)
    try:
        assert s.preferences("alice") == [] and s.audit("alice") == []
    finally:
        s.close()


def test_cli_ingest_says_when_nothing_was_found(fake, tmp_path, monkeypatch):
    """A valid but empty answer is reported per conversation, never a bare success."""
    from typer.testing import CliRunner

    from boundmem.cli import app

    monkeypatch.setenv("BOUNDMEM_LLM_BASE_URL", fake.base_url)
    fake.push(tool_call(TOOL_NAME, {"preferences": []}))
    f, db = tmp_path / "c.json", tmp_path / "m.db"
    f.write_text(json.dumps({"id": "c1", "turns": [{"role": "user", "text": "Take me home."}]}))
    r = CliRunner().invoke(app, ["ingest", str(f), "-u", "alice", "--db", str(db), "--extractor", "llm",
                                 "--maintainer", "rules", "--embedder", "hash"])
    assert r.exit_code == 0, r.output
    assert "c1: nothing to remember" in r.output and "llm extractor" in r.output
