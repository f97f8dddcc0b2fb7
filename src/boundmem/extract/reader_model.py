"""The trained reader on ONNX Runtime: one user turn (after the assistant turn before it) in, the value spans it tags
out, each with its polarity, evidence and holder probabilities and its vectors for category and item scoring.

No torch here: the encoder and the span heads are ONNX files trained by benchmarks/boundmem_bench/train/reader.py.
Every number the reader decides with lives in `reader.json` beside them (the trainer's head scales, the thresholds
calibrated on the dev writers) with a hash of the input code and the model files: a model fed anything else than
what it was trained and calibrated on fails loudly instead of reading badly.
"""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from ..errors import ConfigError
from . import reader_input as RI

BUNDLED = Path(__file__).parent / "data" / "reader"


class ReaderModelMismatch(ConfigError):
    """The reader's files do not match the input code or each other: the model must be retrained (or recalibrated)."""

    code = "reader_model_mismatch"


class ReaderSettings(BaseModel):
    """Every number the reader uses, saved beside the model (reader.json)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_hash: str
    category_scale: float
    category_none: float
    item_scale: float
    item_none: float
    span: float = 0.5          # a tagged span's mean probability of being a value, at least
    category: float = 0.5      # the chosen category's probability (softmax over the schema's categories + none)
    item: float = 0.5          # a closed category's chosen item probability (softmax over its items + none)
    implied: float = 0.8       # the same, for an item the whole turn implies with no span to point at
    other: float = 0.5         # holder "other" probability above which a span is someone else's
    evidence: float = 0.0      # margin the stored evidence must have over "not evidence"
    calibrated_on: list[str] = []
    # the polarity head gives the feeling the words carry in every category; an avoidance category stores the
    # opposite ("avoid highways": Avoids Highways, a like of the category's value)
    avoidance_as_sentiment: bool = False


def input_hash(directory: Path) -> str:
    """What the thresholds and head scales are only valid for: the input code's version, the tokenizer, the two
    model files."""
    h = hashlib.sha256(RI.INPUT_VERSION.encode())
    for path in (RI.TOKENIZER, directory / "encoder.onnx", directory / "heads.onnx"):
        h.update(path.read_bytes())
    return h.hexdigest()


@dataclass
class SpanReading:
    """One span the reader tagged (start == end == 0 for what the whole turn implies), with what its heads say."""

    start: int
    end: int
    text: str
    value: float                  # mean probability of its word-pieces being part of a value
    polarity: np.ndarray          # probabilities over reader_input.POLARITY
    evidence: np.ndarray          # ... over EVIDENCE
    holder: np.ndarray            # ... over HOLDER
    category: np.ndarray          # unit vector in the embedder's space, scored against category descriptions
    item: np.ndarray              # unit vector scored against a closed category's listed items
    whole_turn: bool = False


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _word_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """A span widened to whole words (a tag that stops inside a word never stores half of it)."""
    while start > 0 and text[start - 1].isalnum():
        start -= 1
    while end < len(text) and text[end].isalnum():
        end += 1
    return start, end


class ReaderModel:
    """The encoder and heads sessions (one thread each by default: a server reads turns side by side), loaded
    lazily and once; `read_many` is thread-safe."""

    def __init__(self, directory: Path = BUNDLED, threads: int = 1, settings: Optional[ReaderSettings] = None):
        self.directory = Path(directory)
        self.threads = threads
        self._settings = settings
        self._lock = threading.Lock()
        self._sessions: Optional[tuple] = None
        self.texts_read = self.windows_read = 0   # what the encoder really ran on: inputs, and their windows (rows)

    @property
    def settings(self) -> ReaderSettings:
        if self._settings is None:
            self._settings = load_settings(self.directory)
        return self._settings

    def _load(self) -> tuple:
        with self._lock:
            if self._sessions is None:
                import onnxruntime as ort

                self.settings   # noqa: B018 - checks the hash before anything is read
                opts = ort.SessionOptions()
                opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                if self.threads > 0:
                    opts.intra_op_num_threads = self.threads
                mk = lambda name: ort.InferenceSession(str(self.directory / name), opts,   # noqa: E731
                                                       providers=["CPUExecutionProvider"])
                self._sessions = (mk("encoder.onnx"), mk("heads.onnx"), RI.load_tokenizer())
            return self._sessions

    def warm(self) -> None:
        self._load()

    def read_many(self, turns: Sequence[tuple[str, str]]) -> list[list[SpanReading]]:
        """Per (assistant context, user text): the spans tagged in the user text, then what the turn implies.

        Read in batches of at most `BATCH_WINDOWS` windows: the encoder's activations grow with the batch, and one
        bulk call (a whole import, a benchmark) sent as a single batch ran a machine out of memory."""
        tok = self._load()[2]
        per_turn = [RI.windows(tok, ctx, text) for ctx, text in turns]
        out: list[list[SpanReading]] = []
        start, size = 0, 0
        for k, ws in enumerate(per_turn):
            if size and size + len(ws) > self.BATCH_WINDOWS:
                out += self._read_batch(turns[start:k], per_turn[start:k])
                start, size = k, 0
            size += len(ws)
        return out + self._read_batch(turns[start:], per_turn[start:])

    BATCH_WINDOWS = 64

    def _read_batch(self, turns: Sequence[tuple[str, str]], per_turn: Sequence[list]) -> list[list[SpanReading]]:
        encoder, heads, _ = self._load()
        wins = [(k, w) for k, ws in enumerate(per_turn) for w in ws]
        if not wins:
            return [[] for _ in turns]
        with self._lock:
            self.texts_read += len(turns)
            self.windows_read += len(wins)
        ids, mask, types = (np.asarray(a, np.int64) for a in RI.pad([w for _, w in wins]))
        hidden, bio = encoder.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
        bio = _softmax(bio)
        found: list[list[tuple]] = [[] for _ in turns]
        first_rows = {k: row for row, (k, _) in reversed(list(enumerate(wins)))}
        pooled = []
        for row, (k, w) in enumerate(wins):
            text = turns[k][1]
            for first, last in _tagged(bio[row], w):
                a, b = _word_bounds(text, w.text_offsets[first - w.text_start][0], w.text_offsets[last - w.text_start][1])
                if any(a < e and b > s for s, e, *_ in found[k]):
                    continue   # read again in the overlap of two windows
                found[k].append((a, b, float(1 - bio[row, first:last + 1, 0].mean()), False))
                pooled.append(np.concatenate([hidden[row, first:last + 1].mean(0), hidden[row, 0]]))
            if row == first_rows[k]:   # what the whole turn implies, read once at its first window's [CLS]
                found[k].append((0, 0, 1.0, True))
                pooled.append(np.concatenate([hidden[row, 0], hidden[row, 0]]))
        return self._heads(heads, turns, found, pooled)

    def _heads(self, heads, turns, found, pooled) -> list[list[SpanReading]]:
        if not pooled:
            return [[] for _ in turns]
        pol, evid, hold, cat, item = heads.run(None, {"pooled": np.asarray(pooled, np.float32)})
        pol, evid, hold = _softmax(pol), _softmax(evid), _softmax(hold)
        out: list[list[SpanReading]] = []
        j = 0
        for k, spans in enumerate(found):
            text = turns[k][1]
            row = []
            for a, b, value, whole in spans:
                row.append(SpanReading(a, b, "" if whole else text[a:b], value, pol[j], evid[j], hold[j], cat[j],
                                       item[j], whole))
                j += 1
            out.append(row)
        return out


def _tagged(probs: np.ndarray, w: RI.Window) -> list[tuple[int, int]]:
    """(first, last) positions of each tagged span among the window's user word-pieces: a run of value pieces (B or
    I) with no O between them is one span (a B right after a value piece continues it: "very" + "dark")."""
    spans: list[list[int]] = []
    prev = 0
    for k in range(len(w.text_offsets)):
        pos = w.text_start + k
        tag = int(probs[pos].argmax())
        if tag and prev:
            spans[-1][1] = pos
        elif tag:
            spans.append([pos, pos])
        prev = tag
    return [(a, b) for a, b in spans]


def load_settings(directory: Path = BUNDLED) -> ReaderSettings:
    """reader.json, checked against the files it was made for."""
    path = Path(directory) / "reader.json"
    try:
        settings = ReaderSettings.model_validate(json.loads(path.read_text()))
    except FileNotFoundError as e:
        raise ReaderModelMismatch(f"{path} is missing: the reader has no thresholds (run the reader trainer)") from e
    except ValueError as e:
        raise ReaderModelMismatch(f"{path} is not valid reader settings: {e}") from e
    if settings.input_hash != input_hash(Path(directory)):
        raise ReaderModelMismatch(f"{path} was made for other inputs than {directory}'s model files and "
                                  f"{RI.INPUT_VERSION}: retrain the reader (benchmarks/boundmem_bench/train/reader.py)")
    return settings
