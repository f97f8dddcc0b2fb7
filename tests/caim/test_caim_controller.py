"""The memory controller retrieves for recall questions, for requests whose answer depends on the user's tastes, and
for messages near a stored memory; it declines for greetings, thanks and chit-chat with no memory nearby."""
from datetime import date

import pytest

from boundmem.caim.controller import GatedController, RuleController, is_small_talk, open_request

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
    # what the user did with someone, or is doing now (declined before: no "I"/"my", no stored thought near enough)
    "Which movie did we argue about?",
    "What was the name of the place we ate at?",
    "Which friend was with me at the film?",
    "What instrument am I learning?",
    "Who teaches me?",
]
# requests for recommendations / advice / plans: a stored preference could change the answer
REQUESTS = [
    "Can you recommend a good science fiction book?",
    "can you suggest a dinner spot?",
    "What should I cook tonight?",
    "Any ideas for a weekend trip?",
    "Help me choose a new pair of running shoes.",
    "I'm planning a holiday in June, where should we go?",
    "Which laptop would you pick for me?",
    "I need a gift for my sister.",
    "what to watch tonight",
    "Book a table for two on Friday.",
    "What could I cook with leftover rice?",
    "Which jacket would suit me for a wedding?",
    "put on some music for the party",
    "It's my mum's birthday next week, find me something she would like.",
]
CHITCHAT = [
    "Hello, how are you today?",
    "What is the capital of France?",
    "Tell me a joke.",
    "The weather is nice today, I went for a walk.",
    "Do you like swimming?",
    "Who wrote the theory of relativity?",
    "How are we doing today?",
    "Who won the match?",
    "What happened in 1066?",
]
SMALL_TALK = ["thanks!", "Thank you for your advice.", "Hi there!", "ok, bye", "Good morning! How are you?"]


@pytest.mark.parametrize("q", RECALL)
def test_recall_turns_need_memory(q):
    assert RuleController().needs_memory(q, today=TODAY), q


@pytest.mark.parametrize("q", REQUESTS)
def test_recommendation_requests_need_memory(q):
    c = RuleController()
    assert c.needs_memory(q, today=TODAY), q
    # and the gate retrieves for them even when no stored memory is near
    assert GatedController(c, near=0.99).decide(q, (), TODAY, nearest=0.0)[0], q


@pytest.mark.parametrize("q", CHITCHAT)
def test_chit_chat_alone_does_not(q):
    c = RuleController()
    assert not c.needs_memory(q, today=TODAY), (q, c.reason(q, TODAY))
    assert not GatedController(c, near=0.4).decide(q, (), TODAY, nearest=0.2)[0]


@pytest.mark.parametrize("q", CHITCHAT[1:])
def test_a_query_near_a_stored_memory_retrieves(q):
    ok, why = GatedController(RuleController(), near=0.4).decide(q, (), TODAY, nearest=0.55)
    assert ok and "close to a stored memory" in why


@pytest.mark.parametrize("q", SMALL_TALK)
def test_thanks_and_greetings_decline_even_near_memory(q):
    assert is_small_talk(q)
    ok, why = GatedController(RuleController(), near=0.4).decide(q, (), TODAY, nearest=0.9)
    assert not ok and why == "small talk"


def test_small_talk_with_a_request_is_not_small_talk():
    assert not is_small_talk("Thanks! Can you suggest a dinner spot?")
    assert GatedController(RuleController(), near=0.99).decide("Thanks! Can you suggest a dinner spot?",
                                                               (), TODAY, nearest=0.0)[0]


def test_requests_skip_the_cutoff_recall_questions_keep_it():
    assert open_request("can you suggest a dinner spot?", TODAY)
    assert open_request("What should I get as a gift for my girlfriend?", TODAY)
    assert not open_request("What painters did you recommend to me?", TODAY)  # recall of a past recommendation
    assert not open_request("thanks!", TODAY) and not open_request("What is the capital of France?", TODAY)
