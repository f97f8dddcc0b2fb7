"""CarMem's extractor: the user's (already pruned) schema as one forced tool call, validated by pydantic.

The prompts paraphrase the paper's (docs: carmem-protocol.md section 4): extracting nothing is the
default; only lasting preferences the user said or confirmed; only what fits a category. The schema the
model sees is the pruned one, so an opted-out category is not even offered, and anything the model puts
outside it fails validation (extra fields are forbidden) instead of being stored.

Two tool shapes (`shape=`, env BOUNDMEM_LLM_TOOL_SHAPE):
- `flat` (default): a list of {sentence, category, value, polarity} items, the category an enum of the
  user's allowed detail categories (`boundmem.llm.flat`); ~1.5k prompt tokens for the in-car schema, and
  small local models (Qwen2.5 0.5B/1.5B) fill it;
- `nested`: the paper's main > sub > detail object (`boundmem.schema.tool`), ~6.6k prompt tokens.
Two profiles (`profile=`, env BOUNDMEM_LLM_PROFILE), flat shape only for `small`:
- `paper` (default): the forced tool call and a worked example built from the user's schema;
- `small`, for 0.5B-1.5B models on a CPU: the worked example is outside any schema's domain (a "Pets" category
  the enum cannot produce, so a model that copies it is stopped by the grammar instead of storing the example's
  values, which is what the 0.5B model did with the paper profile); the answer is constrained to the JSON schema
  by `response_format` rather than asked for as a tool call, so the chat template does not write the schema into
  the prompt a second time beside the category guide; two example values per category; no field descriptions.
Both put everything that depends only on the schema first (system prompt, tool) and the conversation last,
so a server's prompt cache covers the prefix. A retry appends the model's previous answer and the
validation error after the conversation instead of editing the system prompt, so it hits the cache too.

No silent loss: an answer that is invalid twice raises ExtractionError (nothing is stored), is counted in
`stats`, and names the conversation, the model and the last error.
"""
from __future__ import annotations

import json
from typing import Any, Optional

from pydantic import BaseModel, ValidationError

from ..conversation import render
from ..errors import ConfigError
from ..llm.client import LLMClient
from ..llm.errors import LLMError, LLMOutputError
from ..llm.flat import FlatSchema, as_data, compile_flat, describe_item_error, example_block, listed_item
from ..models import Candidate, Conversation
from ..schema.model import Schema
from ..schema.tool import TOOL_NAME, flatten, output_model, tool_definition
from .base import Extraction, ExtractionError, StatsCounter

SHAPES = ("flat", "nested")

FLAT_SYSTEM_PROMPT = """\
You save a user's lasting preferences: what will still hold after this conversation is over. The default is \
to save nothing.
- Only what the user labelled "{user_label}" said or confirmed; never the assistant's suggestions or questions.
- evidence "stated": a lasting preference said as such ("I always...", "I prefer...", "I love...", "I can't \
stand..."). evidence "observed": a one-off choice that names a value ("play some rock", "set it to 21 degrees"). \
Nothing for a request that names no value ("take me to the station"), nothing for other people's tastes.
- Only the categories listed below. If a preference fits none of them, leave it out; never bend it into another \
category.
- value: for a category with "one of:", exactly one of its items; for any other category, the user's own \
words for it, copied from what they said (never a value they did not say). polarity: "dislike" if the user rejects or \
avoids it, "indifferent" if they say they do not mind it, else "like" (the value itself never negated: "jazz", \
not "not jazz"). sentence: the user's sentence, verbatim.
Categories:
{guide}
{examples}
{answer}"""

FLAT_ANSWER = 'Call {tool} with {{"preferences": [...]}}; [] when there is nothing to save.'
SMALL_ANSWER = 'Answer with {"preferences": [...]}; [] when there is nothing to save.'
# outside every schema's domain: a model that copies it produces a category the enum does not allow
SMALL_EXAMPLE = ('Example (another domain): "I can\'t stand cats." -> {"preferences": [{"sentence": "I can\'t stand '
                 'cats.", "category": "Pets > Animals", "value": "cats", "polarity": "dislike", "evidence": "stated"}]}\n'
                 'Example: "Take me home." -> {"preferences": []}')
PROFILES = ("paper", "small")

FLAT_HUMAN_PROMPT = """\
Conversation:
===
{conversation}
===
Save the lasting preferences of {user_label}."""

SYSTEM_PROMPT = """\
You are an expert at extracting a user's long-term preferences: preferences that will still hold after \
this conversation is over. The default is to extract nothing.
- Extract only from the user labelled "{user_label}", and only preferences that fit the parameters of the \
function {tool}. Follow its format strictly.
- Users may switch categories off for privacy, so extract a preference only if it fits a category's \
description neatly. Never reinterpret a preference into another category or topic.
- Leave out every category that has nothing to extract. If nothing fits, call the function with an empty \
object {{}}.
- Do not extract temporary wishes (what the user wants right now, for this trip, today). Extracting nothing \
is better than extracting a temporary wish.
- For each preference give `user_preference` (the value, short; use the category's example values when \
one fits) and `user_sentence_preference_revealed` (the user's own sentence that reveals it, verbatim)."""

HUMAN_PROMPT = """\
Extract the long-term preferences of {user_label} from this conversation:
===
{conversation}
===
Only preferences that {user_label} stated or confirmed count. Never take a preference from the assistant's \
text, suggestions or assumptions."""

RETRY_PROMPT = """\
Errors from previous try: your previous output was invalid.
Previous output:
{previous}
Error:
{error}
Correct it and {again}."""


def user_text(conversation: Conversation) -> str:
    """What the user said: the only words an open category's value may come from."""
    return "\n".join(t.text for t in conversation.turns if t.role == "user")


class ExtractionStats(BaseModel):
    """Counts over an extractor's life: every run ends in exactly one of first_try, after_retry, invalid, failed.
    Updated under the extractor's lock, so threads sharing one extractor add up exactly."""

    runs: int = 0
    first_try: int = 0
    after_retry: int = 0
    invalid: int = 0         # invalid twice: nothing stored, ExtractionError raised
    failed: int = 0          # transport errors (timeouts, HTTP): nothing stored, LLMError raised
    empty: int = 0           # valid answers with nothing to save
    candidates: int = 0


def describe_validation_error(e: ValidationError, limit: int = 20) -> str:
    """One line per problem, naming the field path, so both a person and the model can act on it."""
    lines = []
    for err in e.errors()[:limit]:
        loc = ".".join(str(x) for x in err.get("loc", ())) or "(top level)"
        try:
            got = json.dumps(err.get("input"), ensure_ascii=False)
        except (TypeError, ValueError):
            got = repr(err.get("input"))
        msg = str(err.get("msg"))
        if err.get("type") == "literal_error" and len(msg) > 160:  # an enum of 40 labels: the prompt lists them
            msg = "not one of the allowed categories listed in the instructions"
        lines.append(f"{loc}: {msg} (got {got[:80]})")
    more = e.error_count() - limit
    return "\n".join(lines + ([f"... and {more} more"] if more > 0 else []))


class LLMExtractor(StatsCounter):
    """Extractor over any OpenAI-compatible endpoint.

    Each call's own outcome (try, errors) comes back in its `Extraction`; `stats` counts all calls, thread-safely.
    `max_tokens` bounds each answer (a small model under a grammar can otherwise repeat items until the context
    is full); None leaves it to the client (BOUNDMEM_LLM_MAX_TOKENS) or the server.
    """

    def __init__(self, client: LLMClient, user_label: str = "User", shape: str = "flat",
                 max_tokens: Optional[int] = None, profile: str = "paper"):
        if shape not in SHAPES:
            raise ConfigError(f"unknown tool shape {shape!r} (BOUNDMEM_LLM_TOOL_SHAPE; choose {', '.join(SHAPES)})")
        if profile not in PROFILES:
            raise ConfigError(f"unknown LLM profile {profile!r} (BOUNDMEM_LLM_PROFILE; choose {', '.join(PROFILES)})")
        if profile == "small" and shape != "flat":
            raise ConfigError("BOUNDMEM_LLM_PROFILE=small needs the flat tool shape (BOUNDMEM_LLM_TOOL_SHAPE=flat): "
                              "the nested one is ~6.6k prompt tokens")
        self.profile = profile
        self.client = client
        self.user_label = user_label
        self.shape = shape
        self.max_tokens = max_tokens
        StatsCounter.__init__(self, ExtractionStats())
        self._cache: dict[Schema, Any] = {}

    def _compiled(self, schema: Schema):
        # building the model and its JSON schema takes ~50 ms for the in-car schema; users share few schemas
        hit = self._cache.get(schema)
        if hit is None:
            if len(self._cache) >= 64:
                self._cache.clear()
            hit = self._cache[schema] = (compile_flat(schema, brief=self.profile == "small") if self.shape == "flat"
                                         else (output_model(schema), tool_definition(schema)))
        return hit

    def tool(self, schema: Schema) -> dict:
        """The tool JSON the model is forced to call for this (pruned) schema."""
        c = self._compiled(schema)
        return c.tool if self.shape == "flat" else c[1]

    def messages(self, conversation: Conversation, schema: Optional[Schema] = None) -> list[dict[str, str]]:
        """[system, user]: the system message depends only on the schema (cacheable), the conversation comes last."""
        conv = render(conversation, self.user_label)
        if self.shape == "flat":
            if schema is None:
                raise ValueError("the flat shape's system prompt lists the schema's categories: pass the schema")
            flat: FlatSchema = self._compiled(schema)
            small = self.profile == "small"
            system = FLAT_SYSTEM_PROMPT.format(user_label=self.user_label, guide=flat.guide,
                                               examples=SMALL_EXAMPLE if small else example_block(flat),
                                               answer=SMALL_ANSWER if small else FLAT_ANSWER.format(tool=TOOL_NAME))
            human = FLAT_HUMAN_PROMPT.format(user_label=self.user_label, conversation=conv)
        else:
            system = SYSTEM_PROMPT.format(user_label=self.user_label, tool=TOOL_NAME)
            human = HUMAN_PROMPT.format(user_label=self.user_label, conversation=conv)
        return [{"role": "system", "content": system}, {"role": "user", "content": human}]

    def extract(self, conversation: Conversation, schema: Schema) -> Extraction:
        """Extract with one retry on invalid output; raises ExtractionError if the retry is invalid too."""
        if next(schema.details(), None) is None:
            # every category opted out: nothing may be extracted, so the model is not asked
            self._count(runs=1, first_try=1, empty=1)
            return Extraction()
        compiled = self._compiled(schema)
        tool = self.tool(schema)
        msgs = self.messages(conversation, schema)
        errors: list[str] = []
        extra = {"max_tokens": self.max_tokens} if self.max_tokens else {}
        for attempt in (1, 2):
            previous, error = "", ""
            try:
                args = (self.client.complete_schema(msgs, tool["function"]["parameters"], TOOL_NAME, **extra)
                        if self.profile == "small" else self.client.call_tool(msgs, tool, **extra))
            except LLMOutputError as e:
                previous, error = e.raw, str(e)
            except LLMError:
                self._count(runs=1, failed=1)
                raise
            else:
                try:
                    out = (compiled.model if self.shape == "flat" else compiled[0]).model_validate(
                        args, context={"user_text": user_text(conversation)})
                except ValidationError as e:
                    previous, error = json.dumps(args, ensure_ascii=False), describe_validation_error(e)
                    hint = describe_item_error(args, compiled) if self.shape == "flat" else None
                    if hint:
                        error += "\n" + hint
                else:
                    cands = self._flat_candidates(compiled, out) if self.shape == "flat" else self._candidates(schema, out)
                    self._count(runs=1, first_try=int(attempt == 1), after_retry=int(attempt == 2), empty=int(not cands),
                                candidates=len(cands))
                    return Extraction(candidates=cands, valid_at_try=attempt, errors=errors)
            errors.append(error)
            msgs = msgs[:2] + [{"role": "assistant", "content": previous[:4000] or "(nothing)"},
                               {"role": "user", "content": RETRY_PROMPT.format(
                                   previous=previous[:4000] or "(nothing)", error=error,
                                   again="answer again" if self.profile == "small" else f"call {TOOL_NAME} again")}]
        self._count(runs=1, invalid=1)
        raise ExtractionError(f"LLM output for conversation {conversation.id!r} was invalid twice "
                              f"(model {self.client.model!r}); nothing extracted. Last error: {errors[-1]}")

    @staticmethod
    def _flat_candidates(flat: FlatSchema, out: BaseModel) -> list[Candidate]:
        found: dict[tuple[str, str], Candidate] = {}
        for item in out.preferences:
            path, detail = flat.paths[item.category], flat.details[item.category]  # the enum: always inside the schema
            attribute, polarity = as_data(item.value, item.polarity, detail)
            if detail.value_kind == "closed" and detail.attributes:
                attribute = listed_item(attribute, detail) or attribute   # validated: the listed spelling
            key = (str(path), attribute.casefold(), polarity)
            if key not in found:
                found[key] = Candidate(path=path, attribute=attribute, sentence=item.sentence.strip(), polarity=polarity,
                                       evidence=item.evidence, span=item.value.strip(),
                                       cue="one-off choice" if item.evidence == "observed" else "")
        return list(found.values())

    @staticmethod
    def _candidates(schema: Schema, out: BaseModel) -> list[Candidate]:
        found: dict[tuple[str, str], Candidate] = {}
        for path, item in flatten(schema, out):  # flatten walks the schema, so every path is inside it
            attribute = (item.user_preference or "").strip()
            if not attribute:  # a sentence without a value cannot be stored or compared
                continue
            key = (str(path), attribute.casefold())
            if key not in found:
                found[key] = Candidate(path=path, attribute=attribute,
                                       sentence=(item.user_sentence_preference_revealed or "").strip())
        return list(found.values())
