"""The cascade (`--extractor local+llm`): the local extractor proposes, a small LLM checks each proposal.

Why a cascade rather than the LLM alone: a 0.5B-1.5B model on a CPU reads a 1.5k-token extraction prompt in tens of
seconds and, asked to find preferences, copies, invents and misfiles them. Asked one narrow question about one
proposal it is cheaper and harder to get wrong, and the bound holds by construction:

- the local path decides which categories are candidates (span, cue, polarity, stated / observed come with each);
- the LLM sees one candidate at a time in a short prompt (the user's sentence, the assistant turn before it, the
  category, value, polarity and evidence; well under 300 prompt tokens) and answers a tiny JSON object, constrained
  to its schema where the server supports it (`LLMClient.complete_schema`). Two forms (`ask=`,
  BOUNDMEM_LLM_CASCADE_ASK): `flip` (default) {"verdict": "keep" | "reject" | "flip", "span": ...}, the local
  polarity shown; `attitude` {"verdict": "keep" | "reject", "attitude": "likes" | "dislikes" | "indifferent",
  "span": ...}, the local polarity not shown, so the model's attitude is the polarity. `flip` is the default
  because on the challenge sets' train split the 1.5B model broke fewer right readings with it (5 of 100 against
  11); neither form fixed one there;
- its answer can only keep, drop, flip the polarity of, or re-word the value of a proposal: it has no field for a
  category, so it never adds one the local path did not propose;
- a corrected span is validated like the plain LLM path's values: an open category's value must occur in the
  user's turns, a closed category's must be one of its listed items; an invalid answer is asked once more with the
  error.

When the LLM call fails (timeout, HTTP error) or its answer is still invalid after the retry, the local decision
stands for that candidate: the cascade is never worse off than the local path for lack of an answer, and such
candidates are counted in `stats.kept_on_error`.
"""
from __future__ import annotations

import json
from typing import Optional

from pydantic import BaseModel

from ..errors import ConfigError
from ..llm.client import LLMClient
from ..llm.errors import LLMError, LLMOutputError
from ..llm.flat import FlatSchema, as_data, compile_flat, listed_item, occurs
from ..models import Candidate, Conversation
from ..schema.model import Schema
from .base import Extraction, Extractor, StatsCounter
from .llm import user_text

VERDICT_NAME = "check_preference"
_SPAN = {"anyOf": [{"type": "string", "maxLength": 40}, {"type": "null"}]}
ATTITUDE_SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["keep", "reject"]},
                   "attitude": {"type": "string", "enum": ["likes", "dislikes", "indifferent"]},
                   "span": _SPAN},
    "required": ["verdict", "attitude", "span"],
    "additionalProperties": False,
}
FLIP_SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["keep", "reject", "flip"]}, "span": _SPAN},
    "required": ["verdict", "span"],
    "additionalProperties": False,
}
ASKS = ("attitude", "flip")
_ATTITUDE = {"likes": "like", "dislikes": "dislike", "indifferent": "indifferent"}
_FLIP = {"like": "dislike", "dislike": "like"}
_CONTEXT_CHARS = 200
_SENTENCE_CHARS = 300
_ITEMS = 12

SYSTEM_ATTITUDE = """\
You check one preference that was read from a user's words. Answer JSON {{"verdict": ..., "attitude": ..., "span": ...}}.
verdict "keep": the user said this about themselves. "reject": they did not ({reject}).
attitude: how the user feels about the value: "likes", "dislikes" (rejects it, avoids it, is over it) or \
"indifferent".
span: null when the value is right; else the right value, a few of the user's own words.
Example answers: {{"verdict": "keep", "attitude": "dislikes", "span": null}} \
{{"verdict": "reject", "attitude": "likes", "span": null}}"""
SYSTEM_FLIP = """\
You check one preference that was read from a user's words. Answer JSON {{"verdict": ..., "span": ...}}.
verdict "keep": the reading is right. "flip": right value, but the user's attitude is the opposite (likes \
instead of dislikes, or the reverse). "reject": the user did not say this about themselves ({reject}).
span: null when the value is right; else the right value, a few of the user's own words.
Example answers: {{"verdict": "keep", "span": null}} {{"verdict": "reject", "span": null}}"""
REJECT_STATED = "a one-off request, a question, someone else's taste, a suggestion only the assistant made, or not this category"
REJECT_OBSERVED = "no choice of theirs, a question, someone else's taste, or not this category"
HUMAN = """\
{context}User said: "{sentence}"
Read as: {category} = "{value}"{polarity} ({kind}).{items}"""
RETRY = """Your answer {previous} is invalid: {error}. Answer again."""


class CascadeStats(BaseModel):
    """Counts over the extractor's life (under its lock): every proposal ends in exactly one of kept, rejected,
    flipped, respanned (flipped and re-worded counts as respanned) or kept_on_error."""

    conversations: int = 0
    proposals: int = 0
    kept: int = 0
    rejected: int = 0
    flipped: int = 0
    respanned: int = 0
    kept_on_error: int = 0
    retries: int = 0


class CascadeExtractor(StatsCounter):
    """`local` proposes, `client` checks each proposal (see the module docstring for what it may change)."""

    def __init__(self, local: Extractor, client: LLMClient, max_tokens: int = 40, ask: str = "flip"):
        if ask not in ASKS:
            raise ConfigError(f"unknown cascade question {ask!r} (choose {', '.join(ASKS)})")
        self.ask = ask
        self.schema = ATTITUDE_SCHEMA if ask == "attitude" else FLIP_SCHEMA
        self.local = local
        self.client = client
        self.max_tokens = max_tokens
        StatsCounter.__init__(self, CascadeStats())
        self._flat: dict[Schema, FlatSchema] = {}

    def warm(self, schema: Schema) -> None:
        warm = getattr(self.local, "warm", None)
        if warm is not None:
            warm(schema)

    def _compiled(self, schema: Schema) -> FlatSchema:
        hit = self._flat.get(schema)
        if hit is None:
            if len(self._flat) >= 64:
                self._flat.clear()
            hit = self._flat[schema] = compile_flat(schema, brief=True)
        return hit

    def extract(self, conversation: Conversation, schema: Schema) -> Extraction:
        proposed = self.local.extract(conversation, schema).candidates
        self._count(conversations=1, proposals=len(proposed))
        if not proposed:
            return Extraction()
        flat = self._compiled(schema)
        labels = {str(p): lab for lab, p in flat.paths.items()}
        said = user_text(conversation)
        out: list[Candidate] = []
        seen: set[tuple[str, str, str]] = set()
        for cand in proposed:
            label = labels.get(str(cand.path))
            checked = cand if label is None else self.check(conversation, cand, label, flat, said)
            if checked is None:
                continue
            key = (str(checked.path), checked.attribute.casefold(), checked.polarity)
            if key not in seen:
                seen.add(key)
                out.append(checked)
        return Extraction(candidates=out)

    # --- one proposal --------------------------------------------------------------------
    def messages(self, conversation: Conversation, cand: Candidate, label: str, flat: FlatSchema) -> list[dict]:
        """[system, user]: the system message is the same for every proposal of one evidence kind (cacheable)."""
        d = flat.details[label]
        sentence, before = _sentence_and_context(conversation, cand)
        items = ""
        if d.value_kind == "closed" and d.attributes:
            shown = d.attributes[:_ITEMS]
            items = f"\nThe value must be one of: {' | '.join(shown)}{' | ...' if len(d.attributes) > _ITEMS else ''}."
        human = HUMAN.format(
            context=f'Assistant said: "{before[:_CONTEXT_CHARS]}"\n' if before else "",
            sentence=sentence[:_SENTENCE_CHARS], category=label, value=cand.attribute,
            polarity="" if self.ask == "attitude" else
            ", " + {"like": "likes it", "dislike": "dislikes it", "indifferent": "does not mind it"}[cand.polarity],
            kind="a lasting preference" if cand.evidence == "stated" else "a one-off choice",
            items=items)
        system = (SYSTEM_ATTITUDE if self.ask == "attitude" else SYSTEM_FLIP).format(reject=REJECT_STATED if cand.evidence == "stated" else REJECT_OBSERVED)
        return [{"role": "system", "content": system}, {"role": "user", "content": human}]

    def check(self, conversation: Conversation, cand: Candidate, label: str, flat: FlatSchema,
              said: str) -> Optional[Candidate]:
        """The proposal as the LLM judged it (None: rejected); the proposal itself when no valid answer came."""
        msgs = self.messages(conversation, cand, label, flat)
        for attempt in (1, 2):
            try:
                answer = self.client.complete_schema(msgs, self.schema, VERDICT_NAME, max_tokens=self.max_tokens)
            except LLMOutputError as e:
                previous, error = e.raw or "(nothing)", "not a JSON object with verdict and span"
            except LLMError:
                break
            else:
                result, error = self._apply(answer, cand, label, flat, said)
                if error is None:
                    return result
                previous = json.dumps(answer, ensure_ascii=False)
            if attempt == 1:
                self._count(retries=1)
                msgs = msgs[:2] + [{"role": "assistant", "content": previous[:500]},
                                   {"role": "user", "content": RETRY.format(previous=previous[:500], error=error)}]
        self._count(kept_on_error=1)
        return cand

    def _apply(self, answer: dict, cand: Candidate, label: str, flat: FlatSchema,
               said: str) -> tuple[Optional[Candidate], Optional[str]]:
        """(the judged candidate or None for a rejection, None) or (None, what is wrong with the answer)."""
        verdict, span = answer.get("verdict"), answer.get("span")
        allowed = self.schema["properties"]["verdict"]["enum"]
        if verdict not in allowed:
            return None, f"verdict must be {' or '.join(allowed)} (got {json.dumps(verdict)[:40]})"
        attitude = answer.get("attitude")
        if self.ask == "attitude" and attitude not in _ATTITUDE:
            return None, f"attitude must be likes, dislikes or indifferent (got {json.dumps(attitude)[:40]})"
        if span is not None and not isinstance(span, str):
            return None, "span must be a string or null"
        if verdict == "reject":
            self._count(rejected=1)
            return None, None
        polarity = _ATTITUDE[attitude] if self.ask == "attitude" else cand.polarity
        if verdict == "flip":
            if polarity not in _FLIP:
                return None, f"flip is for a like or a dislike, this reading is {polarity!r}"
            polarity = _FLIP[polarity]
        value = cand.attribute
        span = (span or "").strip()
        d = flat.details[label]
        respanned = False
        if span and span.casefold() != cand.attribute.casefold() and span.casefold() != cand.span.casefold():
            new, polarity = as_data(span, polarity, d)
            if d.value_kind == "closed" and d.attributes:
                item = listed_item(new, d)
                if item is None:
                    return None, f"span {span!r} is not one of the listed values of {label}"
                new = item
            elif not occurs(new, said):
                return None, f"span {span!r} does not occur in what the user said: copy their words, or null"
            respanned = new.casefold() != value.casefold()
            value = new
        if respanned:
            self._count(respanned=1)
        elif polarity != cand.polarity:
            self._count(flipped=1)
        else:
            self._count(kept=1)
        if value == cand.attribute and polarity == cand.polarity:
            return cand, None
        return cand.model_copy(update={"attribute": value, "polarity": polarity,
                                       "span": span if respanned else cand.span}), None


def _sentence_and_context(conversation: Conversation, cand: Candidate) -> tuple[str, str]:
    """The user's turn the proposal came from (its sentence, else the turn naming its span, else the last user turn)
    and the assistant turn just before it (a "yes" means what the assistant asked)."""
    turns = conversation.turns
    needle = (cand.sentence or "").strip().casefold()
    at = None
    for i, t in enumerate(turns):
        if t.role == "user" and needle and (needle in t.text.casefold() or t.text.strip().casefold() in needle):
            at = i
            break
    if at is None and cand.span:
        at = next((i for i, t in enumerate(turns) if t.role == "user" and occurs(cand.span, t.text)), None)
    if at is None:
        at = max((i for i, t in enumerate(turns) if t.role == "user"), default=None)
    if at is None:
        return cand.sentence, ""
    before = next((turns[j].text for j in range(at - 1, -1, -1) if turns[j].role != "user"), "")
    return (cand.sentence or turns[at].text), before
