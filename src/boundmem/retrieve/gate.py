"""The recall gate: of the preferences closest to a request, only those that would change the answer.

Cosine top-k returns k preferences for every request, also for "what's the weather?" or "call Anna", and a fixed
cosine cutoff cannot tell those apart from "find me a place for dinner", whose relevant memory ("Favorite cuisine:
Italian") shares hardly a word with it. So each candidate hit is scored by a small logistic model over features of
the request and of the hit, and kept when its probability reaches the model's threshold:

- the request: what the request rules say (a request for advice, a recommendation or a task; a question about the
  user's own preferences or past; small talk, which is declined before anything else), whether it names an explicit
  setting (a number, "turn off ...", a value of the category's list), its length;
- the hit: its cosine to the stored preference's enriched text, the margin to the next hit and the gap to the top,
  the request's score for the hit's detail category in the schema's category index (`category_index.py`:
  its name, description and example phrasings) and how far that is from the best category, the similarity to the
  subcategory's prototype, whether the request names the category's domain ("music", "parking").

The rules are injected (`cues`; `Memory` passes CAIM's request rules), so this module knows no rule text. Two
models are package data, written by `boundmem_bench.train.recall_gate` from request sets written for them, with
held-out users, requests and schemas they never saw: `data/recall_gate.json`, calibrated on the in-car and smart-home
schemas' own requests (it adds a request model and per-subcategory centroids of those requests), and
`data/recall_gate_transfer.json` for any other schema (an operator's own): its features read only the schema's own
texts (names, descriptions, values, `applies_to`) and the user's stored items, and its threshold comes from
leave-one-schema-out scores, so it holds on a schema it was not calibrated on. `GateModel.for_schema` picks.

Around the model, two rules: a command that names its own value ("play Metallica") gets only a stored item that
constrains that value (`own_value.py`), and a request of a kind a category's `applies_to` names ("take me to the
airport": routing) also gets that category's items (`implied.py`). Passing hits are ordered by probability, which is
also what puts "Favorite genres" before "Favorite podcast shows" for "put on some music": `k` is only a cap.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from ..errors import ConfigError
from .category_index import CategoryIndex
from .cues import EXPLICIT, NUMBER, CueReader, RequestCues, no_cues
from .implied import ImpliedNeeds
from .own_value import OwnValueRule
from ..models import Preference, RecallHit
from ..schema.model import Schema

FEATURES = (
    "cosine", "margin_next", "gap_top", "is_top", "category", "category_gap", "category_best_held", "subcategory",
    "asks_for", "asks_for_gap", "domain_named", "value_named", "request", "about_self", "explicit", "number", "length",
    "need", "learned", "learned_gap", "need_specified", "asks_best_held", "dislike",
)
# what a request about a category sounds like, for any schema ("find me restaurant", "adjust climate control")
ASK_FRAMES = ("{}", "I want {}", "find me {}", "recommend {}", "adjust the {}", "play {}", "set the {} I like")
BUNDLED = "recall_gate.json"
BUNDLED_TRANSFER = "recall_gate_transfer.json"


@dataclass(frozen=True)
class GateModel:
    """Logistic weights over `features`, the probability a hit must reach, and what it was trained on."""

    features: tuple[str, ...]
    w: np.ndarray
    b: float
    threshold: float
    mean: np.ndarray = field(default_factory=lambda: np.zeros(0))
    scale: np.ndarray = field(default_factory=lambda: np.ones(0))
    trained_on: str = ""
    need_w: np.ndarray = field(default_factory=lambda: np.zeros(0))   # over the request's embedding: does it
    need_b: float = 0.0                                               # need preference memory at all?
    # per schema name and subcategory ("main/sub"): the mean embedding of the training requests its preferences
    # answer; a schema without any reads the generic "asks_for" score in their place
    centroids: dict = field(default_factory=dict)

    def probability(self, X: np.ndarray) -> np.ndarray:
        Z = (X - self.mean) / self.scale if len(self.mean) else X
        return 1.0 / (1.0 + np.exp(-(Z @ self.w + self.b)))

    def need(self, q: np.ndarray) -> float:
        """The request model's probability that a request (its embedding) needs preference memory at all."""
        if not len(self.need_w) or len(self.need_w) != len(q):
            return 0.5
        return float(1.0 / (1.0 + np.exp(-(float(np.asarray(q, float) @ self.need_w) + self.need_b))))

    def to_json(self) -> dict:
        return {"features": list(self.features), "w": [round(float(v), 6) for v in self.w], "b": round(self.b, 6),
                "threshold": round(self.threshold, 6), "mean": [round(float(v), 6) for v in self.mean],
                "scale": [round(float(v), 6) for v in self.scale], "trained_on": self.trained_on,
                "need_w": [round(float(v), 5) for v in self.need_w], "need_b": round(self.need_b, 6),
                "centroids": {n: {k: [round(float(x), 4) for x in v] for k, v in c.items()}
                              for n, c in self.centroids.items()}}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")

    @classmethod
    def from_json(cls, data: dict, where: str = "recall gate") -> "GateModel":
        try:
            feats = tuple(data["features"])
            m = cls(features=feats, w=np.asarray(data["w"], float), b=float(data["b"]),
                    threshold=float(data["threshold"]), mean=np.asarray(data.get("mean", []), float),
                    scale=np.asarray(data.get("scale", []), float), trained_on=str(data.get("trained_on", "")),
                    need_w=np.asarray(data.get("need_w", []), float), need_b=float(data.get("need_b", 0.0)),
                    centroids={str(n): {str(k): np.asarray(v, float) for k, v in c.items()}
                               for n, c in dict(data.get("centroids", {})).items()})
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(f"{where}: not a recall gate model ({type(e).__name__}: {e})") from None
        unknown = [f for f in feats if f not in FEATURES]
        if unknown or len(m.w) != len(feats) or (len(m.mean) and len(m.mean) != len(feats)):
            raise ConfigError(f"{where}: features {unknown or feats} do not match the weights or this version's features")
        return m

    @classmethod
    def load(cls, path: str | Path) -> "GateModel":
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")), str(path))

    @classmethod
    def bundled(cls, name: str = BUNDLED) -> "GateModel":
        text = resources.files("boundmem.retrieve").joinpath("data", name).read_text(encoding="utf-8")
        return cls.from_json(json.loads(text), f"boundmem/retrieve/data/{name}")

    def knows(self, schema: Schema) -> bool:
        """Whether this model was calibrated on requests of `schema` itself: it holds centroids for the schema's
        name, each of a subcategory the schema has (an operator's schema that only shares the name is not known)."""
        cents = self.centroids.get(schema.name)
        if not cents:
            return False
        subs = {f"{r.path.main}/{r.path.sub}" for r in schema.details()}
        return set(cents) <= subs

    @classmethod
    def for_schema(cls, schema: Schema) -> "GateModel":
        """The bundled model calibrated on this schema's own requests where there is one (in-car, smart home);
        for any other schema the one whose features read only the schema's texts and the user's items, calibrated
        with whole schemas held out, so its threshold holds on a schema it never saw."""
        own = cls.bundled()
        return own if own.knows(schema) else cls.bundled(BUNDLED_TRANSFER)


_WORD = re.compile(r"[a-z0-9]+")
# words of category names that say nothing about a domain ("Preferred Type of Charging while traveling")
_GENERIC = frozenset("""a an and at being e f for general in interest of on or other points preference preferences
preferred favorite favourite specific the to type types while when with willingness need price sensitivity priority
tolerance desired range settings setting vehicle comfort everyday public time direction method mode service source
local extra pay paid level station""".split())
def _stem(w: str) -> str:
    """A crude stem: the first four letters of a longer word ("routing", "route" -> "rout"; "parking" -> "park")."""
    return w[:4] if len(w) > 4 else w


def _words(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text.lower()) if len(w) > 2}


class RecallGate:
    """Scores candidate hits for a request and keeps those the model says would change the answer."""

    def __init__(self, schema: Schema, embedder, cues: CueReader = no_cues, model: Optional[GateModel] = None,
                 protos: Optional[Callable[[], dict]] = None):
        self.schema, self.embedder, self.cues = schema, embedder, cues
        self._model = model
        self.index = CategoryIndex(schema, embedder)
        self._col = {p: i for i, p in enumerate(self.index.paths)}
        self._protos = protos or (lambda: {})
        self._domain = {p: _words(" ".join((r.sub.name, r.detail.name))) - _GENERIC
                        for p, r in zip(self.index.paths, self.index.refs)}
        self._values = {p: [v.lower() for v in r.detail.attributes if len(v) > 2]
                        for p, r in zip(self.index.paths, self.index.refs)}
        self._asks: Optional[tuple[np.ndarray, np.ndarray]] = None
        self.own_value = OwnValueRule(schema)
        self.implied = ImpliedNeeds(schema)

    def _ask_scores(self, q: np.ndarray) -> np.ndarray:
        """Per detail category: the best cosine of the request to what a request about it sounds like (its own and
        its subcategory's name in a few frames, and the subcategory's description)."""
        if self._asks is None:
            texts, owner = [], []
            for i, r in enumerate(self.index.refs):
                for name in dict.fromkeys((r.detail.name.lower(), r.sub.name.lower())):
                    for f in ASK_FRAMES:
                        texts.append(f.format(name))
                        owner.append(i)
                # the operator's own word for requests the category matters to, though they do not name it
                for t in (r.sub.description, *r.sub.applies_to, *r.detail.applies_to):
                    if t:
                        texts.append(t)
                        owner.append(i)
            E = self.embedder.embed(texts)
            owner_a = np.array(owner)
            self._asks = (E, owner_a)
        E, owner_a = self._asks
        sims = E @ np.asarray(q, E.dtype)
        out = np.full(len(self.index.refs), -1.0)
        np.maximum.at(out, owner_a, sims)
        return out

    def warm(self) -> None:
        """Embed the category texts and load the model now: a served recall runs on the event loop, where a first
        request paying for them would hold up every other request."""
        q = np.zeros(self.embedder.dim, np.float32)
        self.index.category_scores(q.reshape(1, -1))
        self._ask_scores(q)
        self._protos()
        self.model.need(q)

    @property
    def model(self) -> GateModel:
        if self._model is None:
            self._model = GateModel.for_schema(self.schema)
        return self._model

    def features(self, utterance: str, q: np.ndarray, hits: Sequence[tuple[Preference, float]],
                 cues: Optional[RequestCues] = None, need: Optional[float] = None,
                 learned: Optional[dict[str, float]] = None) -> np.ndarray:
        """(hits, len(FEATURES)) in FEATURES order, for hits sorted by cosine, best first (`need`: the request
        model's probability, `learned`: the request's cosine per "main/sub" to the model's centroids, when the
        caller has them)."""
        cues = cues if cues is not None else self.cues(utterance)
        n = len(hits)
        X = np.zeros((n, len(FEATURES)), np.float64)
        if not n:
            return X
        text = " ".join(utterance.lower().split())
        words = _words(text)
        cat = self.index.category_scores(np.asarray(q, np.float32).reshape(1, -1))[0]
        best_cat = float(cat.max()) if len(cat) else 0.0
        asks = self._ask_scores(q)
        best_ask = float(asks.max()) if len(asks) else 0.0
        held = [self._col.get(str(p.path), -1) for p, _ in hits]
        held_cats = [cat[c] if c >= 0 else -1.0 for c in held]
        best_held = max(held_cats)
        held_asks = [asks[c] if c >= 0 else -1.0 for c in held]
        best_held_ask = max(held_asks)
        need = self.model.need(q) if need is None else need
        if learned is None:
            cents = self.model.centroids.get(self.schema.name, {})
            learned = {k: float(np.asarray(v) @ q) for k, v in cents.items() if len(v) == len(q)}
        best_learned = max(learned.values()) if learned else None
        protos = self._protos()
        cos = [s for _, s in hits]
        request = 1.0 if cues.request else 0.0
        about_self = 1.0 if cues.about_self else 0.0
        explicit = 1.0 if EXPLICIT.search(text) else 0.0
        number = 1.0 if NUMBER.search(text) else 0.0
        length = min(len(text.split()), 30) / 10.0
        for i, (p, s) in enumerate(hits):
            path = str(p.path)
            c = held_cats[i]
            proto = protos.get((p.path.main, p.path.sub))
            values = self._values.get(path, []) + [p.attribute.lower()]
            a = asks[held[i]] if held[i] >= 0 else -1.0
            sub = f"{p.path.main}/{p.path.sub}"
            vn = 1.0 if any(re.search(r"(?<!\w)" + re.escape(v) + r"(?!\w)", text) for v in values) else 0.0
            lv, lg = (learned.get(sub, 0.0), learned.get(sub, 0.0) - best_learned) if best_learned is not None \
                else (a, a - best_ask)
            X[i] = (s, s - cos[i + 1] if i + 1 < n else s, cos[0] - s, 1.0 if i == 0 else 0.0, c, c - best_cat,
                    1.0 if c >= best_held else 0.0, float(proto @ q) if proto is not None else 0.0, a, a - best_ask,
                    1.0 if words & self._domain.get(path, set()) else 0.0,
                    vn,
                    request, about_self, explicit, number, length, need, lv, lg,
                    need * max(explicit, number, vn), 1.0 if a >= best_held_ask else 0.0,
                    1.0 if p.polarity == "dislike" else 0.0)
        return X

    def select(self, utterance: str, q: np.ndarray, hits: Sequence[tuple[Preference, float]],
               k: Optional[int]) -> list[RecallHit]:
        """The hits that pass, most probable first, at most `k` (None: every passing hit of the best one's
        subcategory, the gate's dynamic k)."""
        cues = self.cues(utterance)
        if cues.small_talk or not hits:
            return []
        X = self.features(utterance, q, hits, cues)
        proba = self.model.probability(X[:, [FEATURES.index(f) for f in self.model.features]])
        prefs = [p for p, _ in hits]
        # a stored item that constrains a value a command names comes first, whatever the model says; a command
        # naming its own value gets nothing else (own_value.py)
        first = [i for i in np.argsort(-proba, kind="stable") if self.own_value.constrains(utterance, prefs[i])]
        moot = self.own_value.drop(utterance, prefs, self._closest_subcategory(q))
        # after what the model passes: an item whose category's applies_to names the request's kind (a route: the
        # road-type avoidance; implied.py)
        passed = [i for i in np.argsort(-proba, kind="stable")
                  if proba[i] >= self.model.threshold and i not in moot and i not in first]
        implied = [i for i in np.argsort(-proba, kind="stable") if i not in first and i not in moot
                   and i not in passed and self.implied.applies(utterance, prefs[i])]
        order = first + passed + implied
        if k is None and order:
            top = hits[order[0]][0].path
            order = [i for i in order if (hits[i][0].path.main, hits[i][0].path.sub) == (top.main, top.sub)]
        elif k is not None:
            order = order[:k]
        return [RecallHit(preference=hits[i][0], score=hits[i][1], relevance=round(float(proba[i]), 4),
                          why=("constrains the value the request names; " if i in first
                               else "the category applies to this kind of request; " if i in implied else "")
                          + self._why(X[i], proba[i], cues)) for i in order]

    def _closest_subcategory(self, q: np.ndarray) -> Optional[str]:
        cat = self.index.category_scores(np.asarray(q, np.float32).reshape(1, -1))[0]
        if not len(cat):
            return None
        path = self.index.refs[int(np.argmax(cat))].path
        return f"{path.main}/{path.sub}"

    def _why(self, x: np.ndarray, p: float, cues: RequestCues) -> str:
        """The request rule that fired (if any) and the features that pushed this hit up most."""
        m = self.model
        cols = [FEATURES.index(f) for f in m.features]
        z = (x[cols] - m.mean) / m.scale if len(m.mean) else x[cols]
        contrib = z * m.w
        parts = [f"p={p:.2f}"]
        if cues.request:
            parts.append(f"request {cues.request!r}")
        if cues.about_self:
            parts.append(f"about the user {cues.about_self!r}")
        for j in np.argsort(-contrib)[:2]:
            f = m.features[j]
            if contrib[j] <= 0 or f in ("request", "about_self"):
                continue
            parts.append(_LABEL.get(f, f) + (f" {x[cols][j]:.2f}" if f in _VALUED else ""))
        return "; ".join(parts)


_VALUED = {"cosine", "margin_next", "gap_top", "category", "category_gap", "subcategory", "asks_for", "need", "learned"}
_LABEL = {"cosine": "cosine", "margin_next": "margin to the next hit", "gap_top": "gap to the top hit",
          "is_top": "top hit", "category": "category match", "category_gap": "category gap",
          "category_best_held": "best category the user holds", "subcategory": "subcategory match",
          "asks_for": "asks for the category", "asks_for_gap": "the category asked for most", "need": "request model",
          "learned": "like requests of the category", "learned_gap": "the category such requests need most",
          "need_specified": "needed, though the request says what it wants",
          "domain_named": "names the category's domain", "value_named": "names a value of the category",
          "explicit": "explicit command", "number": "names a number", "length": "length",
          "asks_best_held": "the held category asked for most", "dislike": "a dislike"}
