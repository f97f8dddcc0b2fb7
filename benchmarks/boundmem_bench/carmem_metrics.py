"""CarMem's scores as pure functions, so each can be checked by hand on a tiny example.

Definitions follow the authors' evaluation code (see docs/carmem-protocol.md, section 3).
"""
from __future__ import annotations

import re
from typing import Iterable, Literal, Optional, Sequence

from pydantic import BaseModel

from boundmem.schema.model import CategoryPath
from .report import ratio

Level = Literal["main", "sub", "detail"]
LEVELS: tuple[Level, ...] = ("main", "sub", "detail")
UtteranceType = Literal["equal", "negate", "different"]

# label_song_is_genre=True in the authors' evaluation: songs count as artists/bands (both truth and prediction)
SONGS = "entertainment_and_media/music/favorite_songs"
ARTISTS = "entertainment_and_media/music/favorite_artists_bands"


def label(path: CategoryPath, level: Level, merge_songs: bool = True) -> str:
    if level == "main":
        return path.main
    if level == "sub":
        return f"{path.main}/{path.sub}"
    s = str(path)
    return ARTISTS if merge_songs and s == SONGS else s


def label_set(paths: Iterable[CategoryPath], level: Level, merge_songs: bool = True) -> set[str]:
    return {label(p, level, merge_songs) for p in paths}


class PRF(BaseModel):
    n: int
    tp: int
    fp: int
    fn: int
    exact: int  # conversations whose predicted set is exactly {truth}
    precision: Optional[float]
    recall: Optional[float]
    f1: Optional[float]
    subset_accuracy: Optional[float]


def micro_prf(pairs: Sequence[tuple[str, set[str]]]) -> PRF:
    """Micro P/R/F1 over single-truth conversations: (truth label, predicted label set) per conversation.

    TP = truth in P; FP = |P - {truth}| (extra extractions); FN = truth not in P (including P empty).
    """
    tp = sum(1 for t, p in pairs if t in p)
    fp = sum(len(p - {t}) for t, p in pairs)
    fn = len(pairs) - tp
    exact = sum(1 for t, p in pairs if p == {t})
    pr, rc = ratio(tp, tp + fp), ratio(tp, len(pairs))
    f1 = 2 * pr * rc / (pr + rc) if pr and rc else (0.0 if pr is not None and rc is not None else None)
    return PRF(n=len(pairs), tp=tp, fp=fp, fn=fn, exact=exact, precision=pr, recall=rc, f1=f1,
               subset_accuracy=ratio(exact, len(pairs)))


# --- attributes ------------------------------------------------------------------------------
def norm_attribute(a: str) -> str:
    """Case, punctuation and a trailing parenthesis ignored ("Asphalt Anthems by X (Rap)" ~ "asphalt anthems by x")."""
    a = a.split("(")[0]
    return re.sub(r"[^a-z0-9]+", " ", a.lower()).strip()


_NEGATED = re.compile(r"^(not|no|non|never|no longer|anything but) ")


def same_attribute(a: str, b: str) -> bool:
    """Equal after normalising, or one contains the other as whole words ("22" vs "22 °C", "Yes" vs "yes please")."""
    x, y = norm_attribute(a), norm_attribute(b)
    if not x or not y or bool(_NEGATED.match(x)) != bool(_NEGATED.match(y)):  # "not Italian" is not "Italian"
        return False
    x, y = _NEGATED.sub("", x), _NEGATED.sub("", y)
    if x == y:
        return True
    short, long_ = sorted((x, y), key=len)
    return re.search(r"\b" + re.escape(short) + r"\b", long_) is not None


# --- maintenance -----------------------------------------------------------------------------
EXPECTED: dict[tuple[bool, str], str] = {
    (True, "equal"): "pass", (True, "negate"): "update", (True, "different"): "append",
    (False, "equal"): "pass", (False, "negate"): "update", (False, "different"): "update",
}
ACTIONS = ("pass", "update", "append", "insert", "error")  # error: the maintainer raised


def expected_action(multiple: bool, utterance: str) -> str:
    return EXPECTED[(multiple, utterance)]


class MaintenanceRow(BaseModel):
    """One maintenance decision: the truth the harness knows plus what the maintainer chose."""

    multiple: bool
    utterance: UtteranceType
    action: str
    lost: bool = False  # an update removed a stored preference that should have stayed


def is_lost(multiple: bool, utterance: str, action: str, target_is_subject: bool) -> bool:
    """Did this decision delete something the user still holds?

    equal/negate are about one stored preference (the subject: the one that conversation produced, or one
    with the truth's attribute): replacing it is fine (a rewrite or the intended update), replacing another
    stored one loses that. different on MP adds a preference, so any update loses one; on MNP the one stored
    preference is meant to be replaced.
    """
    if action != "update":
        return False
    if utterance == "different":
        return multiple
    return not target_is_subject


def maintenance_summary(rows: Sequence[MaintenanceRow]) -> dict:
    """Tallies and accuracy per (MP/MNP, utterance type), plus the paper's reduction figures."""
    groups: dict[str, dict] = {}
    for cls, mult in (("MP", True), ("MNP", False)):
        for u in ("equal", "negate", "different"):
            sel = [r for r in rows if r.multiple == mult and r.utterance == u]
            counts = {a: sum(1 for r in sel if r.action == a) for a in ACTIONS}
            exp = expected_action(mult, u)
            ok = counts[exp]
            groups[f"{cls}/{u}"] = {"n": len(sel), "counts": counts, "expected": exp, "correct": ok,
                                    "accuracy": ratio(ok, len(sel)), "lost": sum(r.lost for r in sel)}
            if cls == "MP" and u == "different":
                groups[f"{cls}/{u}"]["custom_accuracy"] = ratio(counts["append"] + counts["update"], len(sel))
    eq = [r for r in rows if r.utterance == "equal"]
    neg = [r for r in rows if r.utterance == "negate"]
    return {
        "groups": groups,
        "n": len(rows),
        "accuracy": ratio(sum(r.action == expected_action(r.multiple, r.utterance) for r in rows), len(rows)),
        # 1 - share of repeated (equal) preferences that were stored a second time
        # (an insert means nothing was stored, so it is no duplicate)
        "redundancy_reduction": None if not eq else 1 - sum(r.action == "append" for r in eq) / len(eq),
        "contradiction_reduction": ratio(sum(r.action == "update" for r in neg), len(neg)),
        "lost": sum(r.lost for r in rows),
    }


# --- retrieval -------------------------------------------------------------------------------
class RetrievalRow(BaseModel):
    """One query: relevance of the ranked gallery, n (stored prefs in the truth subcategory), dynamic-k outcome."""

    relevant: list[bool]         # ranked best first, one flag per stored preference of the user
    n: int                       # stored preferences in the ground-truth subcategory
    dynamic_hit: bool = False
    dynamic_k: int = 0


def hit_at(relevant: Sequence[bool], k: int) -> bool:
    return k > 0 and any(relevant[:k])


FIXED_K = (1, 2, 5)


def retrieval_summary(rows: Sequence[RetrievalRow], curve_max: int = 10) -> dict:
    m = len(rows)
    out = {
        "n_queries": m,
        "no_gallery_in_subcategory": sum(1 for r in rows if r.n == 0),
        "hit@n": ratio(sum(hit_at(r.relevant, r.n) for r in rows), m),
        "hit@n+1": ratio(sum(hit_at(r.relevant, r.n + 1) for r in rows), m),
        "dynamic": ratio(sum(r.dynamic_hit for r in rows), m),
        "dynamic_mean_k": ratio(sum(r.dynamic_k for r in rows), m),
        "n_distribution": {str(k): sum(1 for r in rows if r.n == k) for k in sorted({r.n for r in rows})},
    }
    for k in FIXED_K:
        out[f"hit@{k}"] = ratio(sum(hit_at(r.relevant, k) for r in rows), m)
    out["curve"] = [ratio(sum(hit_at(r.relevant, k) for r in rows), m) for k in range(1, curve_max + 1)]
    return out
