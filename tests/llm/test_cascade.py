"""The cascade (`local+llm`) over the scripted server: the local proposal is kept, rejected, flipped or re-worded by
a tiny JSON verdict; a correction is validated against the user's words / the listed items; anything invalid after the
retry, and any failed call, leaves the local decision."""
from __future__ import annotations

import json

import pytest

from boundmem.config import Settings
from boundmem.extract.base import Extraction
from boundmem.extract.cascade import ATTITUDE_SCHEMA, FLIP_SCHEMA, VERDICT_NAME, CascadeExtractor
from boundmem.extract.registry import EXTRACTORS, make_extractor, uses_llm
from boundmem.models import Candidate, Conversation, Turn
from boundmem.schema.model import CategoryPath

from .fake_openai import content, status

GENRES = CategoryPath(main="entertainment_and_media", sub="music", detail="favorite_genres")
PAY = CategoryPath(main="points_of_interest", sub="restaurant", detail="preferred_payment_method")
SAID = "No, I can't stand country music, I always listen to jazz."
CONV = Conversation(id="c1", turns=(Turn(role="user", text="Play something."),
                                    Turn(role="assistant", text="How about some country?"),
                                    Turn(role="user", text=SAID)))
COUNTRY = Candidate(path=GENRES, attribute="country", sentence=SAID, polarity="like", span="country",
                    cue="can't stand")


class Proposer:
    """A local path that proposes fixed candidates (the cascade takes any extractor)."""

    def __init__(self, *cands: Candidate):
        self.cands = list(cands)
        self.calls = 0

    def extract(self, conversation, schema):  # noqa: ARG002
        self.calls += 1
        return Extraction(candidates=self.cands)


def verdict(v: str, span=None, **extra) -> object:
    """The flip form's answer."""
    return content(json.dumps({"verdict": v, "span": span, **extra}), prompt_tokens=180, completion_tokens=12)


def attitude(v: str, att: str, span=None, **extra) -> object:
    """The attitude form's answer (the default)."""
    return content(json.dumps({"verdict": v, "attitude": att, "span": span, **extra}), prompt_tokens=180,
                   completion_tokens=14)


def run(fake, make_client, schema, *replies, cands=(COUNTRY,), conv=CONV, ask="flip"):
    fake.push(*replies)
    cx = CascadeExtractor(Proposer(*cands), make_client(max_retries=0), ask=ask)
    return cx, cx.extract(conv, schema).candidates


def test_attitude_form_never_shows_the_local_polarity(fake, make_client, schema):
    """The model says how the user feels about the value; it is not shown the local reading's polarity (the
    1.5B model asked whether to flip a shown "dislikes it" flipped right dislikes), and its answer is the polarity."""
    fake.push(attitude("keep", "dislikes"), attitude("keep", "likes"))
    cx = CascadeExtractor(Proposer(COUNTRY, COUNTRY.model_copy(update={"attribute": "jazz", "span": "jazz"})),
                          make_client(max_retries=0), ask="attitude")
    out = cx.extract(CONV, schema).candidates
    assert [(c.attribute, c.polarity) for c in out] == [("country", "dislike"), ("jazz", "like")]
    req = fake.requests[0].json
    assert req["response_format"]["json_schema"]["schema"] == ATTITUDE_SCHEMA
    human = req["messages"][1]["content"]
    assert 'Music > Favorite Genres = "country" (a lasting preference)' in human and "likes it" not in human
    assert cx.stats.flipped == 1 and cx.stats.kept == 1


def test_attitude_form_reject_and_invalid_attitude(fake, make_client, schema):
    cx, out = run(fake, make_client, schema, attitude("reject", "likes"), ask="attitude")
    assert out == [] and cx.stats.rejected == 1
    cx, out = run(fake, make_client, schema, attitude("keep", "loves"), verdict("flip"), ask="attitude")
    assert out == [COUNTRY] and cx.stats.kept_on_error == 1       # 'flip' is not a verdict of this form
    assert "attitude must be likes, dislikes or indifferent" in fake.requests[-1].json["messages"][3]["content"]


def test_attitude_form_span_is_validated(fake, make_client, schema):
    cx, out = run(fake, make_client, schema, attitude("keep", "dislikes", "bluegrass"),
                  attitude("keep", "dislikes", "country music"), ask="attitude")
    assert [(c.attribute, c.polarity) for c in out] == [("country music", "dislike")]
    assert "does not occur in what the user said" in fake.requests[1].json["messages"][3]["content"]


def test_unknown_question_form():
    from boundmem.errors import ConfigError

    with pytest.raises(ConfigError, match="cascade question"):
        CascadeExtractor(Proposer(), client=None, ask="vote")  # type: ignore[arg-type]


def test_keep_returns_the_proposal_and_asks_a_short_constrained_question(fake, make_client, schema):
    cx, out = run(fake, make_client, schema, verdict("keep"))
    assert out == [COUNTRY]
    req = fake.requests[0].json
    assert "tools" not in req and req["max_tokens"] == 40
    assert req["response_format"] == {"type": "json_schema", "json_schema": {
        "name": VERDICT_NAME, "schema": FLIP_SCHEMA, "strict": True}}
    system, human = (m["content"] for m in req["messages"])
    assert 'Assistant said: "How about some country?"' in human and f'User said: "{SAID}"' in human
    assert 'Music > Favorite Genres = "country", likes it (a lasting preference)' in human
    assert len(system) + len(human) < 1200   # ~4 characters a token: well under the 300-token target
    assert cx.stats.kept == 1 and cx.stats.proposals == 1


def test_reject_drops_the_proposal(fake, make_client, schema):
    cx, out = run(fake, make_client, schema, verdict("reject"))
    assert out == [] and cx.stats.rejected == 1


def test_flip_turns_the_polarity(fake, make_client, schema):
    cx, out = run(fake, make_client, schema, verdict("flip"))
    assert [(c.attribute, c.polarity) for c in out] == [("country", "dislike")] and cx.stats.flipped == 1


def test_span_correction_from_the_users_words(fake, make_client, schema):
    jazz = COUNTRY.model_copy(update={"attribute": "music", "span": "music"})
    cx, out = run(fake, make_client, schema, verdict("keep", "jazz"), cands=(jazz,))
    assert [(c.attribute, c.span, c.polarity) for c in out] == [("jazz", "jazz", "like")] and cx.stats.respanned == 1


def test_fabricated_span_is_retried_with_the_error_then_the_local_decision_stands(fake, make_client, schema):
    cx, out = run(fake, make_client, schema, verdict("keep", "bluegrass"), verdict("flip", "bluegrass"))
    assert out == [COUNTRY]        # never the made-up value, and not the unvalidated flip either
    retry = fake.requests[1].json["messages"]
    assert retry[2]["role"] == "assistant" and "bluegrass" in retry[2]["content"]
    assert "does not occur in what the user said" in retry[3]["content"]
    assert cx.stats.kept_on_error == 1 and cx.stats.retries == 1


def test_fabricated_span_then_a_valid_answer(fake, make_client, schema):
    cx, out = run(fake, make_client, schema, verdict("keep", "bluegrass"), verdict("flip"))
    assert [(c.attribute, c.polarity) for c in out] == [("country", "dislike")]


def test_closed_category_correction_must_be_a_listed_item(fake, make_client, schema):
    said = "I always pay with my card."
    conv = Conversation(id="c2", turns=(Turn(role="user", text=said),))
    cash = Candidate(path=PAY, attribute="Cash", sentence=said, span="Cash")
    cx, out = run(fake, make_client, schema, verdict("keep", "my card"), verdict("keep", "card"), cands=(cash,),
                  conv=conv)
    assert "not one of the listed values" in fake.requests[1].json["messages"][3]["content"]
    assert [c.attribute for c in out] == ["Card"]      # the listed spelling
    assert "The value must be one of: Cash | Card." in fake.requests[0].json["messages"][1]["content"]


@pytest.mark.parametrize("replies", [
    (content("not json at all"), content("{\"verdict\": ")),                       # not JSON, twice
    (content("[1, 2]"), verdict("maybe")),                                          # not an object, not a verdict
    (verdict("keep", 7), verdict("keep", ["jazz"])),                                # span not a string
])
def test_malformed_answers_keep_the_local_decision(fake, make_client, schema, replies):
    cx, out = run(fake, make_client, schema, *replies)
    assert out == [COUNTRY] and cx.stats.kept_on_error == 1 and len(fake.requests) == 2


def test_a_failed_call_keeps_the_local_decision_without_retrying_the_verdict(fake, make_client, schema):
    cx, out = run(fake, make_client, schema, status(400, "bad request"))
    assert out == [COUNTRY] and cx.stats.kept_on_error == 1 and len(fake.requests) == 1


def test_the_llm_never_adds_a_category(fake, make_client, schema):
    """The answer has no category field; an extra one is ignored, and only proposed categories come out."""
    cx, out = run(fake, make_client, schema, verdict("keep", category="Restaurant > Preferred Payment method",
                                                     preferences=[{"category": "Restaurant > Dietary Preferences"}]))
    assert [c.path for c in out] == [GENRES]


def test_nothing_proposed_sends_nothing(fake, make_client, schema):
    cx, out = run(fake, make_client, schema, cands=())
    assert out == [] and fake.requests == []


def test_llama_cpp_python_form_is_used_after_it_rejects_json_schema(fake, make_client, schema):
    """llama-cpp-python's server takes {"type": "json_object", "schema": ...} and answers json_schema with a 500
    naming response_format: asked again that way, and that way from then on."""
    two = (COUNTRY, COUNTRY.model_copy(update={"attribute": "jazz", "span": "jazz"}))
    err = status(500, "1 validation error: body.response_format.type Input should be 'text' or 'json_object'")
    cx, out = run(fake, make_client, schema, err, verdict("keep"), verdict("keep"), cands=two)
    forms = [r.json["response_format"]["type"] for r in fake.requests]
    assert forms == ["json_schema", "json_object", "json_object"]
    assert fake.requests[1].json["response_format"]["schema"] == FLIP_SCHEMA
    assert [c.attribute for c in out] == ["country", "jazz"]


def test_usage_log_names_the_verdict(fake, make_client, schema, tmp_path):
    log = tmp_path / "usage.jsonl"
    fake.push(verdict("keep"))
    CascadeExtractor(Proposer(COUNTRY), make_client(usage_log=str(log)), ask="flip").extract(CONV, schema)
    line = json.loads(log.read_text().splitlines()[0])
    assert line["tool"] == VERDICT_NAME and line["prompt_tokens"] == 180 and line["outcome"] == "ok"
    assert "_boundmem_log_name" not in fake.requests[0].json


def test_registered_as_local_plus_llm():
    assert "local+llm" in EXTRACTORS.choices()
    assert Settings().llm.cascade_ask == "flip"
    assert Settings.from_env({"BOUNDMEM_LLM_CASCADE_ASK": "attitude"}).llm.cascade_ask == "attitude"
    s = Settings.from_env({"BOUNDMEM_LLM_CASCADE_ASK": "attitude", "BOUNDMEM_LLM_BASE_URL": "http://127.0.0.1:9/v1",
                           "BOUNDMEM_LLM_MODEL": "m"})
    from boundmem.embed.registry import make_embedder

    assert make_extractor("local+llm", s, embedder=make_embedder("hash", Settings())).ask == "attitude"
    assert uses_llm("local+llm") and uses_llm("llm") and not uses_llm("local")
    # building it needs the endpoint's settings like the plain LLM path (no key for OpenAI: a ConfigError)
    from boundmem.errors import ConfigError

    with pytest.raises(ConfigError):
        make_extractor("local+llm", Settings(), embedder=None)
