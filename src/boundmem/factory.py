"""Wiring components by name, so the CLI, the service and the benchmarks build stages the same way."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from .schema.load import builtin_schema
from .schema.model import Schema


def make_embedder(name: str = "minilm"):
    if name == "minilm":
        from .retrieve.embed import MiniLMEmbedder

        return MiniLMEmbedder()
    if name == "hash":
        from .retrieve.embed import HashEmbedder

        return HashEmbedder()
    if name == "openai":
        from .retrieve.openai_embed import OpenAIEmbedder

        return OpenAIEmbedder()
    raise ValueError(f"unknown embedder {name!r} (choose minilm, openai or hash)")


def make_extractor(name: str = "local", embedder=None):
    if name == "keyword":
        from .extract.keyword import KeywordExtractor

        return KeywordExtractor()
    if name == "local":
        from .extract.local import LocalExtractor

        return LocalExtractor(embedder or make_embedder())
    if name == "llm":
        from .extract.llm import LLMExtractor

        return LLMExtractor.from_env()
    raise ValueError(f"unknown extractor {name!r} (choose local, keyword or llm)")


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
