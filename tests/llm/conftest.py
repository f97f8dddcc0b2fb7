"""Fixtures for the LLM path: a scripted OpenAI-compatible server and clients with tiny timeouts."""
from __future__ import annotations

import pytest

from .fake_openai import FakeOpenAI


@pytest.fixture()
def fake():
    with FakeOpenAI() as srv:
        yield srv


@pytest.fixture()
def make_client(fake):
    """LLMClient against `fake`, fast: 2 s timeout, 2 retries, 10 ms backoff (override by keyword)."""
    from boundmem.llm.client import LLMClient

    made = []

    def make(**kw):
        opts = dict(model="test-model", base_url=fake.base_url, api_key="sk-test-secret-0123456789", timeout=2.0,
                    max_retries=2, backoff_base=0.01, backoff_max=0.05)
        opts.update(kw)
        c = LLMClient(**opts)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()
