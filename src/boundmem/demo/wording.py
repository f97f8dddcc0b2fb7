"""What a person trying `boundmem demo` reads: each decision and each recalled preference in words.

Category keys ("points_of_interest/restaurant/favorite_cuisine"), action names ("insert") and scores are the API's
and the audit log's vocabulary; someone meeting boundmem for the first time reads the category's labels, what
happened to the value ("remembered", "changed from"), the words of theirs it rests on, and, for a recall, what the
assistant would be told and why, never a number they cannot place."""
from __future__ import annotations

from typing import Any, Sequence

from ..models import Decision, Preference
from ..schema.display import category_text, reads, statement, value_label

_DONE = {"insert": "remembered", "append": "remembered, beside what was held", "update": "changed",
         "pass": "already known"}


def decision_text(schema: Any, d: Decision, held: Sequence[Preference]) -> str:
    """One maintenance decision in words: "remembered Restaurant > Favorite Cuisine: Italian (you said "Italian
    food")"; an update says what it replaced, from `held`, the preferences before the conversation."""
    c = d.candidate
    label = category_text(schema, c.path)
    value = statement(label.rsplit(" > ", 1)[-1], value_label(schema, c.path, c.attribute), c.polarity)
    text = f"{_DONE.get(d.action, d.action)} {label}: {value}"
    before = next((p for p in held if p.id == d.target), None)
    if d.action == "update" and before is not None:
        text += f" (was {reads(schema, before)})"
    if c.span:
        text += f', because you said "{c.span}"'
    return text


def recall_text(schema: Any, hits: Sequence[Any]) -> str:
    """What the assistant would be told for a request, most relevant first, each with the sentence it came from; the
    recall gate's scores stay out (they rank the lines: `boundmem recall` prints them)."""
    if not hits:
        return "nothing stored would change the answer, so the assistant is told nothing"
    lines = ["the assistant would be told, most relevant first:"]
    for h in hits:
        p = h.preference
        lines.append(f'- {category_text(schema, p.path)}: {reads(schema, p)}, because you said "{p.sentence}"')
    return "\n".join(lines)
