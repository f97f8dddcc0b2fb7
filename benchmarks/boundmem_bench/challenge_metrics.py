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
    polarity: str = "like"           # a stored one's from Preference.polarity (a legacy "not X" attribute: dislike)
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


def attribute_correct(stored_attribute: str, exp: Pref, stored_polarity: str = "like") -> bool:
    """The stored value is an expected spelling with the expected polarity (`stored_polarity` is the stored
    preference's polarity field; "like" with a "not X" attribute is the legacy way of writing a dislike)."""
    spellings = {norm(s) for s in (exp.attribute, *exp.accept)}
    if stored_polarity != "like":
        values = {norm(split_polarity(s)[0]) for s in (exp.attribute, *exp.accept)}
        return stored_polarity == exp.polarity and norm(stored_attribute) in values
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
                if j not in seen and attribute_correct(stored[j].attribute, expected[i], stored[j].polarity):
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
        pairs.append({"expected": i, "stored": j, "correct": attribute_correct(st.attribute, exp, st.polarity),
                      "expected_polarity": exp.polarity, "stored_polarity": _stored_polarity(st, exp)})
    out["pairs"] = pairs
    out["dislike_as_like"] = sum(1 for p in pairs if p["expected_polarity"] == "dislike" and p["stored_polarity"] == "like")
    out["stored_any"] = bool(stored)
    out["expects_none"] = not expected
    paired = {j for _, j in pair_detail(expected, stored)}
    out["extra"] = [j for j in range(len(stored)) if j not in paired]  # stored, but matching no expected preference
    return out


def _stored_polarity(st: Pref, exp: Pref) -> str:
    if st.polarity != "like":
        return st.polarity
    if norm(st.attribute) in {norm(s) for s in (exp.attribute, *exp.accept)} and exp.polarity == "like":
        return "like"  # literally an expected spelling (a vocabulary item may start with "No ...")
    return split_polarity(st.attribute)[1]


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


# --- values the user said, polarity, final states, promotion, fragments ----------
# words that carry no value of their own: a stored value made only of these says nothing the user chose
STOPWORDS = frozenset("""a an the of and or but to for in on at by from with without than then that this these those
it its is are was were be been being do does did have has had i me my mine you your yours he him his she her hers we us
our ours they them their theirs not no never nothing none don't dont doesn't isn't can't cant won't very really just
so some any all more most less much please also too kind sort type""".split())
# a value starting or ending with one of these was cut mid-phrase ("not living", "your watch", "to live")
_FRAGMENT_EDGE = frozenset("""not no never to your my his her their our its of and or but with for in on at by from
than that which who is are was be do does don't can will would should i you we they it""".split())
_LEADING_OK = frozenset({"the", "a", "an"})  # "The Guardian", "The Daily" are names


def stem(word: str) -> str:
    """A light suffix strip so "degrees" ~ "degree", "podcasts" ~ "podcast", "burgers" ~ "burger"."""
    w = word.lower().replace("'s", "").replace("’s", "")
    for suf in ("ing", "es", "ed", "s"):
        if len(w) > len(suf) + 3 and w.endswith(suf):
            return w[: -len(suf)]
    return w


def words(text: str) -> list[str]:
    return norm(text.replace("'", "").replace("’", "")).split()


def content_words(text: str) -> set[str]:
    return {stem(w) for w in words(text) if w not in STOPWORDS}


def said(value: str, user_text: str, shared: frozenset[str] = frozenset()) -> bool:
    """Every content word of the value (minus the words every listed item of its category shares, e.g.
    "degree celcius") is among the user's words, compared after a light stem."""
    need = content_words(value) - shared
    return bool(need) and need <= content_words(user_text) or (not need and norm(value) in norm(user_text))


def fabricated(stored: Sequence[Pref], expected: Sequence[Pref], user_text: str,
               closed_items: dict[str, tuple[str, ...]], listed: Optional[dict[str, tuple[str, ...]]] = None) -> list[int]:
    """Indices of stored values the user never said: a value whose content words are not all in the user's turns,
    unless it is a listed item of its category that the gold says the user's words implied (a closed category's
    item; or, given `listed`, any category's, e.g. "pasta, pizza, risotto" -> Italian).
    `closed_items` / `listed`: path -> the listed items of each closed / every detail category."""
    out = []
    for j, st in enumerate(stored):
        items = closed_items.get(st.path)
        shared = frozenset.intersection(*(frozenset(content_words(i)) for i in items)) if items and len(items) > 1 \
            else frozenset()
        value = stored_value(st)[0]
        if said(value, user_text, shared):
            continue
        items = (listed or {}).get(st.path) or items
        if items and any(norm(value) == norm(i) for i in items) and any(  # the implied item (a wrong polarity is a flip)
                e.path == st.path and attribute_correct(value, e.model_copy(update={"polarity": "like"}))
                for e in expected):
            continue
        out.append(j)
    return out


def stored_value(st: Pref) -> tuple[str, str]:
    """(value, polarity) of a stored preference: its polarity field, or a legacy "not X" attribute."""
    return (st.attribute, st.polarity) if st.polarity != "like" else split_polarity(st.attribute)


def polarity_flips(expected: Sequence[Pref], stored: Sequence[Pref]) -> int:
    """Stored preferences holding an expected value of the same category with the other polarity."""
    n = 0
    for st in stored:
        value, pol = stored_value(st)
        for e in expected:
            spellings = {norm(split_polarity(s)[0]) for s in (e.attribute, *e.accept)}
            if e.path == st.path and norm(value) in spellings and pol != e.polarity:
                n += 1
                break
    return n


def exact(expected: Sequence[Pref], stored: Sequence[Pref]) -> bool:
    """Every expected preference held with the right value and polarity, and nothing else held."""
    pairs = pair_detail(expected, stored)
    return (len(pairs) == len(expected) == len(stored)
            and all(attribute_correct(stored[j].attribute, expected[i], stored[j].polarity) for i, j in pairs))


def final_state_right(expected: Sequence[Pref], stored: Sequence[Pref]) -> bool:
    """After a change of mind: in every category the gold names (or, when it names none, in the categories held),
    each expected like is held, each expected dislike is held as a dislike or not held at all (the old like gone
    is what matters), and nothing else is held there; an empty gold means nothing may be held."""
    if not expected:
        return not stored
    paths = {e.path for e in expected}
    held = [s for s in stored if s.path in paths]
    for e in expected:
        hit = [s for s in held if attribute_correct(s.attribute, e, s.polarity)]
        if e.polarity == "like" and not hit:
            return False
    for s in held:
        if not any(attribute_correct(s.attribute, e, s.polarity) for e in expected):
            return False
    return True


def observations_right(expected: Sequence[Pref], observed: Sequence[Pref]) -> bool:
    """Every expected observation is held (any number of times) and no other observation is."""
    return (all(any(attribute_correct(o.attribute, e, o.polarity) for o in observed if o.path == e.path)
                for e in expected)
            and all(any(e.path == o.path and attribute_correct(o.attribute, e, o.polarity) for e in expected)
                    for o in observed))


def fragment(value: str, listed: Iterable[str] = ()) -> bool:
    """A value cut out of a sentence rather than named: made only of stopwords, pronouns and negation words, or
    starting/ending with a function word ("not living", "your watch", "to live"); a listed item never is."""
    if any(norm(value) == norm(i) for i in listed):
        return False
    ws = words(value)
    if not ws or all(w in STOPWORDS for w in ws):
        return True
    first, last = ws[0], ws[-1]
    return (first in _FRAGMENT_EDGE and first not in _LEADING_OK) or last in _FRAGMENT_EDGE or last in _LEADING_OK


def share(k: int, n: int) -> dict[str, Any]:
    return {"n": n, "right": k, "rate": ratio(k, n)}


# kinds whose cases the value shares are taken over
NEGATION_KINDS = ("negation", "negated")
PROMOTION_KINDS = ("repeated_choice", "mixed_choices", "single_choice", "not_evidence")


def score_case(kind: str, expected: Sequence[Pref], stored: Sequence[Pref], user_text: str,
               closed_items: dict[str, tuple[str, ...]], listed: dict[str, tuple[str, ...]],
               promoted: Optional[Sequence[Pref]] = None, observed: Optional[Sequence[Pref]] = None,
               expected_observed: Optional[Sequence[Pref]] = None) -> dict[str, Any]:
    """The value figures of one case (what `summarise_values` adds up). `user_text`: all the user's turns;
    `listed`: path -> every listed item (fragments); `promoted`/`observed`: None when the memory keeps no
    observations (those figures are then skipped)."""
    out: dict[str, Any] = {
        "kind": kind,
        "fabricated": [stored[j].attribute for j in fabricated(stored, expected, user_text, closed_items, listed)],
        "polarity_flips": polarity_flips(expected, stored), "exact": exact(expected, stored),
        "final_state_right": final_state_right(expected, stored), "stored_n": len(stored),
        "fragments": [s.attribute for s in stored if fragment(stored_value(s)[0], listed.get(s.path, ()))]}
    if promoted is not None:
        # a promotion is right when the gold expects that preference at the end of a repeated choice
        right = [p for p in promoted if any(e.path == p.path and attribute_correct(p.attribute, e, p.polarity)
                                            for e in expected)] if kind == "repeated_choice" else []
        out["promoted"] = {"n": len(promoted), "right": len(right),
                           "expected": len(expected) if kind == "repeated_choice" else 0,
                           "found": sum(1 for e in expected if any(e.path == p.path and attribute_correct(
                               p.attribute, e, p.polarity) for p in promoted)) if kind == "repeated_choice" else 0}
    if observed is not None and expected_observed is not None:
        out["observations_right"] = observations_right(expected_observed, observed)
    return out


def summarise_values(cases: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """`score_case` results of one split into the value figures; a share over no case is None."""
    def of(kinds: Sequence[str], key: str) -> dict[str, Any]:
        sel = [c for c in cases if c["kind"] in kinds]
        return share(sum(bool(c[key]) for c in sel), len(sel))

    stored_n = sum(c["stored_n"] for c in cases)
    out: dict[str, Any] = {
        "cases": len(cases), "stored": stored_n,
        "fabricated": {"n": sum(len(c["fabricated"]) for c in cases),
                       "cases": sum(1 for c in cases if c["fabricated"])},
        "polarity_flips": sum(c["polarity_flips"] for c in cases),
        "open_values_right": of(("open_value",), "exact"),
        "no_value_nothing_stored": share(sum(1 for c in cases if c["kind"] == "no_value" and not c["stored_n"]),
                                         sum(1 for c in cases if c["kind"] == "no_value")),
        "negation_right": of(NEGATION_KINDS, "exact"),
        "change_of_mind_right": of(("change_of_mind",), "final_state_right"),
        "fragments": {"n": sum(len(c["fragments"]) for c in cases), "of_stored": stored_n,
                      "rate": ratio(sum(len(c["fragments"]) for c in cases), stored_n)},
    }
    pro = [c for c in cases if c["kind"] in PROMOTION_KINDS and "promoted" in c]
    if pro:
        n, right = sum(c["promoted"]["n"] for c in pro), sum(c["promoted"]["right"] for c in pro)
        exp, found = sum(c["promoted"]["expected"] for c in pro), sum(c["promoted"]["found"] for c in pro)
        wrong_kind = [c for c in pro if c["kind"] != "repeated_choice" and c["promoted"]["n"]]
        out["promotion"] = {"promoted": n, "right": right, "precision": ratio(right, n), "expected": exp,
                            "found": found, "recall": ratio(found, exp),
                            "single_or_mixed_promoted": sum(1 for c in wrong_kind if c["kind"] in ("single_choice", "mixed_choices")),
                            "not_evidence_promoted": sum(1 for c in wrong_kind if c["kind"] == "not_evidence")}
        obs = [c for c in pro if "observations_right" in c]
        out["observations_right"] = share(sum(c["observations_right"] for c in obs), len(obs))
    else:
        out["promotion"] = None  # the memory keeps no observations: not measured
    return out
