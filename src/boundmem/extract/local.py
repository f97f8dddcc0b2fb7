"""The default extractor: offline, CPU, bundled MiniLM, no LLM.

User turns are embedded once (one batch per call, or per batch of conversations in
`extract_many`); assistant text is never a source. Each embedded turn gets a best detail
category and a score, from one of two scorers:

* the trained head (`head.py`) when the schema is the bundled in-car schema or a pruned
  version of it: a softmax over all its categories plus "no lasting preference", with a
  boost for vocabulary hits. Because it still scores opted-out categories, a turn about an
  opted-out topic is dropped rather than reinterpreted;
* zero-shot otherwise: cosine to category prototypes (name, description, examples) plus
  vocabulary hits, gated by an explicit preference cue, since there is no "none" class.

The MiniLM forward pass is nearly all of the cost, and most turns ("Thanks!", "Navigate to the
airport.") can never be picked, so turns that cannot yield a preference are not embedded:

* zero-shot: a turn without a preference cue can never be picked (infinite floor), so it is
  skipped outright; this changes no result;
* head: a learned turn gate (`turn_gate.py`), a logistic regression over hashed n-grams, the cue
  and vocabulary hits, distilled from the head and set to keep 99.5% of the turns the full
  extractor picks (training users, out of fold). A rejected turn gets no embedding and no score,
  exactly as if the head had scored it below its floor. On the CarMem test split it embeds
  about 63% of user turns and returns the same candidates for all 500 conversations.
  `gate=None` embeds every turn.

A turn without a preference cue ("Set the lighting to blue") is treated as a possible one-off
command: only proper-name vocabulary (brands, stations) boosts it, and it must clear `bare`.
Per conversation the best qualifying turn must clear `first`; any other must clear the much
higher `further`, so a conversation yields at most `max_candidates` preferences. A turn whose
best category is not in the user's schema uses up its rank and yields nothing.

The attribute is the category's vocabulary item named in the sentence, else the nearest one by
embedding if close enough, else a short phrase cut from the sentence; `sentence` is the user turn.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..models import Candidate, Conversation
from ..schema.model import Schema
from .category_index import CategoryIndex, fingerprint
from .head import TrainedHead, bundled_head
from .phrasing import short_phrase, states_preference
from .turn_gate import TurnGate, bundled_gate
from .vocabulary import literal_attribute

_UNSET = object()
GATE_BY_DEFAULT = True


@dataclass(frozen=True)
class ZeroShotRule:
    """Thresholds for schemas without a trained head (cosine scale)."""

    first: float = 0.42
    further: float = 0.62
    vocab_boost: float = 0.15
    attribute_min: float = 0.55   # nearest vocabulary item is used only this close, else a phrase


@dataclass
class _Scored:
    turn: int          # index into the batch's user turns
    row: int           # index into the batch's embeddings (only turns that passed the gate are embedded)
    category: Optional[int]   # index into index.refs; None = best category is not in this schema
    score: float
    floor: float       # the score this turn needs to be picked at all


class LocalExtractor:
    """`head`: a TrainedHead, None for zero-shot only, or (default) the bundled in-car head.
    `common_weight`: weight of common-word vocabulary hits relative to proper names (cued turns).
    `gate`: a TurnGate for the head's turns, None to embed every turn, or (default) the bundled
    gate when the head is the bundled one."""

    def __init__(self, embedder, head: Optional[TrainedHead] | object = _UNSET, zero_shot: ZeroShotRule = ZeroShotRule(),
                 max_candidates: int = 2, cache_size: int = 32, common_weight: float = 0.5,
                 gate: Optional[TurnGate] | object = _UNSET):
        self.embedder = embedder
        self.head = bundled_head() if head is _UNSET else head
        if gate is _UNSET:   # the bundled gate was distilled from the bundled head: only with it
            gate = bundled_gate() if head is _UNSET and GATE_BY_DEFAULT else None
        if gate is not None and not gate.fits(self.head):
            raise ValueError("the turn gate was trained for another head (its vocabulary features would not line up)")
        self.gate: Optional[TurnGate] = gate
        self.zero_shot = zero_shot
        self.max_candidates = max_candidates
        self.common_weight = common_weight
        self._cache: OrderedDict[str, CategoryIndex] = OrderedDict()
        self._by_id: dict[int, tuple[Schema, CategoryIndex]] = {}
        self._cache_size = cache_size
        self._lock = threading.Lock()

    # --- public API ---------------------------------------------------------------------
    def extract(self, conversation: Conversation, schema: Schema) -> list[Candidate]:
        return self.extract_many([conversation], schema)[0]

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
        turns = [[t for _, t in c.user_sentences()] for c in conversations]
        flat = [t for ts in turns for t in ts]
        owner = [ci for ci, ts in enumerate(turns) for _ in ts]
        use_head = self._uses_head(schema, index)
        if use_head:
            cued, hits, all_hits = self._cues_and_hits(flat, index)
            keep = self._gate_mask(flat, cued, hits, all_hits)
        else:
            cued = [states_preference(t) for t in flat]
            keep = np.array(cued, bool)   # zero-shot: an uncued turn has an infinite floor, never picked
        rows = np.flatnonzero(keep)
        texts = [flat[j] for j in rows]
        X = self.embedder.embed(texts) if texts else np.zeros((0, self.embedder.dim), np.float32)
        if use_head:
            scored = self._score_head(X, rows, [cued[j] for j in rows], hits[rows], index)
        else:
            scored = self._score_zero_shot(X, rows, texts, index)
        rule = self.head.thresholds if use_head else self.zero_shot
        per: list[list[_Scored]] = [[] for _ in conversations]
        for s in scored:
            per[owner[s.turn]].append(s)
        return [[self._candidate(index, flat[s.turn], X[s.row], s) for s in self._decide(ss, rule.further)]
                for ss in per]

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
        """Head path: which turns get embedded and scored (all of them without a gate)."""
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
        P = P[:, : len(head.labels)]
        best = P.argmax(1)
        where = {p: i for i, p in enumerate(index.paths)}
        th = head.thresholds
        return [_Scored(int(rows[j]), j, where.get(head.labels[k]), float(P[j, k]),
                        th.first if cued[j] else max(th.first, th.bare))
                for j, k in enumerate(best)]

    def _score_zero_shot(self, X: np.ndarray, rows: np.ndarray, texts: list[str], index: CategoryIndex) -> list[_Scored]:
        if not texts:
            return []
        S = index.category_scores(X)
        hits = np.array([index.vocab.hits(t) for t in texts], np.float32)
        S = S + self.zero_shot.vocab_boost * hits
        out = []
        for j in range(len(texts)):
            k = int(S[j].argmax())
            out.append(_Scored(int(rows[j]), j, k, float(S[j, k]), self.zero_shot.first))
        return out

    def _decide(self, scored: list[_Scored], further: float) -> list[_Scored]:
        picks: list[_Scored] = []
        seen: set[int] = set()
        qualified = 0   # turns that cleared their floor, including ones whose category is not allowed
        for s in sorted(scored, key=lambda s: -s.score):
            if len(picks) >= self.max_candidates:
                break
            if s.score < (s.floor if qualified == 0 else max(s.floor, further)):
                continue
            qualified += 1
            if s.category is None or s.category in seen:
                continue
            seen.add(s.category)
            picks.append(s)
        return picks

    # --- attribute ----------------------------------------------------------------------
    def _candidate(self, index: CategoryIndex, sentence: str, x: np.ndarray, s: _Scored) -> Candidate:
        ref = index.refs[s.category]
        attrs = ref.detail.attributes
        value = literal_attribute(sentence, attrs) if attrs else None
        if value is None and attrs:
            near, sim = index.nearest_attribute(x, s.category)
            if near is not None and sim >= self.zero_shot.attribute_min:
                value = near
        if value is None:
            value = short_phrase(sentence)
        return Candidate(path=ref.path, attribute=value, sentence=sentence, confidence=round(min(1.0, s.score), 4))

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
