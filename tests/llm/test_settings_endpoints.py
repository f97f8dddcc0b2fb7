"""The documented variables reach the endpoints: what the fake server receives is what README promises."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from boundmem.schema.tool import TOOL_NAME

from .fake_openai import embeddings, tool_call

ENDPOINT_VARS = ("BOUNDMEM_LLM_BASE_URL", "OPENAI_BASE_URL", "BOUNDMEM_LLM_API_KEY", "OPENAI_API_KEY",
                 "AZURE_OPENAI_API_KEY", "BOUNDMEM_LLM_MODEL", "BOUNDMEM_EMBED_MODEL", "BOUNDMEM_LLM_AZURE_ENDPOINT",
                 "BOUNDMEM_LLM_AZURE_API_VERSION", "BOUNDMEM_LLM_API_VERSION", "OPENAI_API_VERSION", "BOUNDMEM_EMBEDDER")


@pytest.fixture()
def clean_env(monkeypatch):
    for v in ENDPOINT_VARS:
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


def _ingest(tmp_path, *options: str, text: str = "I love jazz."):
    from boundmem.cli import app

    f = tmp_path / "c.json"
    f.write_text(json.dumps({"id": "c1", "turns": [{"role": "user", "text": text}]}))
    return CliRunner().invoke(app, ["ingest", str(f), "-u", "alice", "--db", str(tmp_path / "m.db"), *options])


def _vectors(req):
    """One 8-d vector per input text, whatever the batch."""
    return embeddings([[1.0 + i, 2.0, 0.5, 0.0, 1.0, 0.0, 3.0, 1.0] for i in range(len(req.json["input"]))])


def test_openai_embedder_sends_the_configured_model_and_key(fake, tmp_path, clean_env):
    """`--embedder openai` used BOUNDMEM_EMBED_MODEL's default model and a dummy key whatever was set."""
    clean_env.setenv("OPENAI_BASE_URL", fake.base_url)
    clean_env.setenv("OPENAI_API_KEY", "sk-env-0123456789")
    clean_env.setenv("BOUNDMEM_EMBED_MODEL", "env-embed-model")
    fake.push(*[_vectors] * 20)
    r = _ingest(tmp_path, "--extractor", "keyword", "--maintainer", "rules", "--embedder", "openai")
    assert r.exit_code == 0, r.output
    sent = [q for q in fake.requests if q.path.endswith("/embeddings")]
    assert sent, "no embedding request reached the server"
    assert {q.json["model"] for q in sent} == {"env-embed-model"}
    assert {q.headers["authorization"] for q in sent} == {"Bearer sk-env-0123456789"}


@pytest.mark.parametrize("variable", ["BOUNDMEM_LLM_AZURE_API_VERSION",   # README's name
                                      "BOUNDMEM_LLM_API_VERSION"])        # the name the client read before
def test_azure_api_version_from_the_documented_variable(fake, tmp_path, clean_env, variable):
    clean_env.setenv("BOUNDMEM_LLM_AZURE_ENDPOINT", fake.base_url.removesuffix("/v1"))
    clean_env.setenv("BOUNDMEM_LLM_API_KEY", "az-key-0123456789")
    clean_env.setenv("BOUNDMEM_LLM_MODEL", "my-deployment")
    clean_env.setenv("BOUNDMEM_LLM_MAX_RETRIES", "0")
    clean_env.setenv(variable, "2025-01-01-preview")
    fake.push(tool_call(TOOL_NAME, {"preferences": []}))
    r = _ingest(tmp_path, "--extractor", "llm", "--maintainer", "rules", "--embedder", "hash", text="Take me home.")
    assert r.exit_code == 0, r.output
    [req] = fake.requests
    assert req.path.startswith("/openai/deployments/my-deployment/chat/completions")
    assert "api-version=2025-01-01-preview" in req.path and req.headers["api-key"] == "az-key-0123456789"


def test_the_documented_azure_variable_wins_over_the_old_one(clean_env):
    from boundmem.config import Settings

    s = Settings.from_env({"BOUNDMEM_LLM_AZURE_API_VERSION": "new", "BOUNDMEM_LLM_API_VERSION": "old",
                           "OPENAI_API_VERSION": "sdk"})
    assert s.llm.azure_api_version == "new"
