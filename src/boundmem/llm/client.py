"""A small synchronous client for any OpenAI-compatible chat endpoint (OpenAI, Azure, vLLM, Ollama, llama.cpp).

Why not call the SDK directly from the extractor and maintainer: both need the same three things
the SDK leaves to the caller, and they must behave identically everywhere:
- retries that are bounded and cheap to test (the SDK's own retries are switched off so that the
  backoff, the retry count and the final exception type are ours; tenacity runs them, with our policy);
- tool calls turned into plain dicts, with a typed error when the model answers without a tool
  call or with arguments that are not JSON (local servers do both);
- token and retry accounting for the benchmark.
"""
from __future__ import annotations

import json
import re
import threading
import time
from typing import Any, Callable, Optional, Sequence

from pydantic import BaseModel
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential
from tenacity.wait import wait_base

from ..config import LLMSettings
from ..errors import ConfigError
from .errors import LLMBadArguments, LLMError, LLMNoToolCall, LLMOutputError, LLMTimeout, LLMUnknownTool

DEFAULT_MODEL = "gpt-4o-2024-08-06"
OPENAI_URL = "https://api.openai.com/v1"
LOCAL_DUMMY_KEY = "not-needed"  # local servers ignore the key, but the SDK insists on one
RETRY_STATUS = frozenset({408, 409, 429})
_LOG_NAME = "_boundmem_log_name"   # what the usage log calls a schema-constrained answer (never sent)

Messages = Sequence[dict[str, Any]]


class LLMUsage(BaseModel):
    """What the client has spent so far. `calls` are logical calls; `requests` include retries."""

    calls: int = 0
    requests: int = 0
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ToolCallResult(BaseModel):
    """One tool call of the model, arguments already parsed; `content` is any text it wrote alongside."""

    name: str
    arguments: dict[str, Any]
    content: str = ""


def _public_url(url: str) -> str:
    """The endpoint as shown in messages: no user:password, no query string."""
    url = re.sub(r"//[^/@]*@", "//", url)
    return url.split("?", 1)[0].rstrip("/")


def _tool_name(tool: dict) -> str:
    fn = tool.get("function", tool)
    name = fn.get("name") if isinstance(fn, dict) else None
    if not name:
        raise ValueError("a tool must be {'type': 'function', 'function': {'name': ..., 'parameters': ...}}")
    return str(name)


def _as_tool(tool: dict) -> dict:
    return tool if tool.get("type") == "function" and "function" in tool else {"type": "function", "function": tool}


class LLMClient:
    """Chat completions with forced tool calls, temperature 0, bounded retries and usage accounting.

    `temperature=None` leaves it out of the request (some reasoning models accept only their default).
    `max_tokens` bounds every answer (left out of the request when None). `usage_log` names a JSONL file that gets
    one line per request (time, model, tool, seconds, tokens, outcome; never message content): `boundmem llm usage`
    summarises it.
    `max_retries` is the number of extra attempts after the first for timeouts, connection errors,
    408/409/429 and 5xx. The wait before retry n (n = 0, 1, ...) is `min(backoff_max, backoff_base * 2**n)`,
    or the server's Retry-After if it sent one, capped at `backoff_max`. `sleep` waits that long (tests pass a
    recorder so that they never wait on the wall clock).
    """

    def __init__(self, model: str = DEFAULT_MODEL, base_url: Optional[str] = None, api_key: Optional[str] = None,
                 timeout: float = 30.0, max_retries: int = 3, *, backoff_base: float = 0.5, backoff_max: float = 8.0,
                 azure_endpoint: Optional[str] = None, azure_api_version: Optional[str] = None,
                 temperature: Optional[float] = 0.0, max_tokens: Optional[int] = None,
                 usage_log: Optional[str] = None, sleep: Callable[[float], None] = time.sleep):
        import openai  # the optional `llm` extra; imported here so the offline install never needs it

        if not model:
            raise ConfigError("no model name given (set BOUNDMEM_LLM_MODEL)")
        if timeout <= 0 or max_retries < 0 or backoff_base < 0 or backoff_max < 0 or (max_tokens is not None and max_tokens < 1):
            raise ConfigError(f"invalid LLM client settings for model {model!r}: timeout={timeout}, "
                              f"max_retries={max_retries}, backoff_base={backoff_base}, backoff_max={backoff_max}, "
                              f"max_tokens={max_tokens}")
        self.model = model
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.usage_log = usage_log
        self._sleep = sleep
        self._wait = _RetryAfterOrExponential(self.backoff_base, self.backoff_max)
        self.usage = LLMUsage()
        self._lock = threading.Lock()
        self.endpoint = _public_url(azure_endpoint or base_url or OPENAI_URL)
        if not api_key:
            if base_url is None and azure_endpoint is None:
                raise ConfigError(f"no API key for {self.endpoint} (model {model!r}): set OPENAI_API_KEY or "
                                  "BOUNDMEM_LLM_API_KEY (a local server given by BOUNDMEM_LLM_BASE_URL needs none)")
            api_key = LOCAL_DUMMY_KEY
        self._key = api_key
        if azure_endpoint:
            self._sdk = openai.AzureOpenAI(azure_endpoint=azure_endpoint, api_key=api_key,
                                           api_version=azure_api_version or "2024-10-21",
                                           timeout=self.timeout, max_retries=0)
        else:
            self._sdk = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=self.timeout, max_retries=0)
        self._openai = openai
        self._named_choice = True
        self._schema_form = "json_schema"

    @classmethod
    def from_settings(cls, s: LLMSettings, **overrides: Any) -> "LLMClient":
        """The client the settings describe (BOUNDMEM_LLM_*: config.py and docs/reference/settings.md)."""
        kw: dict[str, Any] = dict(model=s.model, base_url=s.base_url, api_key=s.api_key.get_secret_value() if s.api_key else None,
                                  timeout=s.timeout, max_retries=s.max_retries, backoff_base=s.backoff,
                                  azure_endpoint=s.azure_endpoint, azure_api_version=s.azure_api_version,
                                  temperature=s.temperature, max_tokens=s.max_tokens, usage_log=s.usage_log)
        kw.update(overrides)
        return cls(**kw)

    # --- public calls --------------------------------------------------------------------------
    def call_tool(self, messages: Messages, tool: dict, **params: Any) -> dict[str, Any]:
        """Force the model to call `tool`; return its arguments as a dict. `params` go into the request (max_tokens)."""
        tool = _as_tool(tool)
        if self._named_choice:
            try:
                return self.tool_call(messages, [tool], {"type": "function", "function": {"name": _tool_name(tool)}},
                                      **params).arguments
            except LLMError as e:
                # some local servers accept only "auto"/"required"/"none"; with one tool offered, "required" is the same
                if e.status != 400 or "tool_choice" not in str(e):
                    raise
                self._named_choice = False
        return self.tool_call(messages, [tool], "required", **params).arguments

    def choose_tool(self, messages: Messages, tools: list[dict], **params: Any) -> tuple[str, dict[str, Any]]:
        """Make the model call exactly one of `tools` (tool_choice="required"); return (name, arguments)."""
        r = self.tool_call(messages, tools, "required", **params)
        return r.name, r.arguments

    def tool_call(self, messages: Messages, tools: list[dict], tool_choice: Any = "required", **params: Any) -> ToolCallResult:
        """The general form of call_tool/choose_tool that also returns the text the model wrote."""
        tools = [_as_tool(t) for t in tools]
        offered = {_tool_name(t) for t in tools}
        resp = self._create(messages=list(messages), tools=tools, tool_choice=tool_choice, **params)
        msg = self._message(resp)
        content = msg.content or ""
        calls = getattr(msg, "tool_calls", None) or []
        if calls:
            fn = getattr(calls[0], "function", None)
            name, raw_args = getattr(fn, "name", None), getattr(fn, "arguments", None)
            if not isinstance(name, (str, type(None))):
                self._failed()
                raise self._error(LLMOutputError, f"the endpoint returned a tool call that is not one: {calls[0]!r:.200}")
            name = name or ""
        else:
            written = _call_in_text(content, offered)
            if written is None:
                self._failed()
                raise LLMNoToolCall("the model answered without calling a tool" + (f": {content[:200]!r}" if content else ""),
                                    raw=content, model=self.model, endpoint=self.endpoint)
            name, raw_args = written
        if name not in offered:
            self._failed()
            raise LLMUnknownTool(f"the model called tool {name!r}, which was not offered (offered: {sorted(offered)})",
                                 raw=str(raw_args), model=self.model, endpoint=self.endpoint)
        args = self._parse_args(name, raw_args)
        return ToolCallResult(name=name, arguments=args, content=content)

    def complete(self, messages: Messages, json_mode: bool = False) -> str:
        """Plain text answer. With json_mode the server is asked for a JSON object, a ```json fence is removed,
        and the text is checked to be JSON (LLMOutputError otherwise)."""
        extra = {"response_format": {"type": "json_object"}} if json_mode else {}
        text = self._message(self._create(messages=list(messages), **extra)).content or ""
        if json_mode:
            m = _FENCE.match(text.strip())  # some models fence JSON even in JSON mode
            text = m.group(1) if m else text
            try:
                json.loads(text)
            except json.JSONDecodeError as e:
                self._failed()
                raise LLMOutputError(f"json_mode answer is not JSON: {e.msg} at char {e.pos}", raw=text,
                                     model=self.model, endpoint=self.endpoint) from None
        return text

    def complete_schema(self, messages: Messages, schema: dict, name: str, **params: Any) -> dict[str, Any]:
        """An answer constrained to `schema` (a JSON object schema) without offering a tool, so the schema is not
        also written into the prompt by the chat template: the grammar alone holds the model to it.

        Asked the OpenAI way first (`response_format` json_schema: OpenAI, vLLM, llama.cpp's own server); a server
        that rejects that form naming response_format (llama-cpp-python's server takes only {"type": "json_object",
        "schema": ...} and answers the other with a 500 naming the field) is asked that way from then on. A server that ignores the schema
        still has to produce a JSON object here; holding it to the schema is the caller's validation."""
        forms = ("json_schema", "json_object") if self._schema_form == "json_schema" else ("json_object",)
        for form in forms:
            rf = ({"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
                  if form == "json_schema" else {"type": "json_object", "schema": schema})
            try:
                resp = self._create(messages=list(messages), response_format=rf, **{_LOG_NAME: name}, **params)
            except LLMError as e:
                if form == "json_schema" and e.status in (400, 422, 500) and "response_format" in str(e):
                    self._schema_form = "json_object"
                    continue
                raise
            break
        text = (self._message(resp).content or "").strip()
        m = _FENCE.match(text)
        text = m.group(1) if m else text
        return self._parse_args(name, text)

    def close(self) -> None:
        self._sdk.close()

    def __enter__(self) -> "LLMClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:  # never the key
        return f"LLMClient(model={self.model!r}, endpoint={self.endpoint!r})"

    # --- retry and accounting -------------------------------------------------------------------
    def backoff(self, retry: int, retry_after: Optional[float] = None) -> float:
        """Seconds to wait before retry number `retry` (0-based); never more than backoff_max."""
        state = RetryCallState(None, None, (), {})
        state.attempt_number = retry + 1
        return self._wait.seconds(state, retry_after)

    def _count(self, **inc: int) -> None:
        with self._lock:
            for k, v in inc.items():
                setattr(self.usage, k, getattr(self.usage, k) + v)

    def _failed(self) -> None:
        self._count(failures=1)

    def _scrub(self, text: str) -> str:
        if self._key and len(self._key) >= 4:
            text = text.replace(self._key, "***")
        return text

    def _error(self, cls: type[LLMError], message: str, status: Optional[int] = None) -> LLMError:
        return cls(self._scrub(message), model=self.model, endpoint=self.endpoint, status=status)

    def _log(self, params: dict, seconds: float, outcome: str, resp: Any = None) -> None:
        if not self.usage_log:
            return
        u = getattr(resp, "usage", None)
        tc, named = params.get("tool_choice"), params.get(_LOG_NAME)
        line = {"t": round(time.time(), 3), "model": self.model,
                "tool": (tc.get("function", {}).get("name") if isinstance(tc, dict) else named if named else
                         ",".join(sorted(_tool_name(t) for t in params.get("tools") or [])) or None),
                "seconds": round(seconds, 3), "outcome": outcome,
                "prompt_tokens": int(getattr(u, "prompt_tokens", 0) or 0) if u is not None else None,
                "completion_tokens": int(getattr(u, "completion_tokens", 0) or 0) if u is not None else None}
        try:
            with self._lock, open(self.usage_log, "a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")
        except OSError:
            pass  # accounting must never break a call

    def _create(self, **params: Any):
        self._count(calls=1)
        if self.max_tokens is not None:
            params.setdefault("max_tokens", self.max_tokens)
        if self.temperature is not None:
            params.setdefault("temperature", self.temperature)
        retrying = Retrying(stop=stop_after_attempt(self.max_retries + 1), wait=self._wait,
                            retry=retry_if_exception_type(_Transient), sleep=self._sleep,
                            before_sleep=lambda _: self._count(retries=1), reraise=True)
        try:
            for attempt in retrying:
                with attempt:
                    return self._attempt(params, attempt.retry_state.attempt_number)
        except _Transient as t:
            self._failed()
            raise t.failure from None
        raise AssertionError("tenacity ended without a result or an exception")  # pragma: no cover

    def _attempt(self, params: dict, n: int):
        """One request; a failure worth retrying comes back as _Transient, any other as the LLMError to raise."""
        oa = self._openai
        self._count(requests=1)
        started = time.monotonic()
        try:
            resp = self._sdk.chat.completions.create(model=self.model, **{k: v for k, v in params.items() if k != _LOG_NAME})
        except oa.APITimeoutError:
            self._log(params, time.monotonic() - started, "timeout")
            raise _Transient(self._error(LLMTimeout, f"no answer within {self.timeout:g} s after {n} attempt(s)")) from None
        except oa.APIConnectionError as e:
            self._log(params, time.monotonic() - started, "connection error")
            raise _Transient(self._error(LLMError, f"cannot reach the endpoint after {n} attempt(s): {e.__cause__ or e}")) from None
        except oa.APIStatusError as e:
            status = e.status_code
            self._log(params, time.monotonic() - started, f"http {status}")
            failure = self._error(LLMError, f"HTTP {status} after {n} attempt(s): {e.message}", status)
            if status not in RETRY_STATUS and status < 500:
                self._failed()
                raise failure from None
            raise _Transient(failure, _retry_after(e.response)) from None
        except (oa.APIResponseValidationError, ValueError, RecursionError) as e:   # not JSON, undecodable, too deep
            # a 200 whose body is not a chat completion: retrying the same request rarely helps
            self._failed()
            raise self._error(LLMOutputError, f"the endpoint returned a body that is not a chat completion: "
                                              f"{type(e).__name__}: {str(e)[:200]}") from None
        self._log(params, time.monotonic() - started, "ok", resp)
        u = getattr(resp, "usage", None)
        if u is not None:
            self._count(prompt_tokens=int(getattr(u, "prompt_tokens", 0) or 0),
                        completion_tokens=int(getattr(u, "completion_tokens", 0) or 0))
        return resp

    def _message(self, resp):
        choices = getattr(resp, "choices", None)
        msg = getattr(choices[0], "message", None) if isinstance(choices, list) and choices else None
        if not hasattr(msg, "content") or not isinstance(msg.content, (str, type(None))) or not isinstance(
                getattr(msg, "tool_calls", None), (list, type(None))):   # the SDK does not check a 200's shape
            self._failed()
            raise self._error(LLMOutputError, "the endpoint returned a body that is not a chat completion (no choices "
                                              f"with a message): {str(resp)[:200]!r}")
        return msg

    def _parse_args(self, name: str, raw: Any) -> dict[str, Any]:
        if isinstance(raw, dict):  # some servers send an object instead of a JSON string
            return raw
        text = (raw or "").strip() if isinstance(raw, str) or raw is None else str(raw)
        try:
            args = json.loads(text) if text else {}
        except RecursionError:
            self._failed()
            raise LLMBadArguments(f"arguments of tool {name!r} are JSON nested too deeply to read", raw=text[:200],
                                  tool=name, model=self.model, endpoint=self.endpoint) from None
        except json.JSONDecodeError as e:
            self._failed()
            raise LLMBadArguments(f"arguments of tool {name!r} are not valid JSON: {e.msg} at char {e.pos}",
                                  raw=text, tool=name, model=self.model, endpoint=self.endpoint) from None
        if not isinstance(args, dict):
            self._failed()
            raise LLMBadArguments(f"arguments of tool {name!r} are a JSON {type(args).__name__}, not an object",
                                  raw=text, tool=name, model=self.model, endpoint=self.endpoint)
        return args


class _Transient(Exception):
    """A failed attempt worth another: the error to raise if it is the last, and the server's Retry-After."""

    def __init__(self, failure: LLMError, retry_after: Optional[float] = None):
        super().__init__(str(failure))
        self.failure, self.retry_after = failure, retry_after


class _RetryAfterOrExponential(wait_base):
    """tenacity's capped exponential wait (base * 2**n), unless the server sent a Retry-After (capped as well)."""

    def __init__(self, base: float, cap: float):
        self.cap = cap
        self.exponential = wait_exponential(multiplier=base, max=cap)

    def __call__(self, retry_state: RetryCallState) -> float:
        failed = retry_state.outcome.exception() if retry_state.outcome else None
        return self.seconds(retry_state, getattr(failed, "retry_after", None))

    def seconds(self, retry_state: RetryCallState, retry_after: Optional[float]) -> float:
        if retry_after is not None and retry_after >= 0:
            return min(self.cap, retry_after)
        return self.exponential(retry_state)


def _retry_after(response) -> Optional[float]:
    try:
        v = response.headers.get("retry-after") if response is not None else None
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


def _call_in_text(content: str, offered: set[str]) -> Optional[tuple[str, Any]]:
    """A tool call the server left in the text (vLLM or llama.cpp without a tool parser, llama-cpp-python with
    tool_choice "required"): the whole answer is one JSON object {"name": <offered tool>, "arguments"|"parameters":
    {...}}, maybe in a ```json fence or in the <tool_call>...</tool_call> tags of Qwen/Hermes chat templates
    (only the first call is taken, as from a tool_calls list)."""
    text = content.strip()
    m = _FENCE.match(text)
    if m:
        text = m.group(1)
    if text.startswith("<tool_call>"):
        text = text[len("<tool_call>"):].split("</tool_call>", 1)[0].strip()
    if not text.startswith("{"):
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or obj.get("name") not in offered:
        return None
    args = obj.get("arguments", obj.get("parameters"))
    return (obj["name"], args) if isinstance(args, (dict, str)) else None
