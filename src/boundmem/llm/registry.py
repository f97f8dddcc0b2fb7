"""The LLM clients by name (`settings.llm.client`). One so far: any OpenAI-compatible endpoint, Azure included."""
from __future__ import annotations

from typing import Any

from ..config import Settings
from ..registry import Registry

LLM_CLIENTS: Registry[Any] = Registry("LLM client")


def make_llm_client(settings: Settings) -> Any:
    """The LLM client the settings name, built from their `llm` group."""
    return LLM_CLIENTS.load(settings.llm.client, settings)


@LLM_CLIENTS.register("openai", "chat completions of any OpenAI-compatible endpoint (OpenAI, Azure, vLLM, Ollama, "
                                "llama.cpp)")
def _openai(settings: Settings) -> Any:
    from .client import LLMClient

    return LLMClient.from_settings(settings.llm)
