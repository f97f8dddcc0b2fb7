"""The LLM path: one OpenAI-compatible client shared by the LLM extractor and maintainer."""
from .errors import LLMBadArguments, LLMError, LLMNoToolCall, LLMOutputError, LLMTimeout, LLMUnknownTool

__all__ = ["LLMError", "LLMTimeout", "LLMOutputError", "LLMNoToolCall", "LLMBadArguments", "LLMUnknownTool",
           "LLMClient", "LLMUsage", "ToolCallResult"]


def __getattr__(name: str):
    # the client imports the openai SDK; keep `import boundmem.llm` free of it until a client is wanted
    if name in ("LLMClient", "LLMUsage", "ToolCallResult"):
        from . import client

        return getattr(client, name)
    raise AttributeError(name)
