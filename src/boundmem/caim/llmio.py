"""Ask an LLM for strict JSON and turn every way that can go wrong into one clear error.

Duck-typed against `boundmem.llm.client.LLMClient`: only `complete(messages, json_mode=True) -> str` is used,
so any object with that method (a test double, another provider) works.
"""
from __future__ import annotations

import json
import re
from typing import Any, Protocol

from ..errors import UpstreamError


class CAIMLLMError(UpstreamError):
    """The LLM's reply for a CAIM step was not the JSON that step needs (or the call failed)."""

    upstream = "the language model"

    def __init__(self, step: str, problem: str, raw: str = ""):
        self.step, self.problem, self.raw = step, problem, raw
        snippet = (raw[:200] + "...") if len(raw) > 200 else raw
        super().__init__(f"CAIM {step}: {problem}" + (f"; reply was {snippet!r}" if raw else ""))


class JSONCompleter(Protocol):
    def complete(self, messages: list[dict], json_mode: bool = False) -> str: ...


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


def ask_json(client: JSONCompleter, step: str, system: str, user: str) -> dict[str, Any]:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    try:
        raw = client.complete(messages, json_mode=True)
    except Exception as e:  # the client's own errors (HTTP, timeouts) keep their message
        raise CAIMLLMError(step, f"LLM call failed: {e}") from e
    if not isinstance(raw, str):
        raise CAIMLLMError(step, f"LLM returned {type(raw).__name__}, not text")
    text = raw.strip()
    if m := _FENCE.match(text):  # tolerated: some models fence JSON even in JSON mode
        text = m.group(1)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise CAIMLLMError(step, f"reply is not valid JSON ({e.msg} at char {e.pos})", raw) from None
    if not isinstance(data, dict):
        raise CAIMLLMError(step, "reply is JSON but not an object", raw)
    return data


def field(data: dict, key: str, kind: type, step: str, raw: str = "") -> Any:
    if key not in data:
        raise CAIMLLMError(step, f"reply lacks field {key!r}", raw or json.dumps(data))
    v = data[key]
    if kind is bool and not isinstance(v, bool):
        raise CAIMLLMError(step, f"field {key!r} must be true/false, got {v!r}", raw or json.dumps(data))
    if not isinstance(v, kind):
        raise CAIMLLMError(step, f"field {key!r} must be {kind.__name__}, got {type(v).__name__}", raw or json.dumps(data))
    return v
