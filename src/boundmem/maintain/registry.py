"""The maintainers by name. A loader gets the Settings and the embedder the Memory shares (None: the LLM one)."""
from __future__ import annotations

from typing import Optional

from ..config import Settings
from ..embed.base import Embedder
from ..registry import Registry
from .base import Maintainer

MAINTAINERS: Registry[Maintainer] = Registry("maintainer", "--maintainer")


def make_maintainer(name: str, settings: Settings, embedder: Optional[Embedder]) -> Maintainer:
    return MAINTAINERS.load(name, settings, embedder)


@MAINTAINERS.register("local", "offline: attribute identity, the extractor's polarity compared")
def _local(settings: Settings, embedder: Optional[Embedder]) -> Maintainer:
    from .rules import LocalMaintainer

    return LocalMaintainer(embedder)


@MAINTAINERS.register("rules", "string rules, no model")
def _rules(settings: Settings, embedder: Optional[Embedder]) -> Maintainer:
    from .rules import RuleMaintainer

    return RuleMaintainer()


@MAINTAINERS.register("llm", "the paper's tool calls to the LLM endpoint (BOUNDMEM_LLM_*)")
def _llm(settings: Settings, embedder: Optional[Embedder]) -> Maintainer:
    from ..llm.registry import make_llm_client
    from .llm import LLMMaintainer

    return LLMMaintainer(make_llm_client(settings))
