"""LLMClient against a real HTTP server: forced tool calls, retries, timeouts, errors, usage accounting."""
from __future__ import annotations

import pytest

from boundmem.config import Settings
from boundmem.errors import ConfigError
from boundmem.llm.client import LLMClient
from boundmem.llm.errors import (LLMBadArguments, LLMError, LLMNoToolCall, LLMOutputError, LLMTimeout,
                                 LLMUnknownTool)

from .fake_openai import FakeOpenAI, content, delay, raw, status, tool_call

KEY = "sk-test-secret-0123456789"
TOOL = {"type": "function", "function": {"name": "get_x", "description": "d",
                                         "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}
OTHER = {"type": "function", "function": {"name": "get_y", "parameters": {"type": "object", "properties": {}}}}
MSGS = [{"role": "user", "content": "hi"}]


def test_call_tool_forces_the_tool_and_returns_arguments(fake, make_client):
    fake.push(tool_call("get_x", {"x": 7}, prompt_tokens=120, completion_tokens=9))
    c = make_client()
    assert c.call_tool(MSGS, TOOL) == {"x": 7}
    body = fake.requests[0].json
    assert fake.requests[0].path == "/v1/chat/completions"
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_x"}}
    assert body["temperature"] == 0
    assert body["model"] == "test-model"
    assert body["messages"] == MSGS
    assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert c.usage.model_dump() == {"calls": 1, "requests": 1, "retries": 0, "failures": 0,
                                    "prompt_tokens": 120, "completion_tokens": 9}
    assert c.usage.total_tokens == 129


def test_call_tool_accepts_a_bare_function_dict(fake, make_client):
    fake.push(tool_call("get_x", {"x": 1}))
    assert make_client().call_tool(MSGS, TOOL["function"]) == {"x": 1}
    assert fake.requests[0].json["tools"] == [TOOL]


def test_choose_tool_requires_some_tool(fake, make_client):
    fake.push(tool_call("get_y", {}, content="thinking..."))
    c = make_client()
    assert c.choose_tool(MSGS, [TOOL, OTHER]) == ("get_y", {})
    assert fake.requests[0].json["tool_choice"] == "required"
    assert fake.requests[0].tool_names == ["get_x", "get_y"]


def test_plain_answer_instead_of_tool_call(fake, make_client):
    fake.push(content("I think you like pizza."))
    c = make_client()
    with pytest.raises(LLMNoToolCall) as ei:
        c.call_tool(MSGS, TOOL)
    assert isinstance(ei.value, LLMOutputError)
    assert ei.value.raw == "I think you like pizza."
    assert "test-model" in str(ei.value) and fake.base_url in str(ei.value)
    assert c.usage.failures == 1 and c.usage.requests == 1  # output errors are not retried by the client


@pytest.mark.parametrize("args", ['{"x": 7', "[1, 2]", "not json at all"])
def test_broken_arguments(fake, make_client, args):
    fake.push(tool_call("get_x", args))
    with pytest.raises(LLMBadArguments) as ei:
        make_client().call_tool(MSGS, TOOL)
    assert ei.value.raw == args and ei.value.tool == "get_x"


def test_tool_that_was_not_offered(fake, make_client):
    fake.push(tool_call("drop_database", {}))
    with pytest.raises(LLMUnknownTool, match="drop_database"):
        make_client().choose_tool(MSGS, [TOOL, OTHER])


@pytest.mark.parametrize("reply", [raw("{not json"), raw(""), raw("<html>bad gateway</html>", content_type="text/html"),
                                   raw('{"foo": 1}')])
def test_body_that_is_not_a_completion(fake, make_client, reply):
    fake.push(reply)
    with pytest.raises(LLMOutputError, match="not a chat completion"):
        make_client().call_tool(MSGS, TOOL)


@pytest.mark.parametrize("code", [500, 502, 503, 429, 408])
def test_transient_status_is_retried(fake, make_client, code):
    fake.push(status(code), tool_call("get_x", {"x": 2}, prompt_tokens=4, completion_tokens=1))
    c = make_client()
    assert c.call_tool(MSGS, TOOL) == {"x": 2}
    assert len(fake.requests) == 2
    assert c.usage.model_dump() == {"calls": 1, "requests": 2, "retries": 1, "failures": 0,
                                    "prompt_tokens": 4, "completion_tokens": 1}


def test_retries_are_bounded(fake, make_client):
    fake.push(*[status(429, headers={"retry-after": "0"})] * 5)
    c = make_client(max_retries=2)
    with pytest.raises(LLMError) as ei:
        c.call_tool(MSGS, TOOL)
    assert ei.value.status == 429 and "HTTP 429" in str(ei.value) and "3 attempt" in str(ei.value)
    assert len(fake.requests) == 3 and fake.unused == 2
    assert c.usage.retries == 2 and c.usage.failures == 1


@pytest.mark.parametrize("code", [400, 401, 404, 422])
def test_client_errors_are_not_retried(fake, make_client, code):
    fake.push(status(code), tool_call("get_x", {}))
    with pytest.raises(LLMError) as ei:
        make_client().call_tool(MSGS, TOOL)
    assert ei.value.status == code and len(fake.requests) == 1


def test_timeout_after_bounded_retries(fake, make_client):
    fake.push(*[delay(5.0, tool_call("get_x", {}))] * 3)
    c = make_client(timeout=0.3, max_retries=2)
    with pytest.raises(LLMTimeout) as ei:
        c.call_tool(MSGS, TOOL)
    assert "0.3 s" in str(ei.value) and "3 attempt" in str(ei.value)
    assert len(fake.requests) == 3
    assert c.usage.requests == 3 and c.usage.retries == 2 and c.usage.failures == 1


def test_slow_then_fast_answer_recovers(fake, make_client):
    fake.push(delay(5.0), tool_call("get_x", {"x": 3}))
    c = make_client(timeout=0.3)
    assert c.call_tool(MSGS, TOOL) == {"x": 3}
    assert c.usage.retries == 1


def test_unreachable_endpoint_is_an_error_not_a_hang():
    with FakeOpenAI() as srv:
        url = srv.base_url
    c = LLMClient("m", base_url=url, timeout=1.0, max_retries=1, backoff_base=0.01)
    with pytest.raises(LLMError, match="cannot reach") as ei:
        c.call_tool(MSGS, TOOL)
    assert not isinstance(ei.value, LLMTimeout)
    assert c.usage.requests == 2


def test_key_never_leaks(fake, make_client):
    fake.push(status(401, message=f"Incorrect API key provided: {KEY}"))
    c = make_client()
    with pytest.raises(LLMError) as ei:
        c.call_tool(MSGS, TOOL)
    assert KEY not in str(ei.value) and "***" in str(ei.value)
    assert KEY not in repr(c)
    assert "test-model" in str(ei.value) and fake.base_url in str(ei.value)


def test_endpoint_shown_without_credentials():
    c = LLMClient("m", base_url="http://bob:hunter2@localhost:9/v1?token=abc")
    assert c.endpoint == "http://localhost:9/v1"


def test_backoff_is_bounded():
    c = LLMClient("m", base_url="http://localhost:9/v1", backoff_base=0.5, backoff_max=3.0)
    assert [c.backoff(n) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert c.backoff(0, retry_after=120) == 3.0
    assert c.backoff(3, retry_after=0.25) == 0.25


def test_complete_plain_and_json_mode(fake, make_client):
    fake.push(content("hello"), content('{"a": 1}'), content("not json"), content('```json\n{"b": 2}\n```'))
    c = make_client()
    assert c.complete(MSGS) == "hello"
    assert "response_format" not in fake.requests[0].json and "tools" not in fake.requests[0].json
    assert c.complete(MSGS, json_mode=True) == '{"a": 1}'
    assert fake.requests[1].json["response_format"] == {"type": "json_object"}
    with pytest.raises(LLMOutputError, match="not JSON"):
        c.complete(MSGS, json_mode=True)
    assert c.complete(MSGS, json_mode=True) == '{"b": 2}'
    assert c.usage.calls == 4 and c.usage.prompt_tokens == 40 and c.usage.completion_tokens == 20
    assert c.usage.failures == 1


def _from_env() -> LLMClient:
    return LLMClient.from_settings(Settings.from_env().llm)


def test_from_env(monkeypatch, fake):
    for v in ("BOUNDMEM_LLM_API_KEY", "OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "BOUNDMEM_LLM_MODEL",
              "BOUNDMEM_LLM_AZURE_ENDPOINT", "OPENAI_BASE_URL"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("BOUNDMEM_LLM_BASE_URL", fake.base_url)
    monkeypatch.setenv("BOUNDMEM_LLM_TIMEOUT", "1.5")
    monkeypatch.setenv("BOUNDMEM_LLM_MAX_RETRIES", "0")
    c = _from_env()
    assert (c.model, c.timeout, c.max_retries, c.endpoint) == ("gpt-4o-2024-08-06", 1.5, 0, fake.base_url)
    fake.push(tool_call("get_x", {"x": 5}))
    assert c.call_tool(MSGS, TOOL) == {"x": 5}
    assert fake.requests[0].headers["authorization"] == "Bearer not-needed"  # local server: dummy key
    assert fake.requests[0].json["model"] == "gpt-4o-2024-08-06"

    monkeypatch.setenv("BOUNDMEM_LLM_MAX_RETRIES", "many")
    with pytest.raises(ConfigError, match="BOUNDMEM_LLM_MAX_RETRIES"):
        _from_env()
    monkeypatch.delenv("BOUNDMEM_LLM_MAX_RETRIES")
    monkeypatch.delenv("BOUNDMEM_LLM_BASE_URL")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY") as ei:  # a setting to fix, not a failing upstream
        _from_env()
    assert not isinstance(ei.value, LLMError)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("BOUNDMEM_LLM_MODEL", "my-model")
    c = _from_env()
    assert c.model == "my-model" and c.endpoint == "https://api.openai.com/v1"


def test_azure_endpoint(fake):
    c = LLMClient("my-deployment", api_key="az-key", azure_endpoint=fake.base_url.removesuffix("/v1"),
                  azure_api_version="2024-10-21", max_retries=0)
    fake.push(tool_call("get_x", {"x": 9}))
    assert c.call_tool(MSGS, TOOL) == {"x": 9}
    r = fake.requests[0]
    assert r.path.startswith("/openai/deployments/my-deployment/chat/completions")
    assert "api-version=2024-10-21" in r.path and r.headers["api-key"] == "az-key"


def test_temperature_can_be_left_out(fake, make_client, monkeypatch):
    fake.push(tool_call("get_x", {}), tool_call("get_x", {}))
    make_client(temperature=None).call_tool(MSGS, TOOL)
    assert "temperature" not in fake.requests[0].json
    monkeypatch.setenv("BOUNDMEM_LLM_BASE_URL", fake.base_url)
    monkeypatch.setenv("BOUNDMEM_LLM_TEMPERATURE", "none")
    _from_env().call_tool(MSGS, TOOL)
    assert "temperature" not in fake.requests[1].json


def test_named_tool_choice_rejected_falls_back_to_required(fake, make_client):
    fake.push(status(400, "tool_choice must be one of auto, none, required"), tool_call("get_x", {"x": 1}),
              tool_call("get_x", {"x": 2}))
    c = make_client()
    assert c.call_tool(MSGS, TOOL) == {"x": 1}
    assert c.call_tool(MSGS, TOOL) == {"x": 2}
    assert [r.json["tool_choice"] for r in fake.requests] == [
        {"type": "function", "function": {"name": "get_x"}}, "required", "required"]


def test_other_400_is_not_masked_by_the_fallback(fake, make_client):
    fake.push(status(400, "context length exceeded"))
    with pytest.raises(LLMError, match="context length"):
        make_client().call_tool(MSGS, TOOL)
    assert len(fake.requests) == 1


@pytest.mark.parametrize("text", ['{"name": "get_x", "arguments": {"x": 4}}',
                                  '```json\n{"name": "get_x", "parameters": {"x": 4}}\n```'])
def test_tool_call_written_as_text_is_accepted(fake, make_client, text):
    fake.push(content(text))
    assert make_client().call_tool(MSGS, TOOL) == {"x": 4}


@pytest.mark.parametrize("text", ['{"name": "get_z", "arguments": {}}', '{"x": 4}', 'Sure: {"name": "get_x"}'])
def test_other_json_text_is_still_no_tool_call(fake, make_client, text):
    fake.push(content(text))
    with pytest.raises(LLMNoToolCall):
        make_client().call_tool(MSGS, TOOL)
