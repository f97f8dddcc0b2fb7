"""The LLM path of both baselines against a scripted OpenAI-compatible server (the real SDK runs)."""
from __future__ import annotations

import json
from datetime import date

from boundmem.caim.base import DialogueTurn
from boundmem_bench.baselines import MemoryBank, TiM
from boundmem.llm.client import LLMClient
from llm.fake_openai import FakeOpenAI, content, status

D0 = date(2023, 4, 27)


def _client(srv):
    return LLMClient(model="test-model", base_url=srv.base_url, api_key="k", timeout=2.0, max_retries=0)


def test_memorybank_summary_from_llm_and_fallback_on_error(hash_embedder):
    turns = [DialogueTurn(id="2023-04-27#0", query="I painted a lake today. It was calm.", response="Lovely.")]
    with FakeOpenAI([content("Emily painted a lake."), status(400)]) as srv:
        mb = MemoryBank(hash_embedder, _client(srv))
        mb.add_session("emily", D0, turns)
        day2 = date(2023, 4, 28)
        mb.add_session("emily", day2, [DialogueTurn(id="2023-04-28#0", query="I baked bread. Yum.", response="Nice.")])
        assert "I painted a lake today" in srv.requests[0].text()
    texts = {i.id: i.text for i in mb.retrieve("emily", "lake", day2, k=10).items}
    assert texts["2023-04-27#summary"] == "The summary of the conversation on 2023-04-27 is: Emily painted a lake."
    assert texts["2023-04-28#summary"] == "The summary of the conversation on 2023-04-28 is: I baked bread."
    assert mb.llm_failures == 1


def test_tim_thoughts_from_llm_and_local_fallback_on_malformed_json(hash_embedder):
    good = json.dumps({"thoughts": [{"head": "violin", "text": "Emily is learning the violin."}]})
    with FakeOpenAI([content(good), content("sure! here are thoughts: none")]) as srv:
        tim = TiM(hash_embedder, _client(srv))
        tim.add_session("emily", D0, [DialogueTurn(id="2023-04-27#0", query="I started the violin.", response="Great."),
                                      DialogueTurn(id="2023-04-27#1", query="We adopted a kitten named Tofu.",
                                                   response="So cute.")])
        assert len(srv.requests) == 2 and srv.requests[0].json.get("response_format") == {"type": "json_object"}
    thoughts = {t.source_turn_ids: t for t in tim.thoughts("emily")}
    assert thoughts[("2023-04-27#0",)].text == "Emily is learning the violin."
    assert thoughts[("2023-04-27#0",)].head == "violin"
    assert thoughts[("2023-04-27#1",)].text.startswith("emily said: We adopted a kitten named Tofu.")
    assert tim.llm_failures == 1
