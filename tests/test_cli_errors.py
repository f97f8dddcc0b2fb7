"""The command line's exit codes come from one place (`cli.options.ErrorExitGroup` over `errors.EXIT_CODES`): each branch of
the error tree one code and one "error: <message>" line on stderr, no traceback; anything else keeps its traceback."""
from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from boundmem.cli.options import ErrorExitGroup
from boundmem.cli import app as main_app
from boundmem.errors import (BoundmemError, ConfigError, ConflictError, InputError, LimitError, NotFoundError,
                             StoreError, UpstreamError)
from boundmem.llm.errors import LLMTimeout
from boundmem.store.base import EmbeddingDimensionError, StoreBusy
from llm.fake_openai import FakeOpenAI, status

RAISED = {
    "input": (InputError("bad field 'x'"), 2), "limit": (LimitError("too many turns"), 2),
    "config": (ConfigError("BOUNDMEM_X='y' is not a number"), 2), "not-found": (NotFoundError("no user 'bob'"), 2),
    "conflict": (ConflictError("opted out"), 2), "dimension": (EmbeddingDimensionError(8, 16, "stored 8, given 16"), 2),
    "upstream": (UpstreamError("endpoint down"), 4), "llm": (LLMTimeout("no answer within 1 s"), 4),
    "store": (StoreError("cannot open the store"), 5), "busy": (StoreBusy("store is busy"), 5),
    "root": (BoundmemError("something of ours"), 1),
}


def _app(exc: BaseException) -> typer.Typer:
    app = typer.Typer(cls=ErrorExitGroup)

    @app.command()
    def boom():
        raise exc

    @app.command()
    def fine():
        pass

    return app


@pytest.mark.parametrize("kind", RAISED)
def test_each_branch_is_one_exit_code_and_one_line_without_traceback(kind):
    exc, code = RAISED[kind]
    r = CliRunner().invoke(_app(exc), ["boom"])
    assert r.exit_code == code, (kind, r.exit_code, r.output)
    assert r.stderr.strip() == f"error: {exc}" and "Traceback" not in r.output
    assert r.stdout == ""


def test_an_unexpected_exception_keeps_its_traceback():
    r = CliRunner().invoke(_app(RuntimeError("a bug")), ["boom"])
    assert r.exit_code == 1 and isinstance(r.exception, RuntimeError)


def test_an_llm_endpoint_failing_during_ingest_exits_4_naming_the_conversation(tmp_path, monkeypatch):
    """Before: exit 2, as if the command line were wrong; the endpoint failed, which a script may retry."""
    conv = tmp_path / "c.json"
    conv.write_text(json.dumps({"id": "trip-1", "turns": [{"role": "user", "text": "I love Italian food."}]}))
    with FakeOpenAI([status(500), status(500)]) as fake:
        for k, v in {"BOUNDMEM_LLM_BASE_URL": fake.base_url, "BOUNDMEM_LLM_MODEL": "test-model",
                     "BOUNDMEM_LLM_API_KEY": "sk-test-0123456789", "BOUNDMEM_LLM_MAX_RETRIES": "0",
                     "BOUNDMEM_LLM_TIMEOUT": "5"}.items():
            monkeypatch.setenv(k, v)
        r = CliRunner().invoke(main_app, ["ingest", str(conv), "-u", "alice", "--db", str(tmp_path / "m.db"),
                                          "--extractor", "llm", "--maintainer", "rules", "--embedder", "hash"])
    assert r.exit_code == 4, r.output
    assert "trip-1" in r.output and "HTTP 500" in r.output and "nothing stored" in r.output
    assert "Traceback" not in r.output


def test_an_llm_extractor_without_key_or_endpoint_is_a_setting_to_fix_exit_2(tmp_path, monkeypatch):
    """Before: the client raised LLMError, an upstream failure (exit 4, 502), though nothing was ever sent."""
    conv = tmp_path / "c.json"
    conv.write_text(json.dumps({"id": "trip-1", "turns": [{"role": "user", "text": "I love Italian food."}]}))
    for k in ("BOUNDMEM_LLM_BASE_URL", "OPENAI_BASE_URL", "BOUNDMEM_LLM_API_KEY", "OPENAI_API_KEY",
              "AZURE_OPENAI_API_KEY", "BOUNDMEM_LLM_AZURE_ENDPOINT"):
        monkeypatch.delenv(k, raising=False)
    r = CliRunner().invoke(main_app, ["ingest", str(conv), "-u", "alice", "--db", str(tmp_path / "m.db"),
                                      "--extractor", "llm", "--maintainer", "rules", "--embedder", "hash"])
    assert r.exit_code == 2, r.output
    assert "no API key" in r.stderr and "BOUNDMEM_LLM_API_KEY" in r.stderr and "Traceback" not in r.output


def test_prefs_list_of_a_tenant_user_names_the_tenant_form(tmp_path):
    """`prefs list -u dana` when only acme:dana exists is an error naming --tenant acme, not "0 preference(s)"."""
    import json as _json

    from typer.testing import CliRunner

    from boundmem.cli import app

    runner = CliRunner()
    db, f = tmp_path / "t.db", tmp_path / "c.json"
    f.write_text(_json.dumps({"id": "c", "turns": [{"role": "user", "text": "Italian food is my favourite, always."}]}))
    fast = ["--extractor", "keyword", "--maintainer", "rules", "--embedder", "hash"]
    assert runner.invoke(app, ["ingest", str(f), "-u", "acme:dana", "--db", str(db), *fast]).exit_code == 0
    r = runner.invoke(app, ["prefs", "list", "-u", "dana", "--db", str(db)])
    assert r.exit_code == 2 and "--tenant acme" in r.output and "0 preference" not in r.output
    r = runner.invoke(app, ["prefs", "list", "--tenant", "acme", "-u", "dana", "--db", str(db), "--json"])
    assert r.exit_code == 0 and [p["attribute"] for p in _json.loads(r.output)] == ["Italian"]
    r = runner.invoke(app, ["prefs", "list", "-u", "nobody", "--db", str(db)])
    assert r.exit_code == 2 and "no user 'nobody'" in r.output


def test_bench_without_matplotlib_names_the_extra(tmp_path, monkeypatch):
    """a missing extra names itself (exit 2, no ModuleNotFoundError traceback), before any work is done."""
    import sys

    from typer.testing import CliRunner

    from boundmem.cli.root import _mount, app

    monkeypatch.setitem(sys.modules, "matplotlib", None)   # as if not installed: find_spec None, import fails
    _mount("bench")
    runner = CliRunner()
    (tmp_path / "d.jsonl").write_text("")
    r = runner.invoke(app, ["bench", "carmem", "--data", str(tmp_path / "d.jsonl"), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "pip install 'boundmem-bench[plots]'" in r.output, r.output
    assert not isinstance(r.exception, ModuleNotFoundError) and "Traceback" not in r.output
    assert runner.invoke(app, ["bench", "carmem", "--help"]).exit_code == 0
    from boundmem_bench.report import MissingExtraError, _plt

    with pytest.raises(MissingExtraError, match=r"boundmem-bench\[plots\]"):
        _plt()
