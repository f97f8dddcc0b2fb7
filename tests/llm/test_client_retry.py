"""The LLM client's retry policy, pinned down: which failures are retried, how often, and how long it waits.

Every client here gets a recording `sleep`, so the waits are asserted exactly and no test waits on the clock.
The policy: timeouts, connection errors, 408/409/429 and 5xx are retried `max_retries` times; the wait before
retry n is min(backoff_max, backoff_base * 2**n), or the server's numeric Retry-After capped at backoff_max;
no wait after the last attempt; anything else fails at once.
"""
from __future__ import annotations

import json

import pytest

from boundmem.llm.client import LLMClient
from boundmem.llm.errors import LLMError, LLMOutputError, LLMTimeout

from .fake_openai import FakeOpenAI, content, delay, raw, status, tool_call

TOOL = {"type": "function", "function": {"name": "get_x", "parameters": {"type": "object", "properties": {}}}}
MSGS = [{"role": "user", "content": "hi"}]
OK = tool_call("get_x", {"x": 1})


@pytest.fixture()
def waits():
    return []


@pytest.fixture()
def client(fake, waits):
    made = []

    def make(**kw):
        opts = dict(model="m", base_url=fake.base_url, api_key="sk-test-secret-0123456789", timeout=2.0,
                    max_retries=4, backoff_base=0.5, backoff_max=3.0, sleep=waits.append)
        opts.update(kw)
        made.append(LLMClient(**opts))
        return made[-1]

    yield make
    for c in made:
        c.close()


@pytest.mark.parametrize("code", [408, 409, 429, 500, 502, 503, 504, 599])
def test_these_statuses_are_retried_with_exponential_capped_waits(fake, client, waits, code):
    fake.push(*[status(code)] * 4, OK)
    c = client()
    assert c.call_tool(MSGS, TOOL) == {"x": 1}
    assert waits == [0.5, 1.0, 2.0, 3.0]
    assert len(fake.requests) == 5
    assert c.usage.model_dump(include={"calls", "requests", "retries", "failures"}) == {
        "calls": 1, "requests": 5, "retries": 4, "failures": 0}


@pytest.mark.parametrize("code", [400, 401, 403, 404, 410, 413, 422, 418])
def test_other_statuses_fail_at_once_without_waiting(fake, client, waits, code):
    fake.push(status(code), OK)
    c = client()
    with pytest.raises(LLMError) as ei:
        c.call_tool(MSGS, TOOL)
    assert ei.value.status == code and f"HTTP {code} after 1 attempt(s)" in str(ei.value)
    assert waits == [] and len(fake.requests) == 1 and fake.unused == 1
    assert c.usage.retries == 0 and c.usage.failures == 1


def test_exhausted_retries_raise_the_last_failure_and_do_not_wait_after_it(fake, client, waits):
    fake.push(status(500), status(502), status(503), OK)
    c = client(max_retries=2)
    with pytest.raises(LLMError) as ei:
        c.call_tool(MSGS, TOOL)
    assert ei.value.status == 503 and "HTTP 503 after 3 attempt(s)" in str(ei.value)
    assert waits == [0.5, 1.0] and len(fake.requests) == 3 and fake.unused == 1
    assert c.usage.model_dump(include={"calls", "requests", "retries", "failures"}) == {
        "calls": 1, "requests": 3, "retries": 2, "failures": 1}


def test_no_retries_means_one_attempt(fake, client, waits):
    fake.push(status(503), OK)
    with pytest.raises(LLMError, match="after 1 attempt"):
        client(max_retries=0).call_tool(MSGS, TOOL)
    assert waits == [] and len(fake.requests) == 1


@pytest.mark.parametrize("header,wait", [("1.5", 1.5), ("0", 0.0), ("2", 2.0), ("120", 3.0),   # capped
                                         ("-1", 0.5),                                           # ignored
                                         ("Wed, 21 Oct 2015 07:28:00 GMT", 0.5), ("soon", 0.5)])  # not a number
def test_retry_after_is_honoured_up_to_the_cap(fake, client, waits, header, wait):
    fake.push(status(429, headers={"retry-after": header}), OK)
    assert client().call_tool(MSGS, TOOL) == {"x": 1}
    assert waits == [wait]


def test_retry_after_counts_per_attempt_and_also_on_5xx(fake, client, waits):
    fake.push(status(503, headers={"retry-after": "2.5"}), status(503), status(429, headers={"retry-after": "0.25"}),
              OK)
    assert client().call_tool(MSGS, TOOL) == {"x": 1}
    assert waits == [2.5, 1.0, 0.25]   # the exponential step is by retry number, whatever the previous wait was


def test_backoff_base_zero_retries_without_waiting(fake, client, waits):
    fake.push(status(500), status(500), OK)
    assert client(backoff_base=0.0).call_tool(MSGS, TOOL) == {"x": 1}
    assert waits == [0.0, 0.0]


def test_timeouts_are_retried_and_end_as_llm_timeout(fake, client, waits):
    fake.push(*[delay(5.0, OK)] * 2)
    c = client(timeout=0.2, max_retries=1)
    with pytest.raises(LLMTimeout) as ei:
        c.call_tool(MSGS, TOOL)
    assert "no answer within 0.2 s after 2 attempt(s)" in str(ei.value)
    assert waits == [0.5] and c.usage.requests == 2 and c.usage.retries == 1 and c.usage.failures == 1


def test_a_timeout_then_an_answer_recovers(fake, client, waits):
    fake.push(delay(5.0), OK)
    c = client(timeout=0.2)
    assert c.call_tool(MSGS, TOOL) == {"x": 1}
    assert waits == [0.5] and c.usage.retries == 1 and c.usage.failures == 0


def test_connection_errors_are_retried(waits):
    with FakeOpenAI() as srv:
        url = srv.base_url
    c = LLMClient("m", base_url=url, timeout=1.0, max_retries=3, backoff_base=0.1, backoff_max=0.3, sleep=waits.append)
    with pytest.raises(LLMError, match=r"cannot reach the endpoint after 4 attempt\(s\)") as ei:
        c.call_tool(MSGS, TOOL)
    assert not isinstance(ei.value, LLMTimeout) and ei.value.status is None
    assert waits == [0.1, 0.2, 0.3] and c.usage.requests == 4 and c.usage.failures == 1


@pytest.mark.parametrize("reply", [raw("{not json"), raw('{"foo": 1}'), content("no tool here")])
def test_bad_bodies_are_not_retried(fake, client, waits, reply):
    fake.push(reply, OK)
    c = client()
    with pytest.raises(LLMOutputError):
        c.call_tool(MSGS, TOOL)
    assert waits == [] and len(fake.requests) == 1 and c.usage.retries == 0


def test_each_call_starts_its_own_retry_budget(fake, client, waits):
    fake.push(status(500), OK, status(500), status(500), OK)
    c = client(max_retries=2)
    assert c.call_tool(MSGS, TOOL) == {"x": 1}
    assert c.call_tool(MSGS, TOOL) == {"x": 1}
    assert waits == [0.5, 0.5, 1.0]
    assert c.usage.model_dump(include={"calls", "requests", "retries", "failures"}) == {
        "calls": 2, "requests": 5, "retries": 3, "failures": 0}


def test_every_attempt_is_logged(fake, client, tmp_path):
    log = tmp_path / "usage.jsonl"
    fake.push(status(503), status(429), OK)
    client(usage_log=str(log)).call_tool(MSGS, TOOL)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["outcome"] for x in lines] == ["http 503", "http 429", "ok"]


def test_the_public_backoff_schedule():
    c = LLMClient("m", base_url="http://localhost:9/v1", backoff_base=0.5, backoff_max=3.0)
    assert [c.backoff(n) for n in range(6)] == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]
    assert c.backoff(0, retry_after=120) == 3.0 and c.backoff(3, retry_after=0.25) == 0.25
    assert c.backoff(2, retry_after=-1) == 2.0
