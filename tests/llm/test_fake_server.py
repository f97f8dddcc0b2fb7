"""The fake server other test packages reuse: order of replies, recording, exhaustion, callables, embeddings."""
from __future__ import annotations

import httpx
import openai

from .fake_openai import FakeOpenAI, embeddings, status, tool_call


def test_replies_in_order_and_requests_recorded():
    seen = []

    def echo(req):
        seen.append(req.json["messages"][0]["content"])
        return tool_call("f", {"echo": req.json["messages"][0]["content"]})

    with FakeOpenAI([echo, embeddings([[1.0, 0.0], [0.0, 1.0]])]) as srv:
        c = openai.OpenAI(base_url=srv.base_url, api_key="k", max_retries=0)
        r = c.chat.completions.create(model="m", messages=[{"role": "user", "content": "ping"}])
        assert r.choices[0].message.tool_calls[0].function.arguments == '{"echo": "ping"}'
        e = c.embeddings.create(model="emb", input=["a", "b"])
        assert [d.embedding for d in e.data] == [[1.0, 0.0], [0.0, 1.0]]
        assert [q.path for q in srv.requests] == ["/v1/chat/completions", "/v1/embeddings"]
        assert seen == ["ping"] and srv.unused == 0
        # script used up: a loud, non-retryable answer
        resp = httpx.post(srv.base_url + "/chat/completions", json={})
        assert resp.status_code == 418 and "exhausted" in resp.text


def test_status_reply_carries_headers():
    with FakeOpenAI([status(429, "slow down", headers={"retry-after": "7"})]) as srv:
        resp = httpx.post(srv.base_url + "/chat/completions", json={})
        assert resp.status_code == 429 and resp.headers["retry-after"] == "7"
        assert resp.json()["error"]["message"] == "slow down"
