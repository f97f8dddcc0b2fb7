"""The CarMem bench's typed rows: one per conversation (or decision, or query) and stage, as results.json lists them.

The stages in `carmem.py` produce these; the summaries below and the report are computed from them. Field order is
the order results.json shows, so a run's file reads the same as before the rows were typed.
"""
from __future__ import annotations

from typing import Any, Optional

from pydantic import BaseModel, Field

from boundmem.models import Candidate
from boundmem.schema.model import CategoryPath
from .carmem_data import CarMemItem, CarMemUser
from .carmem_metrics import (LEVELS, Level, MaintenanceRow, RetrievalRow, label, label_set, maintenance_summary,
                             micro_prf, retrieval_summary, same_attribute)
from .report import ratio


class ExtractionOutcome(BaseModel):
    """One extract call as the bench scores it: an ExtractionError is the paper's 'not valid' (valid_at_try None)."""

    candidates: list[Candidate] = Field(default_factory=list)
    valid_at_try: Optional[int] = None  # 1, 2, or None = never valid
    error: Optional[str] = None
    crashed: bool = False  # the extractor raised something other than ExtractionError (e.g. a network error)

    @property
    def valid_candidates(self) -> list[Candidate]:
        return self.candidates if self.valid_at_try else []

    def stated(self) -> "ExtractionOutcome":
        """Only what would be stored at once: the observed candidates (one-off choices, kept as observations
        until repeated) left out."""
        return self.model_copy(update={"candidates": [c for c in self.candidates if c.evidence == "stated"]})


class CandidateOut(BaseModel):
    path: str
    attribute: str
    sentence: str
    confidence: float
    polarity: str = "like"
    evidence: str = "stated"

    @classmethod
    def of(cls, c: Candidate) -> "CandidateOut":
        return cls(path=str(c.path), attribute=c.attribute, sentence=c.sentence, confidence=c.confidence,
                   polarity=c.polarity, evidence=c.evidence)


def _outs(cands: list[Candidate]) -> list[CandidateOut]:
    return [CandidateOut.of(c) for c in cands]


# --- extraction, in schema -------------------------------------------------------------------
class Truth(BaseModel):
    path: str
    attribute: str
    multiple: bool


class ExtractionRecord(BaseModel):
    id: str
    user: str
    position: int
    truth: Truth
    valid_at_try: Optional[int]
    error: Optional[str]
    crashed: bool
    predicted: list[CandidateOut]
    labels: dict[Level, list[str]]
    hit: dict[Level, bool]
    exact: dict[Level, bool]
    attribute_correct: bool

    @classmethod
    def score(cls, item: CarMemItem, ex: ExtractionOutcome) -> "ExtractionRecord":
        pred = {lv: sorted(label_set([c.path for c in ex.valid_candidates], lv)) for lv in LEVELS}
        truth = {lv: label(item.path, lv) for lv in LEVELS}
        return cls(id=item.id, user=item.user, position=item.position,
                   truth=Truth(path=str(item.path), attribute=item.attribute, multiple=item.multiple),
                   valid_at_try=ex.valid_at_try, error=ex.error, crashed=ex.crashed, predicted=_outs(ex.candidates),
                   labels=pred, hit={lv: truth[lv] in pred[lv] for lv in pred},
                   exact={lv: pred[lv] == [truth[lv]] for lv in pred},
                   attribute_correct=any(label(c.path, "detail") == truth["detail"]
                                         and same_attribute(c.attribute, item.attribute) for c in ex.valid_candidates))


def extraction_summary(records: list[ExtractionRecord]) -> dict:
    out: dict[str, Any] = {}
    for lv in LEVELS:
        pairs = [(label(CategoryPath(**dict(zip(LEVELS, r.truth.path.split("/")))), lv), set(r.labels[lv]))
                 for r in records]
        out[lv] = micro_prf(pairs).model_dump()
    out["valid"] = {"n": len(records), "first_try": sum(r.valid_at_try == 1 for r in records),
                    "after_retry": sum(r.valid_at_try == 2 for r in records),
                    "invalid": sum(r.valid_at_try is None for r in records),
                    "crashed": sum(r.crashed for r in records)}
    # beyond the paper (which scores categories only): is the attribute right where the detail category is?
    hits = [r for r in records if r.hit["detail"]]
    right = sum(r.attribute_correct for r in hits)
    out["attribute"] = {"detail_hits": len(hits), "attribute_correct": right, "accuracy": ratio(right, len(hits))}
    # the paper's "exactly one preference extracted" subset (its *_1_pref_* confusion matrices)
    one = [r for r in records if len(r.labels["detail"]) == 1]
    out["one_pref"] = {"n": len(one)} | {lv: ratio(sum(r.exact[lv] for r in one), len(one)) for lv in LEVELS}
    out["extracted_total"] = sum(len(r.predicted) for r in records)
    out["observed_total"] = sum(1 for r in records for c in r.predicted if c.evidence == "observed")
    out["none_extracted"] = sum(1 for r in records if not r.labels["detail"])
    return out


# --- extraction, out of schema ---------------------------------------------------------------
class OutOfSchemaRecord(BaseModel):
    id: str
    user: str
    removed: str
    truth: str
    valid_at_try: Optional[int]
    error: Optional[str]
    predicted: list[CandidateOut]
    withheld: bool
    leaks: list[str]

    @classmethod
    def score(cls, item: CarMemItem, ex: ExtractionOutcome, removed: str) -> "OutOfSchemaRecord":
        leaks = ex.valid_candidates
        return cls(id=item.id, user=item.user, removed=removed, truth=str(item.path), valid_at_try=ex.valid_at_try,
                   error=ex.error, predicted=_outs(ex.candidates), withheld=not leaks, leaks=[str(c.path) for c in leaks])


def out_of_schema_summary(records: list[OutOfSchemaRecord]) -> dict:
    n = len(records)
    by_sub: dict[str, int] = {}
    same_main = other_main = 0
    for r in records:
        removed_main = r.removed.split("/")[0]
        for leak in r.leaks:
            m, s, _ = leak.split("/")
            by_sub[f"{m}/{s}"] = by_sub.get(f"{m}/{s}", 0) + 1
            if m == removed_main:
                same_main += 1
            else:
                other_main += 1
    by_removed: dict[str, dict] = {}
    for r in records:
        g = by_removed.setdefault(r.removed, {"n": 0, "withheld": 0})
        g["n"] += 1
        g["withheld"] += r.withheld
    withheld = sum(r.withheld for r in records)
    return {"n": n, "withheld": withheld, "withheld_rate": (withheld / n) if n else None,
            "invalid": sum(r.valid_at_try is None for r in records),
            "leaked_preferences": sum(len(r.leaks) for r in records), "leaks_same_main": same_main,
            "leaks_other_main": other_main, "leaks_by_sub": dict(sorted(by_sub.items(), key=lambda kv: -kv[1])),
            "by_removed_sub": by_removed}


# --- end to end: what Memory decided and what it holds ---------------------------------------
class IngestDecision(BaseModel):
    action: str
    path: str
    attribute: str
    target: Optional[str]
    reason: str


class IngestRecord(BaseModel):
    id: str
    user: str
    decisions: list[IngestDecision]
    blocked: list[str]


class StoredRecord(BaseModel):
    user: str
    path: str
    attribute: str
    kind: str  # correct | wrong_attribute | wrong_category
    conversation_id: Optional[str]


class StoreAudit(BaseModel):
    """What the end-to-end memory holds, judged against each user's ground-truth preferences."""

    stored: int
    correct: int
    wrong_attribute: int
    wrong_category: int
    truth_preferences: int
    truth_missing: int
    rows: list[StoredRecord]


def store_audit(store: Any, users: list[CarMemUser]) -> StoreAudit:
    rows: list[StoredRecord] = []
    missing = 0
    for u in users:
        truth = [(label(it.path, "detail"), it.attribute) for it in u.items]
        stored = store.preferences(u.user)
        for p in stored:
            same_cat = [a for lab, a in truth if lab == label(p.path, "detail")]
            kind = ("correct" if any(same_attribute(p.attribute, a) for a in same_cat)
                    else "wrong_attribute" if same_cat else "wrong_category")
            rows.append(StoredRecord(user=u.user, path=str(p.path), attribute=p.attribute, kind=kind,
                                     conversation_id=p.conversation_id))
        for lab, a in truth:
            if not any(label(p.path, "detail") == lab and same_attribute(p.attribute, a) for p in stored):
                missing += 1
    count = {k: sum(r.kind == k for r in rows) for k in ("correct", "wrong_attribute", "wrong_category")}
    return StoreAudit(stored=len(rows), **count, truth_preferences=sum(len(u.items) for u in users),
                      truth_missing=missing, rows=rows)


# --- maintenance -----------------------------------------------------------------------------
class ExistingOut(BaseModel):
    id: str
    attribute: str


class MaintenanceRecord(BaseModel):
    """One incoming utterance against the stored ones. A dropped one (the paper's negate input when extraction
    did not give exactly the truth's category) has `dropped` and no decision; a decided one has the rest.
    Dumped with exclude_unset, so each kind lists only its own fields."""

    id: str
    user: str
    utterance: str
    variant: str
    multiple: bool
    existing: list[ExistingOut]
    expected: str
    action: Optional[str] = None
    target: Optional[str] = None
    lost: bool = False
    dropped: Optional[str] = None
    candidate: Optional[CandidateOut] = None
    target_attribute: Optional[str] = None
    target_is_subject: Optional[bool] = None
    reason: Optional[str] = None

    def as_row(self) -> MaintenanceRow:
        return MaintenanceRow(multiple=self.multiple, utterance=self.utterance, action=self.action, lost=self.lost)


def summarise_maintenance(rows: list[MaintenanceRecord]) -> dict:
    def pick(negate_variant: str) -> list[MaintenanceRow]:
        return [r.as_row() for r in rows
                if r.action is not None and r.variant in ("equal", "different", negate_variant)]

    return {"paper_negate_extracted": maintenance_summary(pick("negate_extracted")),
            "negate_constructed": maintenance_summary(pick("negate_constructed")),
            "negate_dropped": sum(1 for r in rows if r.variant == "negate_extracted" and r.action is None),
            "n_items": len({r.id for r in rows})}


# --- retrieval -------------------------------------------------------------------------------
class RankedOut(BaseModel):
    path: str
    attribute: str
    score: float
    relevant: bool


class RetrievalRecord(BaseModel):
    id: str
    user: str
    query: str
    truth: str
    n: int
    gallery_size: int
    relevant: list[bool]
    top: list[RankedOut]
    dynamic_k: int
    dynamic_hit: bool


def summarise_retrieval(rows: list[RetrievalRecord]) -> dict:
    return retrieval_summary([RetrievalRow(relevant=r.relevant, n=r.n, dynamic_hit=r.dynamic_hit, dynamic_k=r.dynamic_k)
                              for r in rows])
