"""The default extractor: offline, CPU, bundled MiniLM, no LLM.

Two questions are answered apart, because the answer to one says little about the other:
*is this a lasting preference of the speaker?* and *which category and value is it?* "Set the
lights to blue" and "I always want blue lights" are about the same category; only the second is
lasting. "My wife loves sushi" names a cuisine, but not the speaker's.

Units. Every English user turn is read whole and, when it has several, clause by clause
(`speech.py`: wake words and fillers stripped, cut at sentence ends and where a new first-person
statement or a general rule starts: "that one then; as a rule I avoid highways"); a clause is also
cut into phrases at commas and joining words, so a second category named in the same breath
("21 degrees with the fan on low") is scored on its own. A turn that is mostly not English is not
read: storing a guess from a sentence MiniLM cannot read is worse than storing nothing.

Lasting. The lasting model (`lasting.py`: cue features for durability and ownership plus the
clause's embedding; vetoes for another person's taste, explicitly temporary wishes, bare commands
and information questions) gives each unit a probability; below its threshold a unit yields
nothing, whatever its category score. A phrase shares its clause's verdict.

Category. The trained head (`head.py`) scores the bundled in-car schema and pruned versions of it
(a softmax over all its categories plus "no lasting preference", with a boost for vocabulary hits;
it still scores opted-out categories, so a turn about an opted-out topic is dropped rather than
squeezed into a neighbour). A clearly lasting clause need not beat "no preference", only hold most
of the mass among the categories. Other schemas are scored zero-shot: cosine to category
prototypes (name, description, examples) and to the category's vocabulary values.

Choice. Per conversation the best unit needs `first`, units of other turns the much higher
`further`, clauses of the same turn only their floor ("I'm vegan and I always pay by card"). Per
category one unit speaks: of its clauses, the most clearly lasting ("lights on full right now,
but usually I keep them dim"), else the whole turn; in a multi-preference category every lasting
clause ("never pop, but I love country"). A phrase only adds a category its clause did not give.

Value. Only from the user's words: the category's vocabulary items named (also spoken numbers and
plurals; "local farms over supermarkets" keeps the first; a value named only in a part said for
now does not count), else the nearest vocabulary item if close, else the words after the
preference cue, else the phrase of the user's words closest to the category; with none of these
the candidate is dropped rather than given an invented value. A dislike is stored as
"not <value>" (or the category's "No"/"Indifferent" item), never as the value. `cue` names the
words that made it lasting (or the model's probability), and goes into the audit cause.

Cost. The MiniLM forward pass is nearly all of it, so on the head path a learned turn gate
(`turn_gate.py`, hashed n-grams) skips units that could not yield a preference; units that state
a preference outright are always read. `gate=None` embeds every unit.
"""
from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..models import Candidate, Conversation
from ..schema.model import Schema
from .base import Extraction
from .category_index import CategoryIndex, fingerprint
from .closed_values import ClosedValueModel, bundled_closed_values
from .head import TrainedHead, bundled_head
from .lasting import LastingModel, bundled_lasting, cue_of, explicit_cue, one_off_choice, vetoed
from .phrasing import content_spans, grounded_phrase, states_preference
from .stance import stance
from .stance_model import StanceModel, bundled_stance
from .values import clearly_implied, masked, names_value, open_value, statement_spans
from .speech import clauses, is_english, phrases, strip_speech
from .turn_gate import TurnGate, bundled_gate
from .vocabulary import find_term, literal_attributes, term_of

_UNSET = object()


@dataclass(frozen=True)
class ZeroShotRule:
    """Thresholds for schemas without a trained head (cosine scale)."""

    first: float = 0.30
    further: float = 0.30
    vocab_boost: float = 0.15
    lasting: float = 0.35         # the lasting model's probability a clause needs on a schema it was not trained for
    phrase: float = 0.5           # cosine a phrase of a clause needs to add a category of its own
    value_weight: float = 0.9     # weight of the closest "Detail: value" row in the category scores


@dataclass
class _Unit:
    """One piece of a user turn that is judged on its own: the whole turn, one of its clauses, or a phrase of one."""

    conv: int
    text: str        # what is embedded and scored
    turn: str        # the user turn it came from (the candidate's provenance)
    whole: bool      # the whole turn (True) or one clause of a multi-clause turn
    parent: Optional[int] = None   # a phrase: the unit (clause or one-clause turn) it was cut from


@dataclass
class _Scored:
    turn: int          # index into the batch's units
    row: int           # index into the batch's embeddings (only units that passed the gate are embedded)
    category: Optional[int]   # index into index.refs; None = best category is not in this schema
    score: float
    floor: float       # the score this unit needs to be picked at all
    lasting: float = 1.0
    category_share: Optional[float] = None   # head: the category's share of the mass once "no preference" is ruled out
    span: Optional[str] = None   # the value's words, when the category was judged with them masked (open categories)


class LocalExtractor:
    """`head`: a TrainedHead, None for zero-shot only, or (default) the bundled in-car head.
    `common_weight`: weight of common-word vocabulary hits relative to proper names (cued turns).
    `gate`: a TurnGate for the head's turns, None to embed every turn, or (default) the bundled
    gate when the head is the bundled one.
    `lasting`: a LastingModel, None to judge by category score alone, or (default) the bundled one."""

    def __init__(self, embedder, head: Optional[TrainedHead] | object = _UNSET, zero_shot: ZeroShotRule = ZeroShotRule(),
                 max_candidates: int = 3, cache_size: int = 32, common_weight: float = 0.5,
                 gate: Optional[TurnGate] | object = _UNSET, lasting: Optional[LastingModel] | object = _UNSET,
                 span_min: float = 0.45,
                 phrase_min: Optional[float] = None, closed_min: float = 0.6, closed_margin: float = 0.05,
                 observe: bool = True, closed_values: Optional[ClosedValueModel] | object = _UNSET,
                 stance_model: Optional[StanceModel] | object = _UNSET):
        self.embedder = embedder
        self.phrase_min = 0.8 if phrase_min is None else phrase_min   # category score a phrase of a clause needs
        self.span_min = span_min           # a phrase of the user's own words must be this close to the category
        self.masked_min = 0.35    # cosine of a masked statement to the category it is given (prototypes)
        self.agree_share, self.agree_min = 0.3, 0.4   # the unmasked statement: head share and prototype cosine
        self.observe = observe    # one-off choices naming a value become observed candidates
        self.sure_lasting = 0.7   # lasting probability above which the category need not beat "no preference"
        self.sure_share = 0.5     # ... but must hold this share of the mass among the categories
        self.closed_min = closed_min        # a closed category's item implied without being named: this close ...
        self.closed_margin = closed_margin  # ... and this much closer than the next item
        self.head = bundled_head() if head is _UNSET else head
        if gate is _UNSET:   # the bundled gate was distilled from the bundled head: only with it
            gate = bundled_gate() if head is _UNSET else None
        if gate is not None and not gate.fits(self.head):
            raise ValueError("the turn gate was trained for another head (its vocabulary features would not line up)")
        self.gate: Optional[TurnGate] = gate
        if lasting is _UNSET:
            lasting = bundled_lasting()
            if lasting is not None and not lasting.fits(getattr(embedder, "name", ""), embedder.dim):
                lasting = None   # trained on MiniLM vectors; another embedder is judged by category score alone
        elif lasting is not None and not lasting.fits(getattr(embedder, "name", ""), embedder.dim):
            raise ValueError(f"the lasting model was trained on {lasting.embedder!r} vectors of dimension {lasting.dim}")
        self.lasting: Optional[LastingModel] = lasting
        if closed_values is _UNSET:   # trained on MiniLM vectors of the bundled schema: only with that embedder
            closed_values = bundled_closed_values()
            if closed_values is not None and not closed_values.fits(getattr(embedder, "name", ""), embedder.dim):
                closed_values = None
        self.closed_values: Optional[ClosedValueModel] = closed_values
        if stance_model is _UNSET:
            stance_model = bundled_stance()
            if stance_model is not None and not stance_model.fits(getattr(embedder, "name", ""), embedder.dim):
                stance_model = None
        self.stance: Optional[StanceModel] = stance_model
        self.zero_shot = zero_shot
        self.max_candidates = max_candidates
        self.common_weight = common_weight
        self._cache: OrderedDict[str, CategoryIndex] = OrderedDict()
        self._by_id: dict[int, tuple[Schema, CategoryIndex]] = {}
        self._cache_size = cache_size
        self._lock = threading.Lock()

    # --- public API ---------------------------------------------------------------------
    def extract(self, conversation: Conversation, schema: Schema) -> Extraction:
        return Extraction(candidates=self.extract_many([conversation], schema)[0])

    def warm(self, schema: Schema) -> None:
        """Load the model and embed everything schema-dependent, so the first live call costs what later ones do."""
        index = self._index(schema)
        index.warm(prototypes=not self._uses_head(schema, index))
        self.embedder.embed(["warm up"])

    def extract_many(self, conversations: Sequence[Conversation], schema: Schema) -> list[list[Candidate]]:
        """Same as `extract` per conversation, with all user turns that need it embedded in one batch."""
        if not any(True for _ in schema.details()):
            return [[] for _ in conversations]
        index = self._index(schema)
        units = _units(conversations)
        flat = [u.text for u in units]
        use_head = self._uses_head(schema, index)
        if use_head:
            cued, hits, all_hits = self._cues_and_hits(flat, index)
            keep = self._gate_mask(flat, cued, hits, all_hits)
            if self.lasting is not None:   # a stated preference is always read, whatever the gate learned
                keep |= np.array([explicit_cue(t) for t in flat], bool)
        else:
            cued = [states_preference(t) for t in flat]
            # without a lasting model, an uncued clause can never be picked on a zero-shot schema: not embedded
            keep = np.ones(len(flat), bool) if self.lasting is not None else np.array(cued, bool)
        rows = np.flatnonzero(keep)
        texts = [flat[j] for j in rows]
        X = self.embedder.embed(texts) if texts else np.zeros((0, self.embedder.dim), np.float32)
        if use_head:
            scored = self._score_head(X, rows, [cued[j] for j in rows], hits[rows], index)
        else:
            scored = self._score_zero_shot(X, rows, texts, index)
        threshold = self._lasting_threshold(use_head)
        if self.lasting is not None and scored:
            self._set_lasting(scored, units, texts, X, use_head)
        if use_head and self.lasting is not None:
            self._judge_masked(scored, units, index, X)
        rule = self.head.thresholds if use_head else self.zero_shot
        per: list[list[_Scored]] = [[] for _ in conversations]
        seen: list[list[_Scored]] = [[] for _ in conversations]   # one-off choices: observations, not preferences
        for s in scored:
            if s.lasting < threshold and self.observe and s.category is not None and s.score >= s.floor \
                    and one_off_choice(units[s.turn].text, units[s.turn].turn):
                seen[units[s.turn].conv].append(s)
            if s.lasting >= threshold:
                if (s.category_share is not None and s.score < s.floor and s.lasting >= self.sure_lasting
                        and s.category_share >= self.sure_share):
                    # clearly lasting, so "no preference" is out: a clear choice among the categories decides
                    s.score = s.floor
                per[units[s.turn].conv].append(s)
        out = []
        for ss, choices in zip(per, seen):
            cands: list[Candidate] = []
            for s in self._decide(ss, rule.further, units, index.multiple,
                                  self.phrase_min if use_head else self.zero_shot.phrase):
                cands.extend(c for c in self._candidates(index, units[s.turn], X[s.row], s, use_head)
                             if (c.path, c.attribute.lower()) not in {(d.path, d.attribute.lower()) for d in cands})
            cands = cands[: self.max_candidates]
            stated = {c.path for c in cands}
            for s in sorted(choices, key=lambda s: (-s.score, units[s.turn].whole)):
                if len(cands) >= 2 * self.max_candidates:
                    break
                if index.refs[s.category].path in stated:
                    continue   # the same category stated as lasting in this conversation: that is what counts
                cands.extend(c for c in self._candidates(index, units[s.turn], X[s.row], s, use_head, evidence="observed")
                             if (c.path, c.attribute.lower()) not in {(d.path, d.attribute.lower()) for d in cands})
            out.append(cands)
        return out

    def _set_lasting(self, scored: list[_Scored], units: list[_Unit], texts: list[str], X: np.ndarray,
                     use_head: bool) -> None:
        """Each scored unit's lasting-preference probability; a phrase shares the durability of the clause it was
        cut from ("..., that's how I always like it")."""
        probs = self.lasting.probabilities(texts, X, zero_shot=not use_head)
        for s in scored:
            s.lasting = float(probs[s.row])
        of_unit = {s.turn: s.lasting for s in scored}
        for s in scored:
            parent = units[s.turn].parent
            if parent is not None:
                s.lasting = of_unit[parent] if parent in of_unit else (0.0 if vetoed(units[parent].text) else s.lasting)

    def _judge_masked(self, scored: list[_Scored], units: list[_Unit], index: CategoryIndex, X0: np.ndarray) -> None:
        """A clearly lasting statement whose category the head is unsure of, judged again with its value masked:
        "I always shop at <a chain the embedding never saw>" is about supermarkets by what is said around the name.
        Only an open category can be decided this way (its value is then the masked words), never a closed one."""
        todo: list[tuple[_Scored, str]] = []
        for s in scored:
            if s.lasting < self.sure_lasting or (s.score >= s.floor) or (s.category_share or 0) >= self.sure_share:
                continue
            span = next((v for v in statement_spans(units[s.turn].text) if names_value(v)), None)
            if span is not None:
                todo.append((s, span))
        if not todo:
            return
        X = self.embedder.embed([masked(units[s.turn].text, span) for s, span in todo])
        P = self.head.probabilities(X)
        where = {p: i for i, p in enumerate(index.paths)}
        # a name the embedding never saw can only be the value of an open category: the choice is among those
        open_cols = [k for k, label in enumerate(self.head.labels)
                     if label in where and index.refs[where[label]].detail.value_kind == "open"]
        if not open_cols:
            return
        # ... and the category's own description must agree: among the open categories, the masked statement is
        # one of the two closest to its prototypes (the head alone puts "my favourite movie is <name>" under cuisine)
        S = index.category_scores(X, self.zero_shot.value_weight)
        open_cats = np.array([where[self.head.labels[k]] for k in open_cols])
        P0 = self.head.probabilities(X0[[s.row for s, _ in todo]])
        S0 = index.category_scores(X0[[s.row for s, _ in todo]], self.zero_shot.value_weight)
        for (s, span), p, z, p0, z0 in zip(todo, P, S, P0, S0):
            cat = self._open_choice(p, z, open_cols, open_cats, where, 2, self.sure_share, self.masked_min)
            if cat is None:   # the statement as said: the head and the prototypes agree on one open category
                cat = self._open_choice(p0, z0, open_cols, open_cats, where, 1, self.agree_share, self.agree_min)
            if cat is None or not names_value(span, index.refs[cat]):
                continue
            s.category, s.score, s.span = cat, max(s.score, s.floor), span

    def _open_choice(self, p: np.ndarray, z: np.ndarray, open_cols: list[int], open_cats: np.ndarray,
                     where: dict, near: int, share_min: float, cos_min: float) -> Optional[int]:
        """The head's best open category if it holds `share_min` of the open categories' mass, is among the
        `near` open categories closest to the text by prototype cosine, and is at least `cos_min` close."""
        q = p[open_cols]
        j = int(q.argmax())
        cat = where[self.head.labels[open_cols[j]]]
        closest = open_cats[np.argsort(-z[open_cats])[:near]]
        if q[j] / max(1e-6, q.sum()) < share_min or cat not in closest or z[cat] < cos_min:
            return None
        return int(cat)

    def _lasting_threshold(self, use_head: bool) -> float:
        if self.lasting is None:
            return -np.inf
        return self.lasting.threshold if use_head else self.zero_shot.lasting

    # --- scoring ------------------------------------------------------------------------
    def _uses_head(self, schema: Schema, index: CategoryIndex) -> bool:
        """Whether the trained head scores this schema; remembered on the schema's index (content-keyed)."""
        if self.head is None:
            return False
        memo = index.head_coverage
        if memo is None or memo[0] is not self.head:
            memo = index.head_coverage = (self.head, self.head.covers(schema, self.embedder.name, self.embedder.dim))
        return memo[1]

    def _gate_mask(self, texts: list[str], cued: list[bool], hits: np.ndarray, all_hits: np.ndarray) -> np.ndarray:
        """Head path: which units get embedded and scored (all of them without a gate)."""
        if self.gate is None:
            return np.ones(len(texts), bool)
        return self.gate.passes(texts, cued, hits, all_hits)

    def _cues_and_hits(self, texts: list[str], index: CategoryIndex) -> tuple[list[bool], np.ndarray, np.ndarray]:
        """Per turn: the preference cue; the vocabulary hits per head label as the head gets them (common
        words count only in cued turns); and with every common word counted (a gate feature). One scan."""
        vocab = index.head_vocabulary(self.head)
        cued = [states_preference(t) for t in texts]
        shape = (len(texts), len(self.head.labels))
        if not texts:
            return cued, np.zeros(shape, np.float32), np.zeros(shape, np.float32)
        names, common = (np.array(x, np.float32).reshape(shape) for x in zip(*(vocab.hit_parts(t) for t in texts)))
        w = np.where(cued, self.common_weight, 0.0).astype(np.float32)[:, None]
        return cued, np.minimum(1.0, names + w * common), np.minimum(1.0, names + common)

    def _score_head(self, X: np.ndarray, rows: np.ndarray, cued: list[bool], hits: np.ndarray,
                    index: CategoryIndex) -> list[_Scored]:
        head = self.head
        if not len(rows):
            return []
        Z = head.logits(X)
        Z[:, : len(head.labels)] += head.thresholds.vocab_boost * hits
        Z -= Z.max(1, keepdims=True)
        P = np.exp(Z)
        P /= P.sum(1, keepdims=True)
        none = P[:, len(head.labels)]
        P = P[:, : len(head.labels)]
        best = P.argmax(1)
        where = {p: i for i, p in enumerate(index.paths)}
        th = head.thresholds
        return [_Scored(int(rows[j]), j, where.get(head.labels[k]), float(P[j, k]),
                        th.first if cued[j] else max(th.first, th.bare),
                        category_share=float(P[j, k] / max(1e-6, 1.0 - none[j])))
                for j, k in enumerate(best)]

    def _score_zero_shot(self, X: np.ndarray, rows: np.ndarray, texts: list[str], index: CategoryIndex) -> list[_Scored]:
        if not texts:
            return []
        S = index.category_scores(X, self.zero_shot.value_weight)
        hits = np.array([index.vocab.hits(t) for t in texts], np.float32)
        S = S + self.zero_shot.vocab_boost * hits
        out = []
        for j in range(len(texts)):
            k = int(S[j].argmax())
            out.append(_Scored(int(rows[j]), j, k, float(S[j, k]), self.zero_shot.first))
        return out

    def _decide(self, scored: list[_Scored], further: float, units: list[_Unit], multiple: set[int],
                phrase_min: float) -> list[_Scored]:
        """The units that yield candidates, best category first. The best unit needs its floor; units of
        other turns need `further` too (a conversation rarely states two lasting preferences in different
        turns), clauses of the same turn only their floor ("I'm vegan and I pay by card").
        Per category one unit speaks: of the clauses that landed there, the one most clearly lasting
        ("lights on full right now, but usually I keep them dim" -> the second), else the whole turn;
        in a multi-preference category every lasting clause of that turn ("never pop, but I love country")."""
        kept: list[_Scored] = []
        first_turn: Optional[str] = None
        for s in sorted(scored, key=lambda s: (-s.score, units[s.turn].whole)):
            u = units[s.turn]
            need = s.floor if first_turn is None or u.turn == first_turn else max(s.floor, further)
            if s.score < need:
                continue
            if first_turn is None:
                first_turn = u.turn
            if s.category is not None:
                kept.append(s)
        groups: dict[int, list[_Scored]] = {}
        for s in kept:
            if units[s.turn].parent is None:
                groups.setdefault(s.category, []).append(s)
        for s in kept:   # a phrase only adds a category its clause did not already give, and only when sure of it
            if units[s.turn].parent is not None and s.category not in groups and s.score >= phrase_min:
                groups[s.category] = [s]
        picks: list[_Scored] = []
        for cat, group in groups.items():   # insertion order = best score first
            if len(picks) >= self.max_candidates:
                break
            parts = [s for s in group if not units[s.turn].whole]
            if not parts:
                picks.append(group[0])
                continue
            best = max(parts, key=lambda s: (s.lasting, s.score))
            picks.append(best)
            if cat in multiple:
                picks.extend(s for s in parts if s is not best and units[s.turn].turn == units[best.turn].turn)
        return picks

    # --- attribute ----------------------------------------------------------------------
    def _candidates(self, index: CategoryIndex, unit: _Unit, x: np.ndarray, s: _Scored, use_head: bool,
                    evidence: str = "stated") -> list[Candidate]:
        """The candidates one picked unit yields: one per value it names (several only in a
        multi-preference category), none if no value can be grounded in the user's words."""
        ref = index.refs[s.category]
        attrs = ref.detail.attributes
        values = _preferred(unit.text, literal_attributes(unit.text, attrs)) if attrs else []
        if evidence == "observed":
            return self._observed(ref, attrs, unit, x, s, use_head, values)
        got = self._stated_values(index, ref, attrs, unit, x, s, values)
        if got is None:
            return []
        values, spans, implied = got
        # why it was judged lasting, for the audit log: the cue words, else the model's probability
        cue = cue_of(unit.text) or (f"no cue word; lasting model p={s.lasting:.2f}" if self.lasting is not None else "")
        # one value in the clause: the learned stance model says whether the clause turns against it
        dislike_p = None
        if len(values) == 1 and self.stance is not None:
            dislike_p = float(self.stance.dislike_probability([unit.text], x[None, :])[0])
        out = []
        for v in values:
            # an implied item already carries the user's stance ("doesn't matter" -> "Price is irrelevant")
            stored, polarity = (v, "like") if v == implied else stance(unit.text, ref, v, attrs, dislike_p)
            if stored is None:
                continue   # "I don't mind toll roads" in a category without an "Indifferent" item: nothing to store
            out.append(Candidate(path=ref.path, attribute=stored, sentence=unit.turn, confidence=round(min(1.0, s.score), 4),
                                 cue=cue, polarity=polarity, span=spans.get(v, "")))
        return out

    def _observed(self, ref, attrs: Sequence[str], unit: _Unit, x: np.ndarray, s: _Scored, use_head: bool,
                  values: list[str]) -> list[Candidate]:
        """A one-off choice's candidates: evidence only of a value the user named."""
        # a one-off choice is evidence only of a value the user named: "play some jazz", "22 degrees";
        # "make it warmer" adjusts, it does not choose "Warm"
        values = [v for v in values if not _comparative(unit.text, v)]
        implied = None
        if not values and attrs and ref.detail.value_kind == "closed" and use_head:
            # (only where the trained head judged the category) "navigate to the cheapest gas station" chooses "Always cheapest"; "find covered parking" chooses "Yes"
            item, p = self.closed_values.implied(ref, x) if self.closed_values is not None else (None, 0.0)
            implied = item if item is not None and p >= self.closed_values.threshold else _yes_item(attrs)
            values = [implied] if implied else []
        out = []
        for v in values if ref.detail.multiple else values[:1]:
            stored, polarity = (v, "like") if v == implied and v != _yes_item(attrs) else stance(unit.text, ref, v, attrs)
            if stored is not None:
                out.append(Candidate(path=ref.path, attribute=stored, sentence=unit.turn,
                                     confidence=round(min(1.0, s.score), 4), cue="one-off choice",
                                     polarity=polarity, evidence="observed", span=v))
        return out

    def _stated_values(self, index: CategoryIndex, ref, attrs: Sequence[str], unit: _Unit, x: np.ndarray,
                       s: _Scored, values: list[str]) -> Optional[tuple[list[str], dict[str, str], Optional[str]]]:
        """The values a lasting statement names (or implies), the user's words each was read from, and the listed
        item it implies if any; None where the statement yields nothing."""
        said = clauses(unit.turn) if unit.whole and values and self.lasting is not None else []
        if len(said) > 1:
            # a value named only in a part said for now ("on my face for now ... normally on my feet") is not the preference
            parts = [p for p in said if not vetoed(p)]
            # "... put on Jenny's Dance. That's my all-time favorite.": the lasting part points back at the value
            if len(parts) < len(said) and not any(_POINTS_BACK.search(p) for p in parts):
                values = [v for v in values if any(literal_attributes(p, [v]) for p in parts)]
                if not values:
                    return None   # the category was named only in the part said for now ("Green this time, but ...")
        if values and ref.detail.multiple and ref.detail.value_kind == "open":
            # "I don't really like Italian, I'd rather have Thai": the contrasted alternative is a value too
            for part in phrases(unit.text)[1:]:
                if _ALTERNATIVE.match(part) and not literal_attributes(part, attrs):
                    alt = open_value(part, ref, [p for p in (grounded_phrase(part), *statement_spans(part)) if p])
                    if alt and alt.lower() not in {v.lower() for v in values}:
                        values.append(alt)
        if not ref.detail.multiple:
            values = values[:1]
        if unit.parent is not None and not values:
            return None   # a phrase counts only where it names a value of the category itself
        kind = ref.detail.value_kind
        spans: dict[str, str] = {v: v for v in values}   # value -> the user's words it was read from
        implied: Optional[str] = None
        yes = _yes_item(attrs)
        if not values and attrs and kind == "closed":
            # a listed item the words imply ("I always go for the cheapest fuel" -> Always cheapest): the trained
            # closed-value model where it knows the category, else close and clearly closer than the next item
            item, p = self.closed_values.implied(ref, x) if self.closed_values is not None else (None, 0.0)
            if item is not None:
                implied = item if p >= self.closed_values.threshold else None
            elif not yes:
                j = clearly_implied(index.attribute_similarities(x, s.category), self.closed_min, self.closed_margin)
                implied = attrs[j] if j is not None else None
            if implied is not None:
                values = [implied]
                spans[implied] = ""
        if not values and yes:   # a Yes/No category: wanting the thing is the value ("I always want covered parking")
            values = [yes]
        if not values and kind == "open" and attrs:
            values = [a for a in attrs if _head_word_said(unit.text, a)][:1 if not ref.detail.multiple else 3]
            spans.update({v: v for v in values})
        if not values and kind == "open":
            # the user's own words: where the statement puts its value, right after the preference cue, else the
            # phrase most about the category
            said = [p for p in (s.span, *statement_spans(unit.text), grounded_phrase(unit.text)) if p]
            value = open_value(unit.text, ref, said)
            if value is None:
                span, sim = index.closest_span([c for c in content_spans(unit.text) if names_value(c, ref)], s.category)
                if span is not None and sim >= self.span_min:
                    value = open_value(unit.text, ref, [span])
            if value is not None:
                values = [value]
                spans[value] = value
        return values, spans, implied

    # --- per-schema cache ---------------------------------------------------------------
    def _index(self, schema: Schema) -> CategoryIndex:
        with self._lock:
            hit = self._by_id.get(id(schema))
            if hit is not None and hit[0] is schema:
                return hit[1]
        key = fingerprint(schema)
        with self._lock:
            idx = self._cache.get(key)
            if idx is not None:
                self._cache.move_to_end(key)
        if idx is None:
            idx = CategoryIndex(schema, self.embedder)
            with self._lock:
                self._cache[key] = idx
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        with self._lock:
            if len(self._by_id) > self._cache_size:
                self._by_id.clear()
            self._by_id[id(schema)] = (schema, idx)
        return idx


# a rambling turn is not cut into dozens of phrases: the cost of a turn stays bounded whatever its length
MAX_PHRASED_CHARS = 300
MAX_PHRASES = 6


def _units(conversations: Sequence[Conversation]) -> list[_Unit]:
    """Every English user turn as a whole, plus its clauses when it has more than one."""
    out: list[_Unit] = []
    for ci, c in enumerate(conversations):
        for _, turn in c.user_sentences():
            if not turn.strip() or not is_english(turn):
                continue
            parts = clauses(turn)
            if not parts:
                continue
            # the whole turn as said (punctuation kept: the head and the gate were trained on whole turns)
            out.append(_Unit(ci, strip_speech(turn), turn, True))
            heads = [len(out) - 1]
            if len(parts) > 1:
                heads = []
                for p in parts:
                    out.append(_Unit(ci, p, turn, False))
                    heads.append(len(out) - 1)
            for h in heads:   # "keep it at 21 degrees with the fan on low": each phrase may name another category
                pieces = phrases(out[h].text) if len(out[h].text) <= MAX_PHRASED_CHARS else []
                if 1 < len(pieces) <= MAX_PHRASES:
                    out.extend(_Unit(ci, q, turn, False, parent=h) for q in pieces)
    return out


_POINTS_BACK = re.compile(r"^(?:and\s+|yes\s+|oh\s+)?(?:that's|that is|it's|it is|this is|they're|they are|those are|"
                          r"that one's|that's always|it's always)\s+(?:\w+\s+){0,3}?(?:my|our|the best|always)\b", re.I)
_ALTERNATIVE = re.compile(r"^(?:but\s+)?(?:i'd rather|i would rather|id rather|rather|i prefer|i'd prefer|i love|i like|"
                          r"give me)\b", re.I)
_CONTRAST = re.compile(r"\b(?:over|rather than|instead of|more than|than|not|but not|versus|vs)\b", re.I)


def _preferred(text: str, values: list[str]) -> list[str]:
    """Values named in order, minus any that come after a contrast with an earlier one: in "local farms
    over supermarkets" only the first is the preference."""
    low = text.lower()
    out: list[str] = []
    last_end = 0
    for v in values:
        m = find_term(low[last_end:], term_of(v))
        start = last_end + m.start() if m else last_end
        if out and _CONTRAST.search(low[last_end:start]):
            break
        out.append(v)
        last_end = start + (m.end() - m.start() if m else 0)
    return out


_GENERIC_HEADS = frozenset("always rather never sometimes price shortest local preferred other favorite favourite "
                           "casual fine fast".split())


def _head_word_said(text: str, attribute: str) -> bool:
    """An open category's descriptive item said by its first word: "with a restroom" for "Restroom facilities",
    "wi-fi" for "Wi-Fi availability" (a word of five letters or more that is not a generic qualifier)."""
    words = term_of(attribute).replace("/", " ").split()
    if len(words) < 2 or len(words[0]) < 5 or words[0] in _GENERIC_HEADS:
        return False
    return bool(find_term(text.lower(), words[0]))


def _comparative(text: str, value: str) -> bool:
    """Whether the value is said only as a comparative ("warmer" for "Warm", "cheaper" for "cheap")."""
    term = term_of(value)
    m = find_term(text.lower(), term)
    return bool(m) and m.group(0).endswith("er") and not term.endswith("er")


def _yes_item(attributes: Sequence[str]) -> Optional[str]:
    """The "Yes" item of a category whose value is just whether the user wants the thing (Yes / No ... / Indifferent ...)."""
    return next((a for a in attributes if a.strip().lower() == "yes"), None)
