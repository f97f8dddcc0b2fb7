"""What add / submit / HTTP / the client accept as a conversation: LLM SDK messages, a string, a Conversation;
anything else an InputError naming what was expected (never an AttributeError from inside extraction)."""
from __future__ import annotations

import pytest

from boundmem import Conversation, InputError, Turn
from boundmem.messages import to_conversation

OPENAI = [
    {"role": "system", "content": "You are a car assistant."},
    {"role": "user", "content": "I always go for Italian food."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "t1", "type": "function"}]},
    {"role": "tool", "content": "{\"ok\": true}", "tool_call_id": "t1"},
    {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
    {"role": "user", "content": [{"type": "text", "text": "And keep it"}, {"type": "image_url", "image_url": {}},
                                 {"type": "text", "text": "quiet."}]},
]


def test_sdk_messages_keep_only_user_and_assistant_words():
    c = to_conversation(OPENAI, "c7")
    assert c.id == "c7"
    assert [(t.role, t.text) for t in c.turns] == [("user", "I always go for Italian food."), ("assistant", "Noted."),
                                                   ("user", "And keep it quiet.")]


def test_a_string_is_one_user_turn_and_ids_are_generated_unique():
    a, b = to_conversation("I love jazz."), to_conversation("I love jazz.")
    assert a.turns == (Turn(role="user", text="I love jazz."),)
    assert a.id.startswith("conv-") and a.id != b.id


def test_a_conversation_and_its_json_pass_through():
    conv = Conversation(id="c1", turns=(Turn(role="user", text="hi"),))
    assert to_conversation(conv) is conv
    assert to_conversation({"id": "c2", "turns": [{"role": "user", "text": "hi"}]}).id == "c2"
    assert to_conversation({"messages": "hi"}, "c3").id == "c3"
    assert to_conversation({"role": "user", "content": "hi"}).turns[0].text == "hi"   # one message, as mem0 takes
    with pytest.raises(InputError, match="differs"):
        to_conversation(conv, "other")


@pytest.mark.parametrize("bad, words", [
    (42, "expected a Conversation, a string"),
    (None, "got NoneType"),
    ("   ", "empty string"),
    ([], "no user or assistant message"),
    ([{"role": "system", "content": "be nice"}], "no user or assistant message"),
    (["I like jazz"], r"messages\[0\]: expected a \{'role', 'content'\} message, got str"),
    ([{"content": "hi"}], r"messages\[0\]: .*without role"),
    ([{"role": "user", "content": "ok"}, {"role": "narrator", "content": "x"}], r"messages\[1\]\.role: unknown role 'narrator'"),
    ([{"role": "user", "content": 5}], r"messages\[0\]\.content: must be a string"),
    ([{"role": "user", "content": [3]}], r"messages\[0\]\.content\[0\]"),
    ({"id": "c", "turns": "hello"}, "turns"),
])
def test_anything_else_is_an_input_error_naming_the_problem(bad, words):
    with pytest.raises(InputError, match=words):
        to_conversation(bad)


def test_blank_conversation_id_is_refused():
    with pytest.raises(InputError, match="conversation_id"):
        to_conversation("hi", "  ")
