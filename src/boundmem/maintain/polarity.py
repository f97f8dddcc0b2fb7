"""Does a sentence *negate or revoke* a preference attribute, or affirm it?

Maintenance no longer asks this: since issue 18 polarity is the extractor's data (`Candidate.polarity`),
compared by the maintainers rather than judged again from the sentence. The model stays available for
callers that only have a sentence and an attribute (and for its training recipe). Two detectors, same question:

* `PolarityModel`: a logistic regression over MiniLM features of (detail, attribute, sentence),
  trained on the `maintenance_questions` (equal = 0, negate = 1) of CarMem users 51-100 only
  (lines 50-99 of dataset.jsonl; the first 50 users are the test split and are never read by
  `training_examples`). The weights ship as `data/polarity_minilm.npz` (~6 kB); they are only
  valid for the embedder they were trained with (name and dim are checked).
* `cue_negates`: a cue lexicon, used when the embedder is not the one the model was trained for
  (tests with HashEmbedder, an OpenAI embedder). It catches explicit negation only.

Rebuild the artefact: `python -m boundmem.maintain.polarity --data ../shared/data/carmem/dataset.jsonl`.
"""
from __future__ import annotations

import argparse
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np

from ..embed import Embedder
from ..errors import ConfigError

FEATURE_VERSION = 1
ARTEFACT = "polarity_minilm.npz"
TRAIN_USERS = range(50, 100)  # 0-based lines of dataset.jsonl; 0-49 are CarMem's test split


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


# --- training ---------------------------------------------------------------------------------
def training_examples(dataset: Path, users: Iterable[int] = TRAIN_USERS) -> list[tuple[str, str, str, int]]:
    """(detail name, attribute, utterance, 1 if it negates) from the chosen dataset lines.

    Refuses the test split: CarMem's first 50 users are what the maintenance numbers are reported on.
    """
    users = set(users)
    if users & set(range(50)):
        raise ValueError("users 0-49 are CarMem's test split; train on 50-99 only")
    out = []
    with open(dataset, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i not in users:
                continue
            for conv in json.loads(line)["data"]:
                _, _, detail, attr = [x.strip() for x in conv["user_preference"].split(";", 3)]
                mq = conv["maintenance_questions"]
                out.append((detail, attr, mq["question_equal_preference"], 0))
                out.append((detail, attr, mq["question_negate_preference"], 1))
    return out


def fit_logistic(X: np.ndarray, y: np.ndarray, C: float = 0.05, iters: int = 50) -> tuple[np.ndarray, float]:
    """L2 logistic regression (0.5|w|^2 + C * sum logloss, as sklearn's C) by Newton steps on
    standardised features; returns weights and bias for the raw features."""
    mu, sd = X.mean(0), X.std(0)
    sd[sd < 1e-12] = 1.0
    Z = np.hstack([(X - mu) / sd, np.ones((len(X), 1))])
    w = np.zeros(Z.shape[1])
    reg = np.ones(Z.shape[1]) / C
    reg[-1] = 0.0  # bias is not penalised
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(Z @ w)))
        g = Z.T @ (p - y) + reg * w
        H = (Z * (p * (1 - p))[:, None]).T @ Z + np.diag(reg + 1e-9)
        step = np.linalg.solve(H, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    wr = w[:-1] / sd
    return wr, float(w[-1] - wr @ mu)


def train(embedder: Embedder, examples: Sequence[tuple[str, str, str, int]], C: float = 0.05) -> PolarityModel:
    X = np.vstack([features(embedder, d, a, s) for d, a, s, _ in examples])
    y = np.array([lab for *_, lab in examples], np.float64)
    w, b = fit_logistic(X, y, C)
    return PolarityModel(w=w, b=b, embedder_name=embedder.name, dim=embedder.dim)


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(description="Train the maintenance polarity model on CarMem users 51-100.")
    ap.add_argument("--data", type=Path, required=True, help="CarMem dataset.jsonl")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "data" / ARTEFACT)
    ap.add_argument("-C", type=float, default=0.05)
    a = ap.parse_args(argv)
    from ..embed.minilm_torch import MiniLMEmbedder

    ex = training_examples(a.data)
    model = train(MiniLMEmbedder(), ex, a.C)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    model.save(a.out)
    print(f"trained on {len(ex)} utterances -> {a.out}")


if __name__ == "__main__":
    main()
