"""The schema as an LLM function: a pydantic model whose every field is optional, and its tool JSON.

Only optional fields, so "nothing to extract" is always a valid answer (the paper's default).
Attributes are free strings with the vocabulary given as JSON-schema examples, as in CarMem:
an enum would force an LLM to bend an unseen brand onto a known one.
"""
from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, create_model

from .model import CategoryPath, Schema

TOOL_NAME = "extract_user_preferences"


class PreferenceItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_sentence_preference_revealed: Optional[str] = Field(
        None, description="The user's own sentence that reveals the preference, verbatim.")
    user_preference: Optional[str] = Field(None, description="The preference itself, as a short attribute value.")


def _camel(key: str) -> str:
    return "".join(p.capitalize() for p in key.split("_")) or "X"


def output_model(schema: Schema) -> type[BaseModel]:
    """Nested pydantic model main > sub > detail: list[PreferenceItem]; all optional, extra fields forbidden."""
    main_fields: dict[str, Any] = {}
    for m in schema.mains:
        sub_fields: dict[str, Any] = {}
        for s in m.subs:
            det_fields: dict[str, Any] = {}
            for d in s.details:
                desc = d.description or d.name
                if not d.multiple:
                    desc += " At most one preference."
                det_fields[d.key] = (Optional[list[PreferenceItem]], Field(
                    None, description=desc, examples=[list(d.attributes)] if d.attributes else None,
                    title=d.name))
            sub_model = create_model(_camel(s.key), __config__=ConfigDict(extra="forbid", title=s.name),
                                     __doc__=s.description or s.name, **det_fields)
            sub_fields[s.key] = (Optional[sub_model], Field(None, description=s.description or s.name))
        main_model = create_model(_camel(m.key), __config__=ConfigDict(extra="forbid", title=m.name),
                                  __doc__=m.description or m.name, **sub_fields)
        main_fields[m.key] = (Optional[main_model], Field(None, description=m.description or m.name))
    return create_model("PreferencesFunctionOutput", __config__=ConfigDict(extra="forbid"),
                        __doc__="Long-term user preferences, only in these categories.", **main_fields)


def tool_definition(schema: Schema) -> dict:
    """OpenAI `tools=[...]` entry for the (possibly pruned) schema."""
    params = output_model(schema).model_json_schema()
    return {"type": "function", "function": {
        "name": TOOL_NAME,
        "description": ("Extracts the user's long-term preferences that fit these categories. Ignore preferences that "
                        "fit no category; never invent categories; omit what is absent."),
        "parameters": params}}


def flatten(schema: Schema, output: BaseModel) -> list[tuple[CategoryPath, PreferenceItem]]:
    """Walk a validated output model into (path, item) pairs, skipping empty items."""
    found = []
    for m in schema.mains:
        mv = getattr(output, m.key, None)
        if mv is None:
            continue
        for s in m.subs:
            sv = getattr(mv, s.key, None)
            if sv is None:
                continue
            for d in s.details:
                items = getattr(sv, d.key, None) or []
                for it in items:
                    if it.user_preference or it.user_sentence_preference_revealed:
                        found.append((CategoryPath(main=m.key, sub=s.key, detail=d.key), it))
    return found
