"""The challenge sets' scores as pure functions, so each can be checked by hand on a tiny example.

A conversation's result is what the memory holds for its (fresh) user afterwards, compared with `expected`:

- P/R/F1 per level (main, sub, detail): micro over (conversation, path prefix) pairs; the sets of prefixes
  stored and expected in one conversation are compared (two preferences in one category count once).
- Attribute accuracy: over detail-level matches (each expected preference paired with at most one stored one
  of its detail category, pairs chosen to maximise correct ones), the stored attribute must equal the expected
  one or an `accept` spelling (case-insensitive, whitespace/punctuation-normalised) with the right polarity.
  A stored attribute starting with "not "/"no "/"never "/"avoid " is a dislike of its remainder, unless it is
  literally one of the expected spellings (a vocabulary item like "No (cheapest prefered)" is a like).
- "Dislike stored as like": pairs whose expected polarity is dislike and whose stored attribute is a like.
- False-store rate: over conversations that expect nothing, the share where anything was stored.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Optional, Sequence

from pydantic import BaseModel

from .report import ratio

LEVELS = ("main", "sub", "detail")
NEGATIVE_PREFIXES = ("not ", "no ", "never ", "avoid ")


class Pref(BaseModel):
    """A stored or expected preference as the metrics see it (path 'main/sub/detail')."""

    path: str
    attribute: str
    polarity: str = "like"           # expected only; a stored one's polarity comes from its attribute
    accept: tuple[str, ...] = ()     # expected only


def prefix(path: str, level: str) -> str:
    n = LEVELS.index(level) + 1
    return "/".join(path.split("/")[:n])


def norm(text: str) -> str:
    """Case, whitespace and punctuation folded ("Gluten-free " ~ "gluten free")."""
    return " ".join(re.sub(r"[\W_]+", " ", text.lower()).split())


def split_polarity(attribute: str) -> tuple[str, str]:
    """("not Country" -> ("Country", "dislike")); anything else is a like of itself."""
    a = attribute.strip()
    low = a.lower()
    for p in NEGATIVE_PREFIXES:
        if low.startswith(p) and a[len(p):].strip():
            return a[len(p):].strip(), "dislike"
    return a, "like"


def attribute_correct(stored_attribute: str, exp: Pref) -> bool:
    spellings = {norm(s) for s in (exp.attribute, *exp.accept)}
    if exp.polarity == "like":
        return norm(stored_attribute) in spellings
    # a dislike: the expected value may itself be written "not X"; compare the values
    values = {norm(split_polarity(s)[0]) for s in (exp.attribute, *exp.accept)}
    base, pol = split_polarity(stored_attribute)
    return pol == "dislike" and norm(base) in values


def pair_detail(expected: Sequence[Pref], stored: Sequence[Pref]) -> list[tuple[int, int]]:
    """Pairs (expected index, stored index) of the same detail category, each side used at most once:
    as many pairs as possible, and among those as many attribute-correct ones as possible."""
    pairs: list[tuple[int, int]] = []
    for path in dict.fromkeys(e.path for e in expected):
        ei = [i for i, e in enumerate(expected) if e.path == path]
        si = [j for j, s in enumerate(stored) if s.path == path]
        # maximum matching on correct pairs (Kuhn), then fill with any pairs
        owner: dict[int, int] = {}

        def augment(i: int, seen: set[int]) -> bool:
            for j in si:
                if j not in seen and attribute_correct(stored[j].attribute, expected[i]):
                    seen.add(j)
                    if j not in owner or augment(owner[j], seen):
                        owner[j] = i
                        return True
            return False

        for i in ei:
            augment(i, set())
        used_e, used_s = set(owner.values()), set(owner)
        rest = zip([i for i in ei if i not in used_e], [j for j in si if j not in used_s])
        pairs += sorted([(i, j) for j, i in owner.items()] + list(rest))
    return sorted(pairs)


def score_conversation(expected: Sequence[Pref], stored: Sequence[Pref]) -> dict[str, Any]:
    """Everything the summaries need about one conversation."""
    out: dict[str, Any] = {"levels": {}}
    for lv in LEVELS:
        e, s = {prefix(p.path, lv) for p in expected}, {prefix(p.path, lv) for p in stored}
        out["levels"][lv] = {"tp": len(e & s), "fp": len(s - e), "fn": len(e - s)}
    pairs = []
    for i, j in pair_detail(expected, stored):
        exp, st = expected[i], stored[j]
        pairs.append({"expected": i, "stored": j, "correct": attribute_correct(st.attribute, exp),
                      "expected_polarity": exp.polarity, "stored_polarity": _stored_polarity(st.attribute, exp)})
    out["pairs"] = pairs
    out["dislike_as_like"] = sum(1 for p in pairs if p["expected_polarity"] == "dislike" and p["stored_polarity"] == "like")
    out["stored_any"] = bool(stored)
    out["expects_none"] = not expected
    paired = {j for _, j in pair_detail(expected, stored)}
    out["extra"] = [j for j in range(len(stored)) if j not in paired]  # stored, but matching no expected preference
    return out


def _stored_polarity(stored_attribute: str, exp: Pref) -> str:
    if norm(stored_attribute) in {norm(s) for s in (exp.attribute, *exp.accept)} and exp.polarity == "like":
        return "like"  # literally an expected spelling (a vocabulary item may start with "No ...")
    return split_polarity(stored_attribute)[1]


class PRF(BaseModel):
    tp: int
    fp: int
    fn: int
    precision: Optional[float]
    recall: Optional[float]
    f1: Optional[float]


def prf(tp: int, fp: int, fn: int) -> PRF:
    p, r = ratio(tp, tp + fp), ratio(tp, tp + fn)
    f1 = 2 * p * r / (p + r) if p and r else (0.0 if p is not None and r is not None else None)
    return PRF(tp=tp, fp=fp, fn=fn, precision=p, recall=r, f1=f1)


def summarise(scores: Sequence[dict[str, Any]], kinds: Sequence[str], styles: Sequence[str]) -> dict[str, Any]:
    """Scores of many conversations (each `score_conversation(...)` plus "kind" and "style") into the figures."""
    out: dict[str, Any] = {"n": len(scores)}
    for lv in LEVELS:
        out[lv] = prf(*(sum(s["levels"][lv][k] for s in scores) for k in ("tp", "fp", "fn"))).model_dump()
    pairs = [p for s in scores for p in s["pairs"]]
    out["attribute"] = {"matches": len(pairs), "correct": sum(p["correct"] for p in pairs),
                        "accuracy": ratio(sum(p["correct"] for p in pairs), len(pairs))}
    dis = [p for p in pairs if p["expected_polarity"] == "dislike"]
    out["dislike"] = {"matches": len(dis), "stored_as_like": sum(s["dislike_as_like"] for s in scores),
                      "correct": sum(p["correct"] for p in dis)}
    out["false_store"] = false_store(scores)
    out["by_kind"] = {k: group(scores, "kind", k) for k in kinds}
    out["by_style"] = {k: group(scores, "style", k) for k in styles}
    return out


def false_store(scores: Iterable[dict[str, Any]]) -> dict[str, Any]:
    none = [s for s in scores if s["expects_none"]]
    hit = sum(s["stored_any"] for s in none)
    return {"n": len(none), "stored": hit, "rate": ratio(hit, len(none))}


def group(scores: Sequence[dict[str, Any]], key: str, value: str) -> dict[str, Any]:
    """One kind or style: false-store rate over its conversations that expect nothing; over the others, detail
    recall, attribute accuracy, and how many stored something that matches no expected preference."""
    sel = [s for s in scores if s[key] == value]
    some = [s for s in sel if not s["expects_none"]]
    tp, fn = sum(s["levels"]["detail"]["tp"] for s in some), sum(s["levels"]["detail"]["fn"] for s in some)
    pairs = [p for s in some for p in s["pairs"]]
    extra = sum(1 for s in some if s["extra"])
    return {"n": len(sel), "false_store": false_store(sel), "expecting": len(some), "detail_recall": ratio(tp, tp + fn),
            "attribute_accuracy": ratio(sum(p["correct"] for p in pairs), len(pairs)), "attribute_matches": len(pairs),
            "stored_unexpected": extra, "stored_unexpected_rate": ratio(extra, len(some))}


def slurp_summary(rows: Sequence[dict[str, Any]], preference_intents: Sequence[str]) -> dict[str, Any]:
    """rows: {"intent", "stored": [...]} per sentence. False-store rate overall and by intent (worst first),
    the preference intents excluded and listed on their own."""
    counted = [r for r in rows if r["intent"] not in preference_intents]
    by: dict[str, list[dict]] = {}
    for r in counted:
        by.setdefault(r["intent"], []).append(r)
    intents = [{"intent": k, "n": len(v), "stored": sum(bool(r["stored"]) for r in v),
                "rate": ratio(sum(bool(r["stored"]) for r in v), len(v))} for k, v in by.items()]
    intents.sort(key=lambda d: (-(d["rate"] or 0), -d["stored"], d["intent"]))
    stored = sum(bool(r["stored"]) for r in counted)
    pref = [r for r in rows if r["intent"] in preference_intents]
    return {"n": len(counted), "stored": stored, "rate": ratio(stored, len(counted)),
            "preferences_stored": sum(len(r["stored"]) for r in counted), "by_intent": intents,
            "preference_intents": {"n": len(pref), "stored": sum(bool(r["stored"]) for r in pref)}}
