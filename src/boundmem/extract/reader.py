"""The default extractor: the trained reader (offline, CPU, ONNX), no rules.

Each user turn is read with the assistant turn before it (an answer to "which charging network do you use?" is
"Ionity, always"). The reader tags value spans in the user's own words and says, per span, its polarity, whether it
is a lasting preference (stated), a one-off choice (observed) or no evidence (a hypothetical, a hedge, a question,
a corrected-away value), and whose it is. Here those readings become candidates:

- the category is the one of the operator's schema whose description the span's vector is closest to, against a
  learned "none of these" (so any schema is read without retraining), scored against the whole schema so a span
  about an opted-out category is dropped rather than filed under a neighbour;
- the value is the user's words (open categories) or the listed item the span's vector picks out of the category's
  items (closed ones), or the listed item the span names; with neither, nothing is stored;
- another person's tastes and spans that are not evidence are never stored; a value the user corrects away later in
  the conversation ("no, I said Aldi, not Lidl") is dropped; a pronoun ("love it") takes the value it refers to,
  from earlier in the turn or from the assistant's question.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..models import Candidate, Conversation
from ..schema.display import is_avoidance
from ..schema.model import DetailRef, Schema
from . import reader_input as RI
from .base import Extraction
from .reader_model import ReaderModel, SpanReading, _softmax
from . import speech
from .speech import is_english

# Words that name no value on their own. A span made only of them is a reference ("love *it*", "not *that one*"):
# the value it refers to is found instead, or nothing is stored (a value is never "to it").
FUNCTION_WORDS = frozenset({"it", "that", "this", "them", "those", "these", "they", "one", "ones", "there", "him",
                            "her", "em", "the", "a", "an", "to", "of", "in", "on", "at", "for", "with", "and", "or",
                            "my", "your", "his", "its", "their", "our", "some", "any", "stuff", "thing", "things",
                            "kind", "sort", "type", "i", "me", "you", "we", "be", "is", "was", "so", "too", "very"})
_TRIM = " \t\n,.;:!?\"'()[]{}-\u2013\u2014\u2026"


@dataclass(frozen=True)
class _Labels:
    """One schema's category and item vectors (the run-time embedder over the operator's descriptions)."""

    refs: tuple[DetailRef, ...]
    cats: np.ndarray
    items: dict[str, tuple[tuple[str, ...], np.ndarray]]


@dataclass
class _Read:
    """One span's decision: where it is, what it would store, and whether it may be stored."""

    turn: int
    start: int
    ref: DetailRef
    value: str
    polarity: str
    evidence: str       # stated / observed / none
    self_held: bool
    confidence: float
    span: str


class ReaderExtractor:
    """Reads conversations with the trained reader; `embedder` scores spans against the schema's descriptions."""

    def __init__(self, embedder, model: Optional[ReaderModel] = None, cache_size: int = 32):
        self.embedder = embedder
        self.model = model or ReaderModel()
        self._labels: OrderedDict[str, _Labels] = OrderedDict()
        self._lock = threading.Lock()
        self._cache_size = cache_size
        self.asked = self.distinct = 0   # inputs the reading steps asked for; distinct ones among them (per call)

    def warm(self, schema: Schema) -> None:
        speech.warm()   # the language identifier every turn passes (is_english), loaded once under its lock
        self.model.warm()
        self._labels_for(schema.unpruned)

    def extract(self, conversation: Conversation, schema: Schema) -> Extraction:
        return Extraction(candidates=self.extract_many([conversation], schema)[0])

    def extract_many(self, conversations: Sequence[Conversation], schema: Schema) -> list[list[Candidate]]:
        labels = self._labels_for(schema.unpruned)
        units = []   # (conversation, turn index, context, text)
        for c, conv in enumerate(conversations):
            before = ""
            for i, turn in enumerate(conv.turns):
                if turn.role == "assistant":
                    before = turn.text
                    continue
                if is_english(turn.text):
                    units.append((c, i, before, turn.text))
                before = ""
        reader = _Readings(self.model)
        readings = reader.read([(u[2], u[3]) for u in units])
        per_conv: list[list[_Read]] = [[] for _ in conversations]
        for (c, i, ctx, text), spans in zip(units, readings):
            per_conv[c] += self._decide(labels, i, ctx, spans, reader)
        with self._lock:
            self.asked += reader.asked
            self.distinct += len(reader.memo)
        return [self._candidates(reads, conv, schema) for reads, conv in zip(per_conv, conversations)]

    # --- one turn ----------------------------------------------------------------------------------------------
    def _decide(self, labels: _Labels, turn: int, context: str, spans: list[SpanReading],
                reader: "_Readings") -> list[_Read]:
        s = self.model.settings
        out: list[_Read] = []
        for r in spans:
            if not r.whole_turn and r.value < s.span:
                continue
            probs = _softmax(np.append(s.category_scale * (labels.cats @ r.category), s.category_none))
            best = int(probs[:-1].argmax())
            if probs[best] < (s.implied if r.whole_turn else s.category):
                continue
            ref = labels.refs[best]
            value = self._value(labels, ref, r, out, context, reader)
            if value is None:
                continue
            evidence = RI.EVIDENCE[int(r.evidence.argmax())]
            if evidence != "none" and r.evidence[RI.EVIDENCE.index(evidence)] - r.evidence[2] < s.evidence:
                evidence = "none"
            polarity = RI.POLARITY[int(r.polarity.argmax())]
            if s.avoidance_as_sentiment and is_avoidance(ref.detail.name) and polarity != "indifferent":
                polarity = "like" if polarity == "dislike" else "dislike"   # disliking highways is avoiding them
            out.append(_Read(turn, r.start, ref, value, polarity, evidence,
                             r.holder[1] <= s.other, round(float(probs[best]) * (1.0 if r.whole_turn else r.value), 4),
                             r.text))
        return out

    def _value(self, labels: _Labels, ref: DetailRef, r: SpanReading, earlier: list[_Read], context: str,
               reader: "_Readings") -> Optional[str]:
        """The value to store: a listed item (closed categories) or the user's words (open ones); None: nothing."""
        s = self.model.settings
        if ref.detail.name in labels.items:
            names, vecs = labels.items[ref.detail.name]
            named = None if r.whole_turn else _named_item(names, r.text)
            if named is not None:   # the words name an item ("22 degrees"): that one, whatever the head guesses
                return named
            probs = _softmax(np.append(s.item_scale * (vecs @ r.item), s.item_none))
            best = int(probs[:-1].argmax())
            return names[best] if probs[best] >= (s.implied if r.whole_turn else s.item) else None
        if r.whole_turn:
            return None
        text = r.text.strip(_TRIM)
        if _refers(text):
            return self._referent(ref, earlier, context, reader)
        # a listed example the words name ("Italian food" -> "Italian", "jazz" -> "Jazz"), else the words as said
        return (_named_item(ref.detail.attributes, text) or text) if text else None

    def _referent(self, ref: DetailRef, earlier: list[_Read], context: str, reader: "_Readings") -> Optional[str]:
        """What a pronoun stands for: the last value of its category earlier in the turn, else the one the assistant's
        turn names (read as if said, so the same model finds it; once per call, however many pronouns point at it)."""
        same = [e.value for e in earlier if e.ref.path == ref.path and not _refers(e.value)]
        if same:
            return same[-1]
        if not context:
            return None
        for r in reader.read([("", context)])[0]:
            if not r.whole_turn and r.value >= self.model.settings.span:
                value = r.text.strip(_TRIM)
                if value and not _refers(value):
                    return value
        return None

    # --- one conversation --------------------------------------------------------------------------------------
    def _candidates(self, reads: list[_Read], conv: Conversation, schema: Schema) -> list[Candidate]:
        """Stored evidence of the speaker, minus what is corrected away later, one value per single-valued category
        and polarity (the last said: "feet, not face" keeps both), one candidate per category, value and polarity."""
        kept: list[_Read] = []
        for r in reads:
            if r.evidence == "none":
                key = (r.ref.path, r.value.casefold())
                kept = [k for k in kept if (k.ref.path, k.value.casefold()) != key]   # corrected away
                continue
            if r.self_held and schema.allows(r.ref.path):
                kept.append(r)
        best: dict[tuple, _Read] = {}
        last: dict[tuple, _Read] = {}
        for r in kept:
            if not r.ref.detail.multiple and r.evidence == "stated":
                last[(str(r.ref.path), r.polarity)] = r
        for r in kept:
            single = last.get((str(r.ref.path), r.polarity))
            if single is not None and r.evidence == "stated" and r is not single:
                continue
            key = (str(r.ref.path), r.value.casefold(), r.polarity)
            prev = best.get(key)
            if prev is None or (r.evidence == "stated", r.confidence) > (prev.evidence == "stated", prev.confidence):
                best[key] = r
        return [Candidate(path=r.ref.path, attribute=r.value[:200], sentence=conv.turns[r.turn].text,
                          confidence=min(1.0, r.confidence), cue=f"reader: {r.evidence}", polarity=r.polarity,
                          evidence=r.evidence, span=r.span) for r in best.values()]

    def _labels_for(self, schema: Schema) -> _Labels:
        texts = [RI.category_text(r) + "|" + "|".join(r.detail.attributes) for r in schema.details()]
        key = hashlib.sha256("\n".join(texts).encode()).hexdigest()
        with self._lock:
            hit = self._labels.get(key)
            if hit is not None:
                self._labels.move_to_end(key)
                return hit
        refs = tuple(schema.details())
        cats = np.asarray(self.embedder.embed([RI.category_text(r) for r in refs]), np.float32)
        items = {}
        for r in refs:
            if r.detail.value_kind == "closed" and r.detail.attributes:
                names = tuple(r.detail.attributes)
                items[r.detail.name] = (names, np.asarray(self.embedder.embed([RI.item_text(r, a) for a in names]),
                                                          np.float32))
        labels = _Labels(refs, cats, items)
        with self._lock:
            self._labels[key] = labels
            while len(self._labels) > self._cache_size:
                self._labels.popitem(last=False)
        return labels


class _Readings:
    """The reader's passes of one extract call: each distinct (context, text) input is read once, in one batch per
    step, however often the steps ask for it (a turn repeated in a batch, an assistant turn several pronouns point
    at): one forward pass per distinct text."""

    def __init__(self, model: ReaderModel):
        self.model = model
        self.memo: dict[tuple[str, str], list[SpanReading]] = {}
        self.asked = 0

    def read(self, inputs: list[tuple[str, str]]) -> list[list[SpanReading]]:
        self.asked += len(inputs)
        missing = [x for x in dict.fromkeys(inputs) if x not in self.memo]
        if missing:
            self.memo.update(zip(missing, self.model.read_many(missing)))
        return [self.memo[x] for x in inputs]


def _refers(text: str) -> bool:
    """Whether the words only point at a value said elsewhere."""
    return all(w.strip(_TRIM).casefold() in FUNCTION_WORDS for w in text.split())


def _words(text: str) -> list[str]:
    """Lower-case words, a plural's "s" and surrounding punctuation dropped; numbers said in words become digits."""
    from text_to_num import alpha2digit

    out = []
    for w in alpha2digit(text.casefold(), "en", threshold=0).replace("-", " ").split():
        w = w.strip(_TRIM)
        out.append(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return [w for w in out if w]


def _named_item(names: Sequence[str], span: str) -> Optional[str]:
    """The one listed item the span names when the item head is unsure: the same number ("19 degrees", "nineteen"
    -> "19 degree Celcius"), or every word of the item's name ("highways" -> "Highways (motorways)")."""
    said = set(_words(span))
    numbers = {w for w in said if w.isdigit()}
    hits = []
    for name in names:
        words = _words(name.split("(")[0])
        item_numbers = {w for w in words if w.isdigit()}
        if numbers and item_numbers:
            if item_numbers <= numbers:
                hits.append(name)
        elif words and not item_numbers and all(w in said for w in words) and len("".join(words)) > 2:
            hits.append(name)
    return hits[0] if len(hits) == 1 else None
