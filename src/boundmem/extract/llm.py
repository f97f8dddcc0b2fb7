"""CarMem's extractor: the user's (already pruned) schema as one forced tool call, validated by pydantic.

The prompts paraphrase the paper's (docs: carmem-protocol.md section 4): extracting nothing is the
default; only lasting preferences the user said or confirmed; only what fits a category. The schema the
model sees is the pruned one, so an opted-out category is not even offered, and anything the model puts
outside it fails validation (extra fields are forbidden) instead of being stored.
"""
from __future__ import annotations

import json
from typing import Any, Optional

from pydantic import BaseModel, Field, ValidationError

from ..conversation import render
from ..llm.client import LLMClient
from ..llm.errors import LLMOutputError
from ..models import Candidate, Conversation
from ..schema.model import Schema
from ..schema.tool import TOOL_NAME, flatten, output_model, tool_definition
from .base import ExtractionError

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

RETRY_PROMPT = """

Errors from previous try:
Your previous output was invalid. Possible causes: a category level was skipped, a key that does not exist \
was used, a subcategory was put under the wrong main category, or a value has the wrong type.
Previous output:
{previous}
Error:
{error}
Correct it and call the function again."""


class ExtractionRun(BaseModel):
    """One extraction with its bookkeeping; `valid_at_try` is 1, 2, or None (never valid), as in the paper."""

    candidates: list[Candidate] = Field(default_factory=list)
    valid_at_try: Optional[int] = None
    errors: list[str] = Field(default_factory=list)


def describe_validation_error(e: ValidationError, limit: int = 20) -> str:
    """One line per problem, naming the field path, so both a person and the model can act on it."""
    lines = []
    for err in e.errors()[:limit]:
        loc = ".".join(str(x) for x in err.get("loc", ())) or "(top level)"
        try:
            got = json.dumps(err.get("input"), ensure_ascii=False)
        except (TypeError, ValueError):
            got = repr(err.get("input"))
        lines.append(f"{loc}: {err.get('msg')} (got {got[:80]})")
    more = e.error_count() - limit
    return "\n".join(lines + ([f"... and {more} more"] if more > 0 else []))


class LLMExtractor:
    """Extractor over any OpenAI-compatible endpoint.

    `last_valid_at_try` (1, 2 or None) and `last_run` describe the most recent call, for the benchmark.
    They are per instance: give each worker thread its own extractor if you need them exact.
    """

    def __init__(self, client: LLMClient, user_label: str = "User"):
        self.client = client
        self.user_label = user_label
        self.last_valid_at_try: Optional[int] = None
        self.last_run: Optional[ExtractionRun] = None
        self._cache: dict[Schema, tuple[type[BaseModel], dict]] = {}

    @classmethod
    def from_env(cls, user_label: str = "User", **client_overrides: Any) -> "LLMExtractor":
        return cls(LLMClient.from_env(**client_overrides), user_label=user_label)

    def _compiled(self, schema: Schema) -> tuple[type[BaseModel], dict]:
        # building the model and its JSON schema takes ~50 ms for the in-car schema; users share few schemas
        hit = self._cache.get(schema)
        if hit is None:
            if len(self._cache) >= 64:
                self._cache.clear()
            hit = self._cache[schema] = (output_model(schema), tool_definition(schema))
        return hit

    def messages(self, conversation: Conversation) -> list[dict[str, str]]:
        system = SYSTEM_PROMPT.format(user_label=self.user_label, tool=TOOL_NAME)
        human = HUMAN_PROMPT.format(user_label=self.user_label, conversation=render(conversation, self.user_label))
        return [{"role": "system", "content": system}, {"role": "user", "content": human}]

    def run(self, conversation: Conversation, schema: Schema) -> ExtractionRun:
        """Extract with one retry on invalid output; raises ExtractionError if the retry is invalid too."""
        if next(schema.details(), None) is None:
            # every category opted out: nothing may be extracted, so the model is not asked
            return self._done(ExtractionRun(valid_at_try=1))
        model, tool = self._compiled(schema)
        msgs = self.messages(conversation)
        errors: list[str] = []
        for attempt in (1, 2):
            previous, error = "", ""
            try:
                args = self.client.call_tool(msgs, tool)
            except LLMOutputError as e:
                previous, error = e.raw, str(e)
            else:
                try:
                    out = model.model_validate(args)
                except ValidationError as e:
                    previous, error = json.dumps(args, ensure_ascii=False), describe_validation_error(e)
                else:
                    return self._done(ExtractionRun(candidates=self._candidates(schema, out),
                                                    valid_at_try=attempt, errors=errors))
            errors.append(error)
            msgs = [{"role": "system", "content": msgs[0]["content"] + RETRY_PROMPT.format(
                previous=previous[:4000] or "(nothing)", error=error)}] + msgs[1:]
        self._done(ExtractionRun(valid_at_try=None, errors=errors))
        raise ExtractionError(f"LLM output for conversation {conversation.id!r} was invalid twice "
                              f"(model {self.client.model!r}); nothing extracted. Last error: {errors[-1]}")

    def extract(self, conversation: Conversation, schema: Schema) -> list[Candidate]:
        return self.run(conversation, schema).candidates

    def _done(self, run: ExtractionRun) -> ExtractionRun:
        self.last_run, self.last_valid_at_try = run, run.valid_at_try
        return run

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
