"""Choose at most three ontology tags for a text (a query at retrieval time, a thought at post-thinking).

Three interchangeable taggers:
- `LexiconTagger`: counts ontology keywords (whole words/phrases). No model; misses paraphrases.
- `EmbeddingTagger`: MiniLM cosine between the text and each tag's description, plus a bonus for lexicon hits.
  The "who did it" split of GVD (what the user did vs what the AI recommended) is not something cosine on a
  description sees well, so texts that are about AI recommendations/advice are steered to Recommendations/*
  tags and other texts away from them.
- `LLMTagger`: the LLM picks from the listed tags (prompt TAGS in `caim.prompts`); unknown tags are dropped,
  and a reply with no valid tag is an error.
"""
from __future__ import annotations

import re
from typing import Optional, Protocol, runtime_checkable

import numpy as np

from .llmio import CAIMLLMError, ask_json, field
from .ontology import Ontology
from .prompts import TAGS_SYSTEM, TAGS_USER

REC = "Recommendations"
# texts about what the assistant suggested; "you" in a user query addresses the assistant
_REC_CUE = re.compile(r"\b(ai (recommended|suggested|advised|taught|shared|told)|you (once )?(recommend|recommended|suggest|"
                      r"suggested|advise|advised|told|taught|shared|gave|give)|did you (recommend|suggest|tell|share|give)|"
                      r"have you (recommended|suggested|told|shared|given)|your (advice|suggestions?|recommendations?)|"
                      r"methods? (have )?you|recommended (to|me|by)|advice (did|have) you)\b", re.I)


def about_recommendation(text: str) -> bool:
    return bool(_REC_CUE.search(text))


@runtime_checkable
class Tagger(Protocol):
    def tags(self, text: str, max_tags: int = 3) -> list[str]: ...


def _kw_rx(kw: str) -> re.Pattern:
    return re.compile(r"(?<![a-z])" + re.escape(kw) + r"(?![a-z])")


class LexiconTagger:
    name = "lexicon"

    def __init__(self, ontology: Ontology):
        self.ontology = ontology
        self._rx = {i.tag: [_kw_rx(k) for k in i.keywords] for i in ontology.infos()}

    def scores(self, text: str) -> dict[str, float]:
        t = text.lower()
        rec = about_recommendation(text)
        out: dict[str, float] = {}
        for tag, rxs in self._rx.items():
            n = sum(1 for r in rxs if r.search(t))
            if not n:
                continue
            if tag.startswith(REC + "/") != rec:
                n *= 0.25
            out[tag] = float(n)
        return out

    def tags(self, text: str, max_tags: int = 3) -> list[str]:
        s = self.scores(text)
        return [t for t, v in sorted(s.items(), key=lambda kv: -kv[1]) if v >= 1][:max_tags]


class EmbeddingTagger:
    """Cosine(text, tag description) + 0.08 per keyword hit; tags within `margin` of the best, at most 3.

    margin 0.12 gives about two tags per thought, 0.06 about 1.7. With tags as a hard filter, 0.06 lost hits; with
    tags as a bounded bonus (CAIM now), leave-users-out cross-validation on GVD chose 0.06 (`caim.system`'s
    DEFAULT_TAG_MARGIN is what CAIM passes; this class's own default is unchanged).
    """

    name = "embedding"

    def __init__(self, ontology: Ontology, embedder, margin: float = 0.12, min_score: float = 0.15,
                 keyword_weight: float = 0.08):
        self.ontology, self.embedder = ontology, embedder
        self.margin, self.min_score, self.keyword_weight = margin, min_score, keyword_weight
        self.lexicon = LexiconTagger(ontology)
        self._infos = ontology.infos()
        self._tag_vecs: Optional[np.ndarray] = None

    def _vecs(self) -> np.ndarray:
        if self._tag_vecs is None:
            self._tag_vecs = self.embedder.embed([i.text for i in self._infos])
        return self._tag_vecs

    def scores(self, text: str) -> dict[str, float]:
        q = self.embedder.embed([text])[0]
        cos = self._vecs() @ q
        lex = self.lexicon.scores(text)
        rec = about_recommendation(text)
        out = {}
        for info, c in zip(self._infos, cos):
            s = float(c) + self.keyword_weight * min(lex.get(info.tag, 0.0), 3.0)
            if info.category == REC and not rec:
                s -= 0.15
            elif info.category != REC and rec:
                s -= 0.05
            out[info.tag] = s
        return out

    def tags(self, text: str, max_tags: int = 3) -> list[str]:
        ranked = sorted(self.scores(text).items(), key=lambda kv: -kv[1])
        if not ranked or ranked[0][1] < self.min_score:
            return []
        best = ranked[0][1]
        return [t for t, s in ranked[:max_tags] if s >= best - self.margin]


class LLMTagger:
    name = "llm"

    def __init__(self, client, ontology: Ontology):
        self.client, self.ontology = client, ontology

    def tags(self, text: str, max_tags: int = 3) -> list[str]:
        data = ask_json(self.client, "tag selection", TAGS_SYSTEM.format(ontology=self.ontology.listing()),
                        TAGS_USER.format(query=text))
        raw = field(data, "tags", list, "tag selection")
        tags = self.ontology.valid([str(t) for t in raw], limit=max_tags)
        if raw and not tags:
            raise CAIMLLMError("tag selection", f"none of the tags {raw!r} is in the ontology")
        return tags
