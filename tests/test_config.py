"""Settings: read from the environment in config.py only, invalid values named, and the same names everywhere
(every CLI option takes its choices from the stage's registry)."""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from boundmem.config import Settings
from boundmem.embed.registry import EMBEDDERS
from boundmem.errors import ConfigError

PKG = Path(__file__).resolve().parents[1] / "src" / "boundmem"


def test_only_config_reads_or_writes_the_environment():
    """A variable read deep in a module is invisible to the caller and was misspelled once; the library must not
    change the process's environment either (it set HF_HUB_OFFLINE)."""
    pattern = re.compile(r"os\.environ|getenv|putenv")
    hits = [f"{p.relative_to(PKG)}:{i}: {line.strip()}" for p in sorted(PKG.rglob("*.py")) if p != PKG / "config.py"
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not hits, "environment access outside config.py:\n" + "\n".join(hits)


def test_defaults_ignore_the_environment(monkeypatch):
    monkeypatch.setenv("BOUNDMEM_DB", "elsewhere.db")
    assert Settings().db == "boundmem.db" and Settings.from_env().db == "elsewhere.db"


def test_an_empty_environment_gives_exactly_the_declared_defaults():
    """Each default is declared once, on its field; reading an environment that sets nothing must not invent others."""
    assert Settings.from_env({}) == Settings()
    assert Settings.from_env({"BOUNDMEM_LLM_TEMPERATURE": "none"}).llm.temperature is None   # set to "none" != unset


@pytest.mark.parametrize("env,named", [
    ({"BOUNDMEM_ORT_THREADS": "abc"}, "BOUNDMEM_ORT_THREADS='abc'"),
    ({"BOUNDMEM_ORT_THREADS": "-1"}, "BOUNDMEM_ORT_THREADS='-1'"),
    ({"BOUNDMEM_MINILM_BACKEND": "tpu"}, "BOUNDMEM_MINILM_BACKEND='tpu'.*auto, onnx, torch"),
    ({"BOUNDMEM_LLM_TIMEOUT": "soon"}, "BOUNDMEM_LLM_TIMEOUT"),
    ({"BOUNDMEM_LLM_MAX_RETRIES": "many"}, "BOUNDMEM_LLM_MAX_RETRIES"),
    ({"BOUNDMEM_LLM_TEMPERATURE": "warm"}, "BOUNDMEM_LLM_TEMPERATURE"),
    ({"BOUNDMEM_LLM_TOOL_SHAPE": "round"}, "BOUNDMEM_LLM_TOOL_SHAPE"),
    ({"BOUNDMEM_PG_VACUUM": "sometimes"}, "BOUNDMEM_PG_VACUUM"),
    ({"BOUNDMEM_JOBS_NICE": "low"}, "BOUNDMEM_JOBS_NICE"),
])
def test_an_invalid_variable_is_a_config_error_naming_it(env, named):
    with pytest.raises(ConfigError, match=named):
        Settings.from_env(env)


def test_empty_variables_count_as_unset():
    s = Settings.from_env({"BOUNDMEM_DB": "", "BOUNDMEM_MINILM_ONNX": " ", "BOUNDMEM_ORT_THREADS": ""})
    assert (s.db, s.embed.minilm_onnx, s.embed.ort_threads) == ("boundmem.db", None, 1)


def test_an_unknown_stage_name_lists_the_choices():
    with pytest.raises(ConfigError, match="unknown embedder 'bert'.*BOUNDMEM_EMBEDDER.*minilm, minilm-onnx"):
        EMBEDDERS.load("bert", Settings())


def test_openai_embeddings_without_a_key_or_endpoint_are_refused_up_front():
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        EMBEDDERS.load("openai", Settings())


def test_the_cli_names_an_invalid_variable(tmp_path, monkeypatch):
    from boundmem.cli import app

    monkeypatch.setenv("BOUNDMEM_ORT_THREADS", "abc")
    r = CliRunner().invoke(app, ["recall", "hi", "-u", "alice", "--db", str(tmp_path / "m.db"), "--embedder", "hash"])
    assert r.exit_code == 2 and "BOUNDMEM_ORT_THREADS='abc'" in r.output
    monkeypatch.delenv("BOUNDMEM_ORT_THREADS")
    monkeypatch.setenv("BOUNDMEM_EMBEDDER", "bert")
    r = CliRunner().invoke(app, ["recall", "hi", "-u", "alice", "--db", str(tmp_path / "m.db")])
    assert r.exit_code == 2 and re.search(r"'bert' \(from BOUNDMEM_EMBEDDER\) is not one of", _flat(r.output))


def test_switching_a_category_off_does_not_depend_on_the_embedding_endpoint(tmp_path, monkeypatch):
    """opt-out/opt-in embed nothing: an embedder setting that cannot be built (openai without a key) must not stop a
    user from switching a category off (it did, between the Settings refactor and this fix)."""
    from boundmem.cli import app

    db = str(tmp_path / "m.db")
    conv = tmp_path / "c.json"
    conv.write_text('{"id": "c1", "turns": [{"role": "user", "text": "I love Italian food."}]}')
    assert CliRunner().invoke(app, ["ingest", str(conv), "-u", "alice", "--db", db, "--embedder", "hash",
                                    "--maintainer", "rules"]).exit_code == 0
    for k in ("BOUNDMEM_LLM_API_KEY", "OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "BOUNDMEM_LLM_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("BOUNDMEM_EMBEDDER", "openai")
    r = CliRunner().invoke(app, ["opt-out", "Restaurant", "-u", "alice", "--db", db])
    assert r.exit_code == 0 and "purged 1 preference" in r.output, r.output
    r = CliRunner().invoke(app, ["opt-in", "Restaurant", "-u", "alice", "--db", db])
    assert r.exit_code == 0 and "opted back in" in r.output, r.output


def test_serve_builds_the_embedder_named_by_boundmem_embedder(tmp_path, monkeypatch):
    """`boundmem serve` had its own --embedder default ("minilm") and never read BOUNDMEM_EMBEDDER."""
    import uvicorn

    from boundmem.service import accesslog, app as service_app
    from boundmem.cli.serve import app as serve_app

    built = {}

    def fake_create_app(memory_or_factory, ring, **kw):
        built["factory"] = memory_or_factory
        return object()

    monkeypatch.setattr(service_app, "create_app", fake_create_app)
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)
    monkeypatch.setattr(accesslog, "install", lambda: None)
    monkeypatch.setenv("BOUNDMEM_EMBEDDER", "hash")
    keys = tmp_path / "keys.toml"
    keys.write_text('[keys]\n"bm-test-key-0123456789abcdef0123" = "acme"\n')
    r = CliRunner().invoke(serve_app, ["--db", str(tmp_path / "s.db"), "--keys", str(keys), "--lazy", "--port", "0",
                                       "--extractor", "keyword", "--maintainer", "rules"])
    assert r.exit_code == 0, r.output
    mem = built["factory"]()
    try:
        assert mem.embedder.name == "hash"
    finally:
        mem.store.close()


@pytest.mark.parametrize("bench", ["carmem", "gvd"])
def test_bench_accepts_every_embedder_its_help_offers(bench, tmp_path):
    """`bench carmem`/`bench gvd` offered minilm-onnx in their help and refused it; the data error proves the
    embedder name was accepted."""
    from boundmem_bench.cli import app

    if bench == "carmem":
        data = tmp_path / "dataset.jsonl"
        data.write_text("this is not json\n")
    else:
        data = tmp_path / "gvd"
        data.mkdir()
    r = CliRunner().invoke(app, [bench, "--data", str(data), "--out", str(tmp_path / "out"), "--embedder", "minilm-onnx"])
    assert "is not one of" not in r.output
    assert r.exit_code == 2 and "error:" in r.output


@pytest.mark.parametrize("argv", [["ingest"], ["recall"], ["serve"], ["serve", "mcp"], ["proxy"], ["bench", "carmem"],
                                  ["bench", "gvd"], ["bench", "challenge"]])
def test_every_embedder_option_offers_the_registry(argv):
    r = subprocess.run([sys.executable, "-m", "boundmem.cli", *argv, "--help"], capture_output=True, text=True,
                       env=_wide_env())
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    for name in EMBEDDERS.choices():
        assert name in text, f"{' '.join(argv)} --help does not offer {name}"


def _flat(text: str) -> str:
    """Rich's error box as one line: no borders, single spaces."""
    return " ".join(text.replace("│", " ").split())


def _wide_env() -> dict[str, str]:
    import os

    return {**os.environ, "COLUMNS": "300", "TERM": "dumb", "NO_COLOR": "1"}


@pytest.mark.parametrize("blocked,argv", [("boundmem_bench.gvd", ["bench", "gvd", "--help"]),
                                          ("boundmem.cli.caim", ["caim", "--help"])])
def test_a_broken_install_shows_the_import_error_not_no_such_command(blocked, argv):
    code = textwrap.dedent(f"""
        import sys
        sys.modules[{blocked!r}] = None
        sys.argv = ["boundmem", *{argv!r}]
        from boundmem.cli import main
        main()
        """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_wide_env())
    assert r.returncode != 0
    assert "No such command" not in r.stdout + r.stderr
    assert re.search(r"(ModuleNotFound|Import)Error", r.stderr) and blocked in r.stderr


def test_an_unreadable_polarity_model_is_an_error_naming_the_file(tmp_path, monkeypatch):
    """The sentence polarity model must not fail silently when its shipped file is broken (the maintainers no longer
    load it: polarity is the extractor's data; it stays a library tool)."""
    from boundmem.maintain import polarity

    broken = tmp_path / "polarity_minilm.npz"
    broken.write_bytes(b"not a zip archive")
    monkeypatch.setattr(polarity, "ARTEFACT", str(broken))   # an absolute path replaces the package folder
    with pytest.raises(ConfigError, match=re.escape(str(broken))):
        polarity.PolarityModel.load()
    monkeypatch.setattr(polarity, "ARTEFACT", str(tmp_path / "missing.npz"))
    with pytest.raises(ConfigError, match="missing.npz"):
        polarity.PolarityModel.load()


@pytest.mark.parametrize("args,env,named", [
    (["--extractor", "llm", "--maintainer", "rules", "--embedder", "hash"], {}, "no API key"),
    (["--extractor", "keyword", "--maintainer", "rules", "--embedder", "openai"], {}, "OPENAI_API_KEY"),
    (["--extractor", "keyword", "--maintainer", "rules"], {"BOUNDMEM_EMBEDDER": "openai"}, "OPENAI_API_KEY"),
])
def test_serve_with_an_endpoint_it_cannot_use_stops_at_start(args, env, named, tmp_path, monkeypatch):
    """The service builds its Memory on first use; an LLM or embedding endpoint without key or address used to be
    found only then, answering every ingest with 500 while the server looked healthy."""
    import uvicorn

    from boundmem.service import accesslog
    from boundmem.cli.serve import app as serve_app

    started = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: started.append(True))
    monkeypatch.setattr(accesslog, "install", lambda: None)
    for k in ("BOUNDMEM_LLM_API_KEY", "OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "BOUNDMEM_LLM_BASE_URL", "OPENAI_BASE_URL",
              "BOUNDMEM_LLM_AZURE_ENDPOINT", "BOUNDMEM_EMBEDDER"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    keys = tmp_path / "keys.toml"
    keys.write_text('[keys]\n"bm-test-key-0123456789abcdef0123" = "acme"\n')
    r = CliRunner().invoke(serve_app, ["--db", str(tmp_path / "s.db"), "--keys", str(keys), "--lazy", *args])
    assert r.exit_code == 2 and named in r.output and not started, r.output


def test_the_openai_embedder_takes_the_endpoint_timeout_and_retries_from_the_settings():
    """LLMSettings configure `--embedder openai` too; its client kept its own 60 s / 2 retries before."""
    s = Settings.from_env({"BOUNDMEM_LLM_BASE_URL": "http://127.0.0.1:9/v1", "BOUNDMEM_LLM_TIMEOUT": "7",
                           "BOUNDMEM_LLM_MAX_RETRIES": "0"})
    emb = EMBEDDERS.load("openai", s)
    assert emb.client.timeout == 7 and emb.client.max_retries == 0
