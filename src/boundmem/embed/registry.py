"""The embedders by name. Every loader takes the Settings; the MiniLM ones share one model per process."""
from __future__ import annotations

from typing import Optional

from ..config import Settings
from ..errors import ConfigError
from ..registry import Registry
from .base import Embedder

EMBEDDERS: Registry[Embedder] = Registry("embedder", "--embedder or BOUNDMEM_EMBEDDER")


def make_embedder(name: str, settings: Settings) -> Embedder:
    return EMBEDDERS.load(name, settings)


def shared_or_settings(embedder: Optional[Embedder], settings: Settings) -> Embedder:
    """The embedder a Memory shares between its stages, or (a stage built alone) the one the settings name."""
    return embedder if embedder is not None else make_embedder(settings.embed.embedder, settings)


def _minilm(backend: str, settings: Settings) -> Embedder:
    s = settings.embed
    if backend == "auto":
        from . import minilm_onnx

        backend = "onnx" if minilm_onnx.available(s.minilm_onnx, s.cache_dir, s.minilm_precision) else "torch"
    if backend == "onnx":
        from .minilm_onnx import OnnxMiniLMEmbedder

        return OnnxMiniLMEmbedder(model=s.minilm_onnx, cache_dir=s.cache_dir, threads=s.ort_threads,
                                  precision=s.minilm_precision)
    from .minilm_torch import MiniLMEmbedder

    return MiniLMEmbedder()


@EMBEDDERS.register("minilm", "all-MiniLM-L6-v2 on the backend BOUNDMEM_MINILM_BACKEND names (auto: ONNX Runtime "
                              "when it can run here, else torch)")
def _minilm_auto(settings: Settings) -> Embedder:
    return _minilm(settings.embed.minilm_backend, settings)


@EMBEDDERS.register("minilm-onnx", "the same on ONNX Runtime")
def _minilm_onnx(settings: Settings) -> Embedder:
    return _minilm("onnx", settings)


@EMBEDDERS.register("minilm-torch", "the same on torch")
def _minilm_torch(settings: Settings) -> Embedder:
    return _minilm("torch", settings)


@EMBEDDERS.register("openai", "an OpenAI-compatible /v1/embeddings (BOUNDMEM_EMBED_MODEL, the LLM endpoint and key)")
def _openai(settings: Settings) -> Embedder:
    from .openai_compat import OpenAIEmbedder

    key, url = settings.llm.api_key, settings.llm.base_url
    if key is None and url is None:  # the SDK would send its placeholder key to api.openai.com and get a 401 later
        raise ConfigError("--embedder openai needs a key (BOUNDMEM_LLM_API_KEY or OPENAI_API_KEY) or a local server "
                          "(BOUNDMEM_LLM_BASE_URL)")
    return OpenAIEmbedder(model=settings.embed.openai_model, base_url=url, api_key=key.get_secret_value() if key else None,
                          timeout=settings.llm.timeout, max_retries=settings.llm.max_retries)


@EMBEDDERS.register("hash", "model-free, weak similarity: tests and harness checks only")
def _hash(settings: Settings) -> Embedder:
    from .hash import HashEmbedder

    return HashEmbedder()
