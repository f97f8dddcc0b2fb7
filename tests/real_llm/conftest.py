"""The real_llm tier: the real client against a real llama.cpp server with the 0.5B model.

Skipped unless a server answers: the one `boundmem llm local serve` started (its server.json under
$BOUNDMEM_LLM_HOME or ~/.cache/boundmem/llm), or BOUNDMEM_REAL_LLM_URL (+ BOUNDMEM_REAL_LLM_MODEL).
One command: `boundmem llm local install && boundmem llm local serve && python -m pytest -m real_llm`.
"""
from __future__ import annotations

import os

import pytest


def _endpoint():
    from boundmem.llm import llama_server as local

    url = os.environ.get("BOUNDMEM_REAL_LLM_URL")
    model = os.environ.get("BOUNDMEM_REAL_LLM_MODEL", local.DEFAULT_MODEL)
    if not url:
        from boundmem.config import Settings

        st = local.read_state(Settings.from_env().llm_local.home)
        if not st:
            return None, None, "no local server started (boundmem llm local serve) and no BOUNDMEM_REAL_LLM_URL"
        url, model = st["base_url"], st["model"]
    # connection refused comes at once; a busy llama-cpp-python server answers /models only after the current request
    served = local.probe(url, timeout=300)
    if served is None:
        return None, None, f"no server answers at {url}"
    return url, model, None


@pytest.fixture(scope="session")
def real_endpoint():
    url, model, why = _endpoint()
    if url is None:
        pytest.skip(why)
    return url, model


@pytest.fixture()
def real_client(real_endpoint):
    from boundmem.llm.client import LLMClient

    url, model = real_endpoint
    c = LLMClient(model=model, base_url=url, timeout=600, max_retries=0, max_tokens=400)
    yield c
    c.close()
