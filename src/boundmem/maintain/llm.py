"""CarMem's maintainer: the model picks pass, update or append by calling one of three tools.

A single-preference (MNP) category is offered only pass and update, so the model cannot even ask to
hold two; `enforce_multiplicity` repeats the rule for any answer that slips through and maps an
invented pk to the newest stored preference. Unlike the paper's code (which passed only the last
existing preference), the prompt lists every stored preference of the category.
"""
from __future__ import annotations

import json
from typing import Any, Optional, get_args

from ..llm.client import LLMClient
from ..llm.errors import LLMNoToolCall, LLMOutputError
from ..models import Candidate, Decision, Polarity, Preference
from ..schema.model import DetailCategory
from .base import Reconciliation, enforce_multiplicity

POLARITIES = get_args(Polarity)

_COMMON = """\
You maintain a database of a user's long-term preferences. An incoming preference must be reconciled with \
the preferences already stored in the same category. You must call exactly one of the tools.
- pass_preference: the incoming preference is equal or very similar to a stored one (same attribute, maybe \
worded differently); give that stored preference's pk.
- update_preference: the incoming preference changes or contradicts a stored one{mnp_update}; give the pk of \
the stored preference it replaces.
Each preference has a polarity (like, dislike, indifferent). The same attribute with another polarity is a \
contradiction (stored "jazz" like, incoming "jazz" dislike -> update); give the polarity to store with the tool."""

MP_PROMPT = _COMMON.format(mnp_update="") + """
- append_preference: the incoming attribute is different from every stored one and can hold alongside them.
Several preferences can be stored in this category, but never the same or a very similar attribute twice.
Examples: stored "vegetarian", incoming "vegetarian" -> pass; stored "vegetarian", incoming "kosher" -> append; \
stored "vegetarian" like, incoming "vegetarian" dislike ("I am not vegetarian anymore") -> update with polarity \
dislike."""

MNP_PROMPT = _COMMON.format(mnp_update=", or is a different value (it takes the stored one's place)") + """
Only one preference can ever be stored in this category at a time.
Examples: stored "cheap", incoming "cheap" -> pass; stored "cheap", incoming "expensive" -> update; \
stored "cheap" like, incoming "cheap" indifferent ("I no longer care about cheap") -> update with polarity \
indifferent."""

HUMAN_PROMPT = """\
Existing preferences:
{existing}
### Incoming (NEW) preference:
{incoming}
First give your thought process briefly (category, text, attribute, whether several preferences are allowed), \
then call exactly one tool."""

MISSED_PROMPT = "Your last run did not call a tool. You must call exactly one tool.\n\n"
INVALID_PROMPT = "Your last run called a tool wrongly ({error}). You must call exactly one of the offered tools.\n\n"


def _tool(name: str, description: str, params: dict[str, dict]) -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": params, "required": list(params), "additionalProperties": False}}}


def maintenance_tools(existing: list[Preference], multiple: bool) -> list[dict]:
    """The tools offered for one decision; append only when the category may hold several preferences."""
    pk = {"type": "string", "enum": [p.id for p in existing]}
    text = {"type": "string", "description": "The incoming preference's text."}
    polarity = {"type": "string", "enum": list(POLARITIES), "description": "The polarity to store (the incoming "
                "preference's, unless its text clearly says otherwise)."}
    tools = [
        _tool("pass_preference", "The incoming preference is equal or very similar to a stored one: keep the stored one.",
              {"to_pass_incoming_preference": text,
               "pk_of_equal_existing_preference": {**pk, "description": "pk of the equal stored preference."}}),
        _tool("update_preference", "The incoming preference updates or contradicts a stored one: delete that one "
              "and store the incoming one.",
              {"to_insert_incoming_preference": text,
               "pk_of_to_delete_existing_preference": {**pk, "description": "pk of the stored preference to replace."},
               "polarity": polarity}),
    ]
    if multiple:
        tools.append(_tool("append_preference", "The incoming attribute differs from all stored ones: store it as well "
                           "and keep the stored ones.", {"incoming_preference": text, "polarity": polarity}))
    return tools


def _shown(detail: DetailCategory, p: Preference | Candidate, pk: Optional[str] = None) -> dict[str, Any]:
    d = {"detail_category": detail.name, "text": p.sentence, "attribute": p.attribute, "polarity": p.polarity}
    return {"pk": pk, **d} if pk is not None else d


class LLMMaintainer:
    """Maintainer over any OpenAI-compatible endpoint; each decision comes back with the try that gave it."""

    def __init__(self, client: LLMClient):
        self.client = client

    def messages(self, candidate: Candidate, existing: list[Preference], detail: DetailCategory) -> list[dict[str, str]]:
        shown = json.dumps([_shown(detail, p, p.id) for p in existing], ensure_ascii=False, indent=1)
        human = HUMAN_PROMPT.format(existing=shown, incoming=json.dumps(_shown(detail, candidate), ensure_ascii=False))
        return [{"role": "system", "content": MP_PROMPT if detail.multiple else MNP_PROMPT},
                {"role": "user", "content": human}]

    def decide(self, candidate: Candidate, existing: list[Preference], detail: DetailCategory) -> Reconciliation:
        if not existing:
            return Reconciliation(decision=Decision(action="insert", candidate=candidate, reason="nothing stored yet"),
                                  valid_at_try=None)
        tools = maintenance_tools(existing, detail.multiple)
        msgs = self.messages(candidate, existing, detail)
        human = msgs[1]["content"]
        for attempt in (1, 2):
            try:
                r = self.client.tool_call(msgs, tools, "required")
            except LLMOutputError as e:
                prefix = MISSED_PROMPT if isinstance(e, LLMNoToolCall) else INVALID_PROMPT.format(error=e)
                msgs = [msgs[0], {"role": "user", "content": prefix + human}]
                continue
            d = enforce_multiplicity(self._decision(candidate, r.name, r.arguments, r.content), existing, detail)
            return Reconciliation(decision=d, valid_at_try=attempt)
        # the paper's default: when the model will not decide, keep what is stored
        return Reconciliation(decision=Decision(action="pass", candidate=candidate, target=existing[-1].id,
                                                reason="model called no valid tool twice; kept the stored preference"),
                              valid_at_try=None)

    @staticmethod
    def _decision(candidate: Candidate, name: str, args: dict[str, Any], content: str) -> Decision:
        why = f"llm chose {name}" + (f": {content.strip()[:300]}" if content and content.strip() else "")
        if args.get("polarity") in POLARITIES and name != "pass_preference":
            candidate = candidate.model_copy(update={"polarity": args["polarity"]})
        if name == "append_preference":
            return Decision(action="append", candidate=candidate, reason=why)
        if name == "pass_preference":
            target = args.get("pk_of_equal_existing_preference")
            return Decision(action="pass", candidate=candidate, target=str(target) if target else None, reason=why)
        target = args.get("pk_of_to_delete_existing_preference")
        return Decision(action="update", candidate=candidate, target=str(target) if target else None, reason=why)
