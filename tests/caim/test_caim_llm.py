"""CAIM's LLM steps against a scripted OpenAI-compatible server (the real openai SDK runs)."""
import json
import re
from datetime import date

import pytest

from boundmem.caim.base import DialogueTurn
from boundmem.caim.controller import LLMController
from boundmem.caim.llmio import CAIMLLMError
from boundmem.caim.system import CAIM
from boundmem.llm.client import LLMClient
from llm.fake_openai import FakeOpenAI, content, status

D = date(2023, 5, 4)
TODAY = date(2023, 5, 7)
TURNS = [DialogueTurn(id="2023-05-04#0", query="Hi!", response="Hello!"),
         DialogueTurn(id="2023-05-04#1", query="I can't sleep well, any app for that?",
                      response="I recommend the meditation apps Calm and Headspace.")]


def _client(srv):
    return LLMClient(model="test-model", base_url=srv.base_url, api_key="k", timeout=2.0, max_retries=0)


def test_controller_parses_strict_json_and_sends_json_mode():
    with FakeOpenAI([content('{"retrieve": true}'), content('{"retrieve": false}')]) as srv:
        c = LLMController(_client(srv))
        assert c.needs_memory("What app did you recommend?", TURNS) is True
        assert c.needs_memory("Hello!", []) is False
        body = srv.requests[0].json
        assert body["response_format"] == {"type": "json_object"}
        assert "What app did you recommend?" in srv.requests[0].text()
        assert "Calm and Headspace" in srv.requests[0].text()  # short-term memory is shown to the controller


@pytest.mark.parametrize("reply,problem", [
    ('{"retrieve": "yes"}', "must be true/false"),
    ('{"answer": true}', "lacks field 'retrieve'"),
    ("sure, retrieve it", "not JSON"),
    ('["retrieve"]', "not an object"),
])
def test_controller_malformed_reply_is_a_clear_error(reply, problem):
    with FakeOpenAI([content(reply)]) as srv:
        with pytest.raises(CAIMLLMError) as ei:
            LLMController(_client(srv)).needs_memory("What did I say?", [])
    assert "memory controller" in str(ei.value) and problem in str(ei.value)


def _relevant_first_id(req):
    ids = re.findall(r"\[([0-9a-f]{32})\]", req.text())
    return content(json.dumps({"relevant": [ids[0], "no-such-id"]}))


def test_full_llm_flow_post_thinking_and_retrieval():
    think = {"thoughts": [
        {"text": "User sleeps badly.", "tags": ["Wellbeing/Health/health", "Not/A/tag"], "sources": ["2023-05-04#1"]},
        {"text": "AI recommended the meditation apps Calm and Headspace to user.",
         "tags": ["recommendations/tools/APP"], "sources": ["2023-05-04#1", "2099-01-01#7"]}]}
    script = [content(json.dumps(think)),  # post-thinking (no stored thoughts yet -> no merge call)
              content('{"retrieve": true}'), content('{"tags": ["Recommendations/Tools/app"]}'),
              _relevant_first_id]
    with FakeOpenAI(script) as srv:
        m = CAIM(llm=_client(srv), on_llm_error="raise")
        m.add_session("u", D, TURNS)
        ts = m.thoughts("u")
        assert [t.text for t in ts] == [x["text"] for x in think["thoughts"]]
        assert ts[0].tags == ("Wellbeing/Health/health",)  # unknown tag dropped
        assert ts[1].tags == ("Recommendations/Tools/app",)  # normalised
        assert ts[1].source_turn_ids == ("2023-05-04#1",)  # id not in the session dropped
        assert "2023-05-04#1" in srv.requests[0].text() and "Session date: 2023-05-04" in srv.requests[0].text()
        res = m.retrieve("u", "What meditation apps did you recommend to me?", TODAY)
        assert res.retrieved and [i.text for i in res.items] == [ts[1].text]
        assert srv.unused == 0


def test_merge_duplicate_via_llm_unions_sources():
    first = {"thoughts": [{"text": "User likes jazz.", "tags": ["Preferences/Music/genre"], "sources": ["2023-05-04#0"]}]}
    again = {"thoughts": [{"text": "User loves jazz.", "tags": ["Preferences/Music/genre"], "sources": ["2023-05-05#0"]}]}

    def merge(req):
        tid = re.findall(r"\[([0-9a-f]{32})\]", req.text())[0]
        return content(json.dumps({"action": "duplicate", "target": tid, "text": "User loves jazz music."}))

    with FakeOpenAI([content(json.dumps(first)), content(json.dumps(again)), merge]) as srv:
        m = CAIM(llm=_client(srv), on_llm_error="raise")
        m.add_session("u", D, [DialogueTurn(id="2023-05-04#0", query="I like jazz.")])
        m.add_session("u", date(2023, 5, 5), [DialogueTurn(id="2023-05-05#0", query="Jazz is my love.")])
        ts = m.thoughts("u")
        assert [(t.text, t.source_turn_ids) for t in ts] == [("User loves jazz music.", ("2023-05-04#0", "2023-05-05#0"))]


def test_malformed_post_thinking_stores_nothing_and_keeps_the_session():
    with FakeOpenAI([content('{"thoughts": [{"tags": []}]}')]) as srv:
        m = CAIM(llm=_client(srv), on_llm_error="raise")
        with pytest.raises(CAIMLLMError, match="post-thinking"):
            m.add_session("u", D, TURNS)
        assert m.thoughts("u") == []
        assert len(m.store.stm("u")) == 2  # nothing lost: end_session can be retried


def test_fallback_mode_uses_local_parts_and_counts_failures():
    with FakeOpenAI([content("not json"), status(400)]) as srv:
        m = CAIM(llm=_client(srv))  # on_llm_error="fallback" (default)
        m.add_session("u", D, TURNS)  # thinker: malformed -> local thinker
        assert m.thoughts("u") and all(t.source_turn_ids for t in m.thoughts("u"))
        assert not m.retrieve("u", "Tell me a joke.", TODAY).retrieved  # controller: HTTP 400 -> rules say no
        assert m.llm_failures == 2
