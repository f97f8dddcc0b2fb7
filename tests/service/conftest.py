"""Fixtures for the service tests: a fast Memory (keyword extractor with cue polarity and evidence, rule maintainer,
hash embedder) and two tenants."""
from __future__ import annotations

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


@pytest.fixture()
def memory(tmp_path, schema, cue_extractor):
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.memory import Memory
    from boundmem.embed import HashEmbedder
    from boundmem.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "service.db")
    m = Memory(schema=schema, store=store, extractor=cue_extractor, maintainer=RuleMaintainer(), embedder=HashEmbedder())
    yield m
    m.close_jobs()   # the worker thread must not be mid-query when its connection closes
    store.close()


@pytest.fixture()
def client(memory):
    from fastapi.testclient import TestClient

    from boundmem.service.app import create_app

    with TestClient(create_app(memory, KEYS)) as c:
        yield c


@pytest.fixture()
def taken_port(tmp_path):
    """A keys file and a port another socket is listening on (for serve/proxy on a taken port)."""
    import socket

    keys = tmp_path / "keys.toml"
    keys.write_text(f'[keys]\n"{KEY_A}" = "acme"\n')
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield keys, busy.getsockname()[1]
