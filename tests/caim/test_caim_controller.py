"""The local memory controller retrieves for recall questions and stays quiet for small talk."""
from datetime import date

import pytest

from boundmem.caim.controller import RuleController

TODAY = date(2023, 5, 7)

RECALL = [
    "Do you remember what we talked about during our first conversation?",
    "What painters did you recommend to me?",
    "On April 27th, how long did I run in the park?",
    "What type of music do I like to listen to?",
    "I don't like playing badminton or running, right?",
    "You once recommended a few cooking shows to me. What were their names?",
    "I have a badminton group. How many people are there in it?",
    "What did I cook yesterday?",
    "Last time you told me about a meditation app, which one was it?",
]
CHITCHAT = [
    "Hello, how are you today?",
    "What is the capital of France?",
    "Can you recommend a good science fiction book?",
    "Tell me a joke.",
    "The weather is nice today, I went for a walk.",
    "Thank you for your advice.",
    "Do you like swimming?",
    "Okay, I will try making some of the dishes you recommended!",
]


@pytest.mark.parametrize("q", RECALL)
def test_recall_turns_need_memory(q):
    assert RuleController().needs_memory(q, today=TODAY), q


@pytest.mark.parametrize("q", CHITCHAT)
def test_chit_chat_does_not(q):
    c = RuleController()
    assert not c.needs_memory(q, today=TODAY), (q, c.reason(q, TODAY))
