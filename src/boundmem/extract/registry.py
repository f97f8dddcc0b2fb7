"""The extractors by name. A loader gets the Settings and the embedder the Memory shares (None: the LLM ones)."""
from __future__ import annotations

from typing import Optional

from ..config import Settings
from ..embed.base import Embedder
from ..embed.registry import make_embedder, shared_or_settings
from ..registry import Registry
from .base import Extractor

EXTRACTORS: Registry[Extractor] = Registry("extractor", "--extractor")


def make_extractor(name: str, settings: Settings, embedder: Optional[Embedder]) -> Extractor:
    return EXTRACTORS.load(name, settings, embedder)


@EXTRACTORS.register("local", "offline: the trained reader (ONNX) and MiniLM category scoring")
def _local(settings: Settings, embedder: Optional[Embedder]) -> Extractor:
    from .reader import ReaderExtractor

    return ReaderExtractor(_minilm(embedder, settings))


def _minilm(embedder: Optional[Embedder], settings: Settings) -> Embedder:
    """The reader scores spans in MiniLM's space (it was trained against it): the Memory's shared embedder when that
    is MiniLM, else MiniLM of its own (a Memory that recalls with another embedder still reads with the reader)."""
    emb = shared_or_settings(embedder, settings)
    return emb if getattr(emb, "name", "") == "minilm" else make_embedder("minilm", settings)


@EXTRACTORS.register("keyword", "vocabulary matching, no model")
def _keyword(settings: Settings, embedder: Optional[Embedder]) -> Extractor:
    from .keyword import KeywordExtractor

    return KeywordExtractor()


@EXTRACTORS.register("llm", "a forced tool call to the LLM endpoint (BOUNDMEM_LLM_*)")
def _llm(settings: Settings, embedder: Optional[Embedder]) -> Extractor:
    from ..llm.registry import make_llm_client
    from .llm import LLMExtractor

    return LLMExtractor(make_llm_client(settings), shape=settings.llm.tool_shape, profile=settings.llm.profile)


@EXTRACTORS.register("local+llm", "cascade: the local path proposes, the LLM endpoint keeps, flips or rejects each")
def _cascade(settings: Settings, embedder: Optional[Embedder]) -> Extractor:
    from ..llm.registry import make_llm_client
    from .cascade import CascadeExtractor
    from .reader import ReaderExtractor

    client = make_llm_client(settings)   # first: a missing key or model is named before MiniLM loads
    return CascadeExtractor(ReaderExtractor(_minilm(embedder, settings)), client, ask=settings.llm.cascade_ask)


def uses_llm(name: str) -> bool:
    """Whether the extractor of this name calls the LLM endpoint (its settings are then checked at start)."""
    return "llm" in name.split("+")
