"""Fixtures for the service tests: a fast Memory (keyword extractor with cue polarity and evidence, rule maintainer,
hash embedder) and two tenants."""
from __future__ import annotations

import re

import pytest

KEY_A = "key-tenant-a-0123456789abcdef"
KEY_B = "key-tenant-b-fedcba9876543210"
KEYS = {KEY_A: "acme", KEY_B: "globex"}


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class FakeClock:
    """A clock the test moves by hand (`clock.now += 60`)."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def conversation(cid: str, *user_texts: str) -> dict:
    return {"id": cid, "turns": [{"role": "user", "text": t} for t in user_texts]}


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
def memory(tmp_path, schema):
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.memory import Memory
    from boundmem.embed import HashEmbedder
    from boundmem.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "service.db")
    yield Memory(schema=schema, store=store, extractor=CueExtractor(), maintainer=RuleMaintainer(), embedder=HashEmbedder())
    store.close()


@pytest.fixture()
def client(memory):
    from fastapi.testclient import TestClient

    from boundmem.service.app import create_app

    with TestClient(create_app(memory, KEYS)) as c:
        yield c
