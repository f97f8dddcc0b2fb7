"""Wiring components by name, so the CLI, the service and the benchmarks build stages the same way."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from .schema.load import builtin_schema
from .schema.model import Schema


MINILM_BACKENDS = ("auto", "onnx", "torch")


def make_embedder(name: str = "minilm"):
    """`minilm` picks its backend from BOUNDMEM_MINILM_BACKEND (auto|onnx|torch; auto = ONNX Runtime
    when it can run here, else torch); `minilm-onnx` and `minilm-torch` force one."""
    if name.startswith("minilm"):
        backend = name.removeprefix("minilm").lstrip("-") or os.environ.get("BOUNDMEM_MINILM_BACKEND", "auto")
        if backend not in MINILM_BACKENDS:
            raise ValueError(f"unknown MiniLM backend {backend!r} (choose {', '.join(MINILM_BACKENDS)})")
        if backend == "auto":
            from .embed import minilm_onnx as onnx_embed

            backend = "onnx" if onnx_embed.available() else "torch"
        if backend == "onnx":
            from .embed.minilm_onnx import OnnxMiniLMEmbedder

            return OnnxMiniLMEmbedder()
        from .embed.minilm_torch import MiniLMEmbedder

        return MiniLMEmbedder()
    if name == "hash":
        from .embed import HashEmbedder

        return HashEmbedder()
    if name == "openai":
        from .embed.openai_compat import OpenAIEmbedder

        return OpenAIEmbedder()
    raise ValueError(f"unknown embedder {name!r} (choose minilm, minilm-onnx, minilm-torch, openai or hash)")


def make_extractor(name: str = "local", embedder=None):
    if name == "keyword":
        from .extract.keyword import KeywordExtractor

        return KeywordExtractor()
    if name in ("local", "local-lenient"):
        from .extract.local import LocalExtractor

        # lenient: judged by category score alone, without the lasting-preference model (CarMem's labels
        # count one-off commands as preferences; this reproduces what a category-only extractor gets there)
        return LocalExtractor(embedder or make_embedder(), **({"lasting": None} if name == "local-lenient" else {}))
    if name == "llm":
        from .extract.llm import LLMExtractor

        return LLMExtractor.from_env()
    raise ValueError(f"unknown extractor {name!r} (choose local, local-lenient, keyword or llm)")


def make_maintainer(name: str = "local", embedder=None):
    if name == "rules":
        from .maintain.rules import RuleMaintainer

        return RuleMaintainer()
    if name == "local":
        from .maintain.local import LocalMaintainer

        return LocalMaintainer(embedder or make_embedder())
    if name == "llm":
        from .maintain.llm import LLMMaintainer

        return LLMMaintainer.from_env()
    raise ValueError(f"unknown maintainer {name!r} (choose local, rules or llm)")


def make_store(url: str | Path = "boundmem.db"):
    s = str(url)
    if s.startswith(("postgres://", "postgresql://")):
        from .store.postgres import PostgresStore

        return PostgresStore(s)
    from .store.sqlite import SQLiteStore

    return SQLiteStore(s.removeprefix("sqlite:///"))


def build_memory(db: str | Path = "boundmem.db", schema: Optional[Schema] = None, extractor: str = "local",
                 maintainer: str = "local", embedder: str = "minilm"):
    from .memory import Memory

    emb = make_embedder(embedder)
    return Memory(schema=schema or builtin_schema(), store=make_store(db),
                  extractor=make_extractor(extractor, emb), maintainer=make_maintainer(maintainer, emb), embedder=emb)
