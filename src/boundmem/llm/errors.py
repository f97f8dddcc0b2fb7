"""Exceptions of the LLM path.

Every message names the model and the endpoint (so an operator can tell which of several
configured servers failed) and never contains the API key.
"""
from __future__ import annotations

from typing import Optional

from ..errors import UpstreamError


class LLMError(UpstreamError):
    """The LLM endpoint could not give an answer (transport, HTTP status, configuration)."""

    code = "llm_unavailable"
    upstream = "the language model endpoint"

    def __init__(self, message: str, *, model: str = "", endpoint: str = "", status: Optional[int] = None):
        self.model, self.endpoint, self.status = model, endpoint, status
        where = f" (model {model!r} at {endpoint})" if model or endpoint else ""
        super().__init__(f"{message}{where}")


class LLMTimeout(LLMError):
    """Every attempt timed out (or the connection failed) within the retry budget."""


class LLMOutputError(LLMError):
    """The endpoint answered, but not with what was asked for (no tool call, broken JSON, unknown tool).

    `raw` holds what the model did return, so a caller can show it back to the model when retrying.
    """

    def __init__(self, message: str, *, raw: str = "", **kw):
        self.raw = raw
        super().__init__(message, **kw)


class LLMNoToolCall(LLMOutputError):
    """The model answered in plain text although a tool call was required."""


class LLMBadArguments(LLMOutputError):
    """The model called the tool, but its arguments are not a JSON object."""

    def __init__(self, message: str, *, tool: str = "", **kw):
        self.tool = tool
        super().__init__(message, **kw)


class LLMUnknownTool(LLMOutputError):
    """The model called a tool that was not offered."""
