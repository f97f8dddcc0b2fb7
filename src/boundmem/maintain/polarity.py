"""Does a sentence *negate or revoke* a preference attribute, or affirm it?

Maintenance no longer asks this: polarity is the extractor's data (`Candidate.polarity`),
compared by the maintainers rather than judged again from the sentence. The model stays available for
callers that only have a sentence and an attribute (and for its training recipe). Two detectors, same question:

* `PolarityModel`: a logistic regression over MiniLM features of (detail, attribute, sentence),
  trained on the `maintenance_questions` (equal = 0, negate = 1) of CarMem users 51-100 only
  (lines 50-99 of dataset.jsonl; the first 50 users are the test split and are never read by
  `training_examples`). The weights ship as `data/polarity_minilm.npz` (~6 kB); they are only
  valid for the embedder they were trained with (name and dim are checked).
* `cue_negates`: a cue lexicon, used when the embedder is not the one the model was trained for
  (tests with HashEmbedder, an OpenAI embedder). It catches explicit negation only.

Rebuild the artefact: `python -m boundmem_bench.train.polarity --data ../shared/data/carmem/dataset.jsonl`.
"""
from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ..embed import Embedder
from ..errors import ConfigError

FEATURE_VERSION = 1
ARTEFACT = "polarity_minilm.npz"


class PolarityModelError(ConfigError):
    """The polarity model's file is missing or unreadable: a broken install, not a reason to judge polarity by cues
    alone without saying so."""

# Part of the feature vector: changing it invalidates the shipped weights (bump FEATURE_VERSION).
CUES = re.compile(
    r"\b(not|no|no longer|don't|do not|never|stop|over|avoid|skip|anymore|instead|rather than|dislike|hate|"
    r"without|exclude|else|other than|enough|done with|change|switch|disable|ignore|regardless|disregard|tired of)\b",
    re.I)

# The lexicon fallback is stricter: words like "instead" or "change" also occur when a user
# affirms a *new* attribute, so only cues that reject something count there.
_REJECT = re.compile(
    r"\b(not|no|no longer|don't|do not|doesn't|never|stop|over|avoid|skip|anymore|any more|dislike|hate|without|"
    r"exclude|other than|enough of|done with|disable|ignore|tired of|sick of|instead of|rather than)\b", re.I)
_AFFIRM_NEG_ATTR = re.compile(r"^\s*(avoid|no|not|never|without|exclude|don't)\b", re.I)


def templates(detail_name: str, attribute: str) -> list[str]:
    return [f"{detail_name}: {attribute}", f"I like {attribute}. Please use {attribute}.",
            f"I don't want {attribute} anymore. Avoid {attribute}.", f"{detail_name}: not {attribute}"]


def features(embedder: Embedder, detail_name: str, attribute: str, sentence: str) -> np.ndarray:
    """[sentence emb, sentence emb * enriched attribute emb, 3 template contrasts, 2 cue counts]."""
    t = templates(detail_name, attribute)
    v = embedder.embed([sentence, *t])
    es, t0, t1, t2, t3 = v
    n = len(CUES.findall(sentence))
    scal = np.array([es @ t1 - es @ t2, es @ t0 - es @ t3, es @ t0, float(n > 0), float(n)], np.float64)
    return np.concatenate([es.astype(np.float64), (es * t0).astype(np.float64), scal])


def cue_negates(attribute: str, sentence: str) -> bool:
    """Lexicon judgement: a rejecting cue, unless the attribute itself is phrased negatively
    ("Avoid highways": "please avoid highways" affirms it) and no second cue appears."""
    hits = _REJECT.findall(sentence)
    if not hits:
        return False
    if _AFFIRM_NEG_ATTR.match(attribute):
        return len(hits) >= 2
    return True


@dataclass(frozen=True)
class PolarityModel:
    """Linear model on `features`; standardisation is folded into `w` and `b`."""

    w: np.ndarray
    b: float
    embedder_name: str
    dim: int
    threshold: float = 0.5

    def fits(self, embedder: Embedder) -> bool:
        return getattr(embedder, "name", None) == self.embedder_name and getattr(embedder, "dim", None) == self.dim

    def prob(self, embedder: Embedder, detail_name: str, attribute: str, sentence: str) -> float:
        z = float(features(embedder, detail_name, attribute, sentence) @ self.w + self.b)
        return float(1.0 / (1.0 + np.exp(-z)))

    def negates(self, embedder: Embedder, detail_name: str, attribute: str, sentence: str) -> bool:
        return self.prob(embedder, detail_name, attribute, sentence) > self.threshold

    # --- persistence ------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        np.savez_compressed(path, w=self.w.astype(np.float32), b=np.float32(self.b),
                            meta=np.array(json.dumps({"embedder": self.embedder_name, "dim": self.dim,
                                                      "feature_version": FEATURE_VERSION,
                                                      "threshold": self.threshold,
                                                      "trained_on": "CarMem dataset.jsonl lines 50-99"})))

    @classmethod
    def load(cls, path: Optional[Path] = None) -> "PolarityModel":
        """The given file, or the artefact shipped as package data."""
        if path is not None:
            return cls._read(Path(path))
        return cls._read(Path(__file__).parent / "data" / ARTEFACT)

    @classmethod
    def _read(cls, p: Path) -> "PolarityModel":
        try:
            with np.load(p) as z:
                meta = json.loads(str(z["meta"]))
                version = meta.get("feature_version")
                model = cls(w=z["w"].astype(np.float64), b=float(z["b"]), embedder_name=meta["embedder"],
                            dim=int(meta["dim"]), threshold=float(meta.get("threshold", 0.5)))
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
            raise PolarityModelError(f"{p}: not a usable polarity model ({type(e).__name__}: {e}); reinstall boundmem "
                                     "or rebuild it (python -m boundmem.maintain.polarity)") from e
        if version != FEATURE_VERSION:
            raise PolarityModelError(f"{p}: feature_version {version} != {FEATURE_VERSION}; retrain")
        return model
