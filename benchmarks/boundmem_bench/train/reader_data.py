"""The reader's annotated turns: hand-written lines (reader_data/written), hand-annotated real turns
(reader_data/real) and SLURP devel's slot spans converted to the same format; split by whole writer.

Splits are fixed here, before any training, and never chosen by results:
- held out (reported, never trained on or tuned with): writers w02, w06, w12, w18, half of SLURP devel and the
  Synthetic-Persona-Chat conversations annotated as `spc-heldout`;
- dev (thresholds are calibrated on it, not trained on): writers w05, w10;
- train: every other writer, the CarMem annotations (users 51-100 only), the other half of SLURP devel.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from .reader_validate import HERE, SCHEMA_FILES, locate

HELD_OUT = frozenset({"w02", "w06", "w12", "w18", "w21"})
# whole schemas no training line may use: their lines measure a schema the reader has never seen
HELD_OUT_SCHEMAS = frozenset({"trips"})
DEV = frozenset({"w05", "w10"})



@dataclass
class Span:
    start: int
    end: int
    detail: Optional[str]
    item: Optional[str]
    polarity: str
    evidence: str
    holder: str
    refers: Optional[str] = None

    @property
    def stored(self) -> bool:
        """Whether the reader should store this span (as a preference or, if observed, an observation)."""
        return self.holder == "self" and self.evidence in ("stated", "observed") and self.detail is not None


@dataclass
class Row:
    id: str
    writer: str
    schema: str
    style: str
    kind: str
    context: str
    text: str
    spans: list[Span] = field(default_factory=list)
    conv: Optional[str] = None
    implied: list[Span] = field(default_factory=list)   # closed items the whole turn implies (start = end = 0)

    @property
    def split(self) -> str:
        if (self.writer in HELD_OUT or self.schema in HELD_OUT_SCHEMAS
                or self.writer in ("slurp-heldout", "spc-heldout")):
            return "heldout"
        if self.writer in DEV:
            return "dev"
        return "train"


def parse(line: dict) -> Optional[Row]:
    spans = []
    for sp in line.get("spans") or []:
        at = locate(line["text"], sp["text"], int(sp.get("occurrence", 1)))
        if at < 0:
            return None
        spans.append(Span(at, at + len(sp["text"]), sp.get("detail"), sp.get("item"), sp["polarity"],
                          sp["evidence"], sp["holder"], sp.get("refers")))
    implied = [Span(0, 0, d["detail"], d.get("item"), d["polarity"], d["evidence"], d.get("holder", "self"))
               for d in line.get("implied") or []]
    return Row(line["id"], line["writer"], line["schema"], line.get("style", "written"), line.get("kind", ""),
               line.get("context") or "", line["text"], spans, line.get("conv"), implied)


def read_jsonl(paths: Iterable[Path]) -> list[Row]:
    rows = []
    for path in paths:
        for text in Path(path).read_text().splitlines():
            if text.strip():
                try:
                    row = parse(json.loads(text))
                except (json.JSONDecodeError, KeyError):
                    row = None
                if row is not None:
                    rows.append(row)
    return rows


def annotated_files() -> list[Path]:
    """Every hand-written and hand-annotated file (the sample lines excluded)."""
    return sorted(p for p in [*(HERE / "written").glob("w*.jsonl"), *(HERE / "real").glob("*.jsonl")])


# SLURP slot -> in-car detail category; intents decide the evidence (a command acts now: observed; a question or
# a query is no evidence; "i like/don't like" intents state a lasting taste)
SLURP_SLOTS = {"music_genre": "Favorite Genres", "artist_name": "Favorite Artists/Bands", "song_name": "Favorite Songs",
               "radio_name": "Preferred Radio Station", "podcast_name": "Favorite Podcast Shows",
               "food_type": "Favorite Cuisine"}
_SLOT = re.compile(r"\[(\w+) : ([^\]]+)\]")


def slurp_rows(path: Path) -> list[Row]:
    """SLURP devel commands with their slot spans, half (by a hash of the sentence) held out."""
    rows = []
    for n, text in enumerate(Path(path).read_text().splitlines()):
        d = json.loads(text)
        sentence, intent = d["sentence"], d["intent"]
        evidence = ("stated" if intent.endswith("likeness") else
                    "observed" if intent.startswith(("play_", "takeaway_order")) else "none")
        polarity = "dislike" if intent.endswith("dislikeness") else "like"
        spans = []
        for slot, value in _SLOT.findall(d.get("sentence_annotation", "")):
            detail = SLURP_SLOTS.get(slot)
            at = sentence.find(value.strip())
            if detail and at >= 0:
                spans.append(Span(at, at + len(value.strip()), detail, None, polarity, evidence, "self"))
        held = int(hashlib.sha1(sentence.encode()).hexdigest(), 16) % 2 == 0
        rows.append(Row(f"slurp-{d['slurp_id']}", "slurp-heldout" if held else "slurp-train", "incar", "spoken",
                        "slurp", "", sentence, spans))
    return rows


SPOKEN_DROP = set(".,!?;:\"()")


def spoken_copy(row: Row) -> Optional[Row]:
    """The written line as a speech recogniser would give it (lower case, no punctuation), spans moved with their
    words; None when a span would lose characters (it began or ended with punctuation)."""
    keep = [k for k, ch in enumerate(row.text) if ch not in SPOKEN_DROP]
    new_at = {k: n for n, k in enumerate(keep)}
    text = " ".join("".join(row.text[k] for k in keep).lower().split())
    if text != "".join(row.text[k] for k in keep).lower():
        return None   # spaces collapsed: offsets would shift
    spans = []
    for sp in row.spans:
        if sp.start not in new_at or (sp.end - 1) not in new_at:
            return None
        spans.append(Span(new_at[sp.start], new_at[sp.end - 1] + 1, sp.detail, sp.item, sp.polarity, sp.evidence,
                          sp.holder, sp.refers))
    return Row(row.id + "-spoken", row.writer, row.schema, "spoken", row.kind, row.context, text, spans, row.conv,
               row.implied)


def manifest(paths: Iterable[Path]) -> dict[str, str]:
    """File name -> sha256 of every data file a model was trained on (saved beside the model)."""
    return {Path(p).name: hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths}
