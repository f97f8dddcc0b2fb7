"""The flat extraction tool: one list of {sentence, category, value, polarity} items.

Why not the nested main > sub > detail model (`schema.tool`): a 0.5B-1.5B model answered that 6,600-token
tree with `{}` every time, and even large models pay for it on every call. The flat shape is the same
information, exact for any model:

- `category` is an enum of the user's allowed detail categories (the pruned schema), so an opted-out or
  invented category is not a valid answer: a server that constrains output to the JSON schema (llama.cpp,
  vLLM, OpenAI strict) cannot even produce it, and anything else fails validation and is retried;
- the category guide (one line per category, example values) is part of the system prompt, which depends
  only on the schema: schema first, conversation last, so a server's prefix cache covers all but the
  conversation;
- every field is required and no other field is allowed; `[]` is the way to say "nothing".

A dislike ("I can't stand country") is `polarity: dislike`, kept as data on the candidate (value "country",
polarity dislike), never as a "not country" string; a "Yes" the user turns down is the category's "No ..." item
where it has one (a listed value their words imply).
"""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, create_model, field_validator, model_validator

from ..schema.model import CategoryPath, DetailCategory, Schema

TOOL_NAME = "extract_user_preferences"
MAX_EXAMPLES = 4
_EXAMPLE_CHARS = 40
_GENERIC = re.compile(r"^the user's lasting preference for ", re.I)


@dataclass(frozen=True)
class FlatSchema:
    """A schema compiled for the flat tool: labels <-> paths, the tool JSON, the validator, the category guide."""

    labels: tuple[str, ...]
    paths: dict[str, CategoryPath]
    details: dict[str, DetailCategory]
    tool: dict
    model: type[BaseModel]
    guide: str


def _labels(schema: Schema) -> list[tuple[str, CategoryPath, DetailCategory]]:
    """'Sub > Detail' display labels, widened to 'Main > Sub > Detail' and then to the key path where not unique."""
    refs = list(schema.details())
    forms = (lambda r: f"{r.sub.name} > {r.detail.name}",
             lambda r: f"{r.main.name} > {r.sub.name} > {r.detail.name}",
             lambda r: f"{r.main.key}/{r.sub.key}/{r.detail.key}")
    for form in forms:
        labels = [form(r).strip() for r in refs]
        if len(set(labels)) == len(labels):
            break
    return [(lab, CategoryPath(main=r.main.key, sub=r.sub.key, detail=r.detail.key), r.detail)
            for lab, r in zip(labels, refs)]


def _guide_line(label: str, d: DetailCategory, examples: int = MAX_EXAMPLES) -> str:
    desc = (d.description or "").strip()
    # the in-car schema's descriptions only repeat the name ("The user's lasting preference for ..."): left out
    extra = "" if not desc or _GENERIC.match(desc) or d.name.lower() in desc.lower() else f": {desc[:120]}"
    if d.value_kind == "closed" and d.attributes:   # the value must be one of these: all of them are shown
        return f"- {label}{extra} (one of: {' | '.join(d.attributes)})"
    ex = [a if len(a) <= _EXAMPLE_CHARS else a[:_EXAMPLE_CHARS].rstrip() + "..." for a in d.attributes[:examples]]
    return f"- {label}{extra}" + (f" (e.g. {', '.join(ex)})" if ex else "")


def compile_flat(schema: Schema, brief: bool = False) -> FlatSchema:
    """`brief` (the small-model profile): two example values per open category instead of four and no field
    descriptions in the JSON schema. A 0.5B-1.5B model reads every prompt token on a CPU at a few dozen tokens a
    second, and under a grammar the descriptions only repeat what the system prompt says."""
    rows = _labels(schema)
    labels = tuple(lab for lab, _, _ in rows)
    guide = "\n".join(_guide_line(lab, d, 2 if brief else MAX_EXAMPLES) for lab, _, d in rows)
    params = {
        "type": "object",
        "properties": {"preferences": {
            "type": "array",
            "description": "The user's lasting preferences; [] if there is none.",
            "items": {
                "type": "object",
                "properties": {
                    "sentence": {"type": "string", "description": "The user's own sentence, verbatim."},
                    "category": {"type": "string", "enum": list(labels)},
                    "value": {"type": "string", "description": "Open category: the user's own words, copied. "
                              "Closed category: one of its listed items."},
                    "polarity": {"type": "string", "enum": ["like", "dislike", "indifferent"]},
                    "evidence": {"type": "string", "enum": ["stated", "observed"]},
                },
                "required": ["sentence", "category", "value", "polarity", "evidence"],
                "additionalProperties": False,
            }}},
        "required": ["preferences"],
        "additionalProperties": False,
    }
    if brief:
        params["properties"]["preferences"] = {k: v for k, v in params["properties"]["preferences"].items()
                                               if k != "description"}
        for field in params["properties"]["preferences"]["items"]["properties"].values():
            field.pop("description", None)
    tool = {"type": "function", "function": {
        "name": TOOL_NAME,
        "description": "Save the user's lasting preferences that fit one of the allowed categories.",
        "parameters": params}}
    details = {lab: d for lab, _, d in rows}
    return FlatSchema(labels=labels, paths={lab: p for lab, p, _ in rows}, details=details,
                      tool=tool, model=_model(labels, details), guide=guide)


class _ItemBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sentence: str
    value: str = Field(min_length=1)
    polarity: Literal["like", "dislike", "indifferent"]
    evidence: Literal["stated", "observed"] = "stated"

    @field_validator("value")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("value is empty: give the preference's value, or leave the item out")
        return v.strip()


def _model(labels: tuple[str, ...], details: dict[str, DetailCategory]) -> type[BaseModel]:
    cat = Literal[labels]  # type: ignore[valid-type]

    def grounded(self, info: ValidationInfo):
        """A value the conversation does not contain is made up: rejected, so the model is asked again with why."""
        d = details[self.category]
        value, polarity = as_data(self.value, self.polarity, d)
        if d.value_kind == "closed" and d.attributes:
            item = listed_item(value, d)
            if item is None:
                raise ValueError(f"value {self.value!r} is not one of the listed items of the closed category "
                                 f"{self.category!r} ({' | '.join(d.attributes)}): give exactly one of them, or leave "
                                 "the item out")
            return self
        text = (info.context or {}).get("user_text") if info is not None else None
        if text is not None and not occurs(value, text):
            raise ValueError(f"value {self.value!r} does not occur in what the user said: an open category's value "
                             "is the user's own words, copied from their turns, or leave the item out")
        return self

    item = create_model("PreferenceItem", __base__=_ItemBase, category=(cat, ...),
                        __validators__={"_grounded": model_validator(mode="after")(grounded)})
    return create_model("Preferences", __config__=ConfigDict(extra="forbid"), preferences=(list[item], ...))


def _folded(text: str) -> str:
    return " ".join(re.sub(r"[\W_]+", " ", text.casefold()).split())


_ARTICLE = re.compile(r"^(?:the|a|an|my|some)\s+")


def occurs(value: str, text: str) -> bool:
    """Whether the value is in the user's words: case, whitespace and punctuation folded, a leading article and a
    plural -s forgiven ("the Thai place" ~ "thai place", "highways" ~ "highway")."""
    v = _ARTICLE.sub("", _folded(value))
    if not v:
        return False
    words = [re.escape(w[:-1] if len(w) > 3 and w.endswith("s") else w) + r"(?:e?s)?" for w in v.split()]
    return re.search(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", _folded(text)) is not None


def listed_item(value: str, d: DetailCategory) -> Optional[str]:
    """The listed item a closed category's value names: the same item folded, or the only item it begins."""
    v = _folded(value)
    same = [a for a in d.attributes if _folded(a) == v]
    if same:
        return same[0]
    starts = [a for a in d.attributes if v and _folded(a).startswith(v + " ")]
    return starts[0] if len(starts) == 1 else None


_NEGATED = re.compile(r"^(?:not|no|never)\s+(?=\S)", re.I)


def as_data(value: str, polarity: str, d: DetailCategory) -> tuple[str, str]:
    """(value, polarity) as stored: a value the model negated in words ("not jazz") is the value with polarity
    dislike; a dislike of "Yes" is the category's listed "No ..." / "Indifferent ..." item (a like) where it has one."""
    v = value.strip()
    m = _NEGATED.match(v)
    if m and v not in d.attributes:  # a listed item is a value, even one starting with "No"
        v, polarity = v[m.end():].strip(), "dislike" if polarity == "like" else polarity
    if polarity == "dislike" and v.lower() == "yes":
        no = next((a for a in d.attributes if a.lower().startswith(("no ", "no(", "indifferent")) or a.lower() == "no"), None)
        if no:
            return no, "like"
    return v, polarity


def example_block(flat: FlatSchema) -> str:
    """A two-part worked example built from the user's own (pruned) schema, so it never names a category they lack."""
    lab = next((lab for lab in flat.labels if len(flat.details[lab].attributes) >= 2), None)
    if lab is None:
        return ""
    a, b = flat.details[lab].attributes[:2]
    said = f"I always pick {a}, and I never want {b}."
    answer = {"preferences": [{"sentence": said, "category": lab, "value": a, "polarity": "like", "evidence": "stated"},
                              {"sentence": said, "category": lab, "value": b, "polarity": "dislike",
                               "evidence": "stated"}]}
    return (f'Example: the user says "{said}" -> {json.dumps(answer, ensure_ascii=False)}\n'
            f'Example: the user says "Take me home." -> {{"preferences": []}}')


def describe_item_error(raw: Optional[dict], flat: FlatSchema) -> Optional[str]:
    """A hint for the most common small-model mistake: a category that is close to but not one of the labels
    (the closest allowed ones are named; the full list is in the system prompt)."""
    if not isinstance(raw, dict):
        return None
    items = raw.get("preferences")
    bad = [it.get("category") for it in (items if isinstance(items, list) else [])
           if isinstance(it, dict) and it.get("category") not in flat.paths]
    bad = [b for b in bad if isinstance(b, str)]
    if not bad:
        return None
    low = {lab.lower(): lab for lab in flat.labels}
    near = [low[m] for m in difflib.get_close_matches(bad[0].lower(), list(low), n=3, cutoff=0.0)]
    return (f"category {bad[0]!r} is not allowed; use one of the listed categories exactly as written"
            + (f", e.g. {'; '.join(near)}" if near else "") + ", or leave the preference out.")
