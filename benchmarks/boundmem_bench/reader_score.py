"""Scoring an extractor on the reader's annotated turns: each line (or each chat of lines sharing a `conv` id) is run
as a conversation with the assistant turn before each user turn, and what it stores is compared with the spans the
writers marked to be stored (the speaker's own, stated or observed, inside the schema).

A case is right when the stored set equals the gold set by category, value and polarity (nothing missed, nothing
extra). Also counted: fabricated values (an open value that is not in the user's words, a closed item no gold span
has), polarity flips (right category and value, wrong polarity), other people's tastes stored, and what is stored
from cases that should store nothing.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable

from boundmem.models import Conversation, Turn
from boundmem.schema.load import load_schema

from .train.reader_data import Row, Span
from .train.reader_validate import SCHEMA_FILES


@dataclass
class Case:
    """One conversation to read and what it should store."""

    rows: list[Row]
    conversation: Conversation

    @property
    def schema(self) -> str:
        return self.rows[0].schema

    @property
    def kind(self) -> str:
        return self.rows[0].kind

    @property
    def style(self) -> str:
        return self.rows[0].style

    def gold(self) -> list[tuple[Row, Span]]:
        out = []
        for row in self.rows:
            out += [(row, sp) for sp in row.spans if sp.stored]
            out += [(row, sp) for sp in row.implied if sp.stored]
        return out

    def others(self) -> list[tuple[Row, Span]]:
        return [(row, sp) for row in self.rows for sp in row.spans if sp.holder == "other" and sp.detail]


def cases(rows: Iterable[Row]) -> list[Case]:
    """Lines of one chat (same `conv`) become one conversation; every other line is its own."""
    groups: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        groups[r.conv or r.id].append(r)
    out = []
    for key, group in groups.items():
        turns = []
        for r in group:
            if r.context.strip():
                turns.append(Turn(role="assistant", text=r.context))
            turns.append(Turn(role="user", text=r.text))
        out.append(Case(group, Conversation(id=key, turns=tuple(turns))))
    return out


def schemas() -> dict:
    return {name: load_schema(path) for name, path in SCHEMA_FILES.items()}


def _norm(text: str) -> str:
    return " ".join(text.casefold().strip(" .,!?;:'\"").split())


def _value_of(row: Row, sp: Span) -> str:
    return sp.item if sp.item else (sp.refers or row.text[sp.start:sp.end])


def matches(pred_value: str, row: Row, sp: Span) -> bool:
    """A stored value matches a gold span when it is the gold item (closed) or the same words, allowing the span to
    be a little wider or narrower ("Italian" vs "Italian food")."""
    gold = _norm(_value_of(row, sp))
    pred = _norm(pred_value)
    if sp.item:
        return pred == gold
    return bool(pred) and (pred == gold or pred in gold or gold in pred)


@dataclass
class Tally:
    cases: Counter = field(default_factory=Counter)
    right: Counter = field(default_factory=Counter)
    counts: Counter = field(default_factory=Counter)

    def f1(self) -> float:
        tp, fp, fn = self.counts["tp"], self.counts["fp"], self.counts["fn"]
        return 2 * tp / max(1, 2 * tp + fp + fn)

    def detail_f1(self) -> float:
        tp, fp, fn = self.counts["dtp"], self.counts["dfp"], self.counts["dfn"]
        return 2 * tp / max(1, 2 * tp + fp + fn)


def score_case(case: Case, candidates, tally: Tally) -> bool:
    """Adds one case's outcome to `tally`; returns whether it was right."""
    gold = case.gold()
    used: set[int] = set()
    right = True
    text = " ".join(r.text for r in case.rows).casefold()
    gold_details = Counter(sp.detail for _, sp in gold)
    pred_details = Counter(c_detail(c) for c in candidates)
    overlap = sum((gold_details & pred_details).values())
    tally.counts["dtp"] += overlap
    tally.counts["dfp"] += sum(pred_details.values()) - overlap
    tally.counts["dfn"] += sum(gold_details.values()) - overlap
    for c in candidates:
        hit = next((k for k, (row, sp) in enumerate(gold) if k not in used and sp.detail == c_detail(c)
                    and matches(c.attribute, row, sp)), None)
        if hit is None:
            right = False
            tally.counts["fp"] += 1
            if not any(sp.item == c.attribute for _, sp in gold) and _norm(c.attribute) not in text:
                tally.counts["fabricated"] += 1
            if any(sp.detail == c_detail(c) and matches(c.attribute, row, sp) for row, sp in case.others()):
                tally.counts["other_leak"] += 1
            if not gold:
                tally.counts["false_store"] += 1
            continue
        used.add(hit)
        row, sp = gold[hit]
        if sp.polarity != c.polarity:
            tally.counts["polarity_flip"] += 1
            right = False
        else:
            tally.counts["tp"] += 1
    missed = len(gold) - len(used)
    tally.counts["fn"] += missed
    right = right and missed == 0
    key = (case.kind, case.style)
    tally.cases[key] += 1
    tally.right[key] += int(right)
    tally.counts["cases_empty"] += int(not gold)
    tally.counts["cases_empty_stored"] += int(not gold and bool(candidates))
    return right


def c_detail(c) -> str:
    """The detail name of a candidate's category (paths are keys; the writers' labels are names)."""
    return _detail_names()[str(c.path)]


_NAMES: dict[str, str] = {}


def _detail_names() -> dict[str, str]:
    if not _NAMES:
        for schema in schemas().values():
            for ref in schema.details():
                _NAMES[str(ref.path)] = ref.detail.name
    return _NAMES


BATCH = 64   # conversations per extract_many call: the reader encodes a call's turns as one batch, so a whole set at once runs out of memory


def extract_in_slices(extractor, conversations: list, schema) -> list:
    """`extract_many` over `conversations`, BATCH at a time."""
    return [got for k in range(0, len(conversations), BATCH)
            for got in extractor.extract_many(conversations[k:k + BATCH], schema)]


def run(extractor, rows: list[Row]) -> Tally:
    """Every case through `extractor` (batched per schema when it can)."""
    tally = Tally()
    by_schema: dict[str, list[Case]] = defaultdict(list)
    for case in cases(rows):
        by_schema[case.schema].append(case)
    loaded = schemas()
    for name, group in by_schema.items():
        schema = loaded[name]
        if hasattr(extractor, "extract_many"):
            found = extract_in_slices(extractor, [c.conversation for c in group], schema)
        else:
            found = [extractor.extract(c.conversation, schema).candidates for c in group]
        for case, cands in zip(group, found):
            score_case(case, cands, tally)
    return tally


def table(tally: Tally) -> list[str]:
    """Per kind: right / cases, written and spoken apart."""
    kinds = sorted({k for k, _ in tally.cases})
    lines = ["| kind | written | spoken |", "|---|---|---|"]
    for kind in kinds:
        cells = []
        for style in ("written", "spoken"):
            n = tally.cases[(kind, style)]
            cells.append(f"{tally.right[(kind, style)]}/{n} ({tally.right[(kind, style)] / n:.0%})" if n else "-")
        lines.append(f"| {kind} | {cells[0]} | {cells[1]} |")
    c = tally.counts
    total = sum(tally.cases.values())
    lines.append(f"\nright {sum(tally.right.values())}/{total} ({sum(tally.right.values()) / max(1, total):.1%}); "
                 f"value F1 {tally.f1():.3f}, detail F1 {tally.detail_f1():.3f}; fabricated {c['fabricated']}, "
                 f"polarity flips {c['polarity_flip']}, other people's stored {c['other_leak']}, "
                 f"stored from cases with nothing to store {c['cases_empty_stored']}/{c['cases_empty']}")
    return lines
