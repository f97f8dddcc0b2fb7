"""The extractors by name. A loader gets the Settings and the embedder the Memory shares (None: the LLM ones)."""
from __future__ import annotations

from typing import Optional

from ..config import Settings
from ..embed.base import Embedder
from ..embed.registry import shared_or_settings
from ..registry import Registry
from .base import Extractor

EXTRACTORS: Registry[Extractor] = Registry("extractor", "--extractor")


def make_extractor(name: str, settings: Settings, embedder: Optional[Embedder]) -> Extractor:
    return EXTRACTORS.load(name, settings, embedder)


@EXTRACTORS.register("local", "offline: MiniLM category index + the lasting-preference model")
def _local(settings: Settings, embedder: Optional[Embedder]) -> Extractor:
    from .local import LocalExtractor

    return LocalExtractor(shared_or_settings(embedder, settings))


@EXTRACTORS.register("local-lenient", "local without the lasting-preference gate (category score alone)")
def _local_lenient(settings: Settings, embedder: Optional[Embedder]) -> Extractor:
    from .local import LocalExtractor

    # CarMem's labels count one-off commands as preferences; this reproduces what a category-only extractor gets there
    return LocalExtractor(shared_or_settings(embedder, settings), lasting=None)


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
    from .local import LocalExtractor

    client = make_llm_client(settings)   # first: a missing key or model is named before MiniLM loads
    return CascadeExtractor(LocalExtractor(shared_or_settings(embedder, settings)), client, ask=settings.llm.cascade_ask)


def uses_llm(name: str) -> bool:
    """Whether the extractor of this name calls the LLM endpoint (its settings are then checked at start)."""
    return "llm" in name.split("+")
