"""With episodic memory on, a long turn (or zalgo text, or 1,900 nested parentheses) answered
500 (ThoughtDraft's 400-character limit in post-thinking) while the preference of the same turn was stored. An
ingest is all or nothing: hostile turns over the library, HTTP and MCP give no 500 and either everything of the
turn or nothing; a failure in any part rolls back every part; CPU per ingest is bounded by a named limit."""
from __future__ import annotations

import time

import anyio
import pytest
from fastapi.testclient import TestClient

from boundmem.config import EpisodicSettings
from boundmem.embed import HashEmbedder
from boundmem.errors import BoundmemError, LimitError
from boundmem.maintain.rules import RuleMaintainer
from boundmem.memory import IngestFailed, IngestTooLong, Memory
from boundmem.models import Conversation, Turn
from boundmem.service.app import create_app
from boundmem.service.limits import ContentLimits, Throttle
from boundmem.store.sqlite import SQLiteStore
from service.conftest import KEY_A, KEYS, auth

LIKE = "I love Italian food."
HOSTILE = {
    "3,990 characters": LIKE + " " + "really " * 568,
    "one 3,990-character word": LIKE + " " + "a" * 3990,
    "zalgo": LIKE + " " + "Z\u0336\u0301\u0300a\u0337\u0302l\u0338\u0303g\u0335\u0304o\u0334" * 300,
    "1,900 nested parentheses": LIKE + " " + "(" * 1900 + "x" + ")" * 1900,
    "newlines": LIKE + "\n" * 1000 + "I also like jazz.",
    "separators": LIKE + "\u2028\u2029" * 500,
    "one long sentence": "I love Italian food and " + "also " * 700 + "pizza.",
}


def held(mem: Memory, user: str) -> tuple:
    e = mem.store.export(user)
    return len(e.preferences), len(e.observations), len(mem.episodes(user)), len(e.audit)


def conv(cid: str, text: str) -> Conversation:
    return Conversation(id=cid, turns=(Turn(role="user", text=text), Turn(role="assistant", text="Noted: " + text[:500])))


def test_hostile_turns_with_episodic_memory_are_stored_whole_in_the_library(emem, kind):
    k = kind("ingest: hostile turns, library, episodic on")
    for i, (name, text) in enumerate(HOSTILE.items()):
        user = f"lib{i}"
        try:
            r = emem.add(conv(f"c{i}", text), user)
            ok = bool(r.stored) and r.episodes is not None and all(len(e.text) <= 400 for e in emem.episodes(user))
        except BoundmemError as e:   # refused is fine, if nothing of it was kept
            ok = held(emem, user)[:3] == (0, 0, 0) and not isinstance(e, IngestFailed)
        k.check(ok, name)


def test_hostile_turns_over_http_and_mcp_give_no_500_and_no_half_ingest(emem, kind):
    k = kind("ingest: hostile turns over HTTP and MCP, episodic on")
    limits = ContentLimits(max_turn_chars=10_000, max_total_chars=50_000)
    with TestClient(create_app(emem, KEYS, rate_limit=Throttle(), limits=limits)) as c:
        for i, (name, text) in enumerate(HOSTILE.items()):
            r = c.post(f"/v1/users/h{i}/conversations", headers=auth(KEY_A),
                       json={"id": f"c{i}", "turns": [{"role": "user", "text": text}]})
            n = held(emem, f"acme:h{i}")
            k.check(r.status_code < 500 and (r.status_code >= 400) == (n[:3] == (0, 0, 0)), (name, r.status_code, n))
    mcp = pytest.importorskip("boundmem.service.mcp")
    for i, (name, text) in enumerate(HOSTILE.items()):
        server = mcp.build_server(emem, mcp.Binding(tenant="agent", user=f"m{i}"), limits)
        try:
            anyio.run(server.call_tool, "add", {"user_messages": [text], "conversation_id": f"m{i}"})
            n = held(emem, f"agent:m{i}")
            ok = n[0] > 0 and n[2] > 0   # its episodes landed with its preference
        except Exception as e:  # noqa: BLE001 - a tool error is fine, if it is clear and nothing was kept
            n = held(emem, f"agent:m{i}")
            ok = n[:3] == (0, 0, 0) and "ValidationError" not in str(e)
        k.check(ok, ("mcp", name, n))


def test_a_failure_in_any_part_rolls_back_every_part(emem, monkeypatch, kind):
    k = kind("ingest: a failing part rolls back the whole ingest")
    em = emem.episodic_memory

    def boom(*a, **kw):
        raise RuntimeError("the episodes' write failed")
    for part in ("write", "prepare"):
        with monkeypatch.context() as m:
            m.setattr(em, part, boom)
            user = f"fail-{part}"
            with pytest.raises(IngestFailed) as e:
                emem.add(conv("c1", LIKE), user)
            k.check(held(emem, user) == (0, 0, 0, 0), (part, held(emem, user)))
            k.check(part in ("write", "prepare") and "nothing of it was stored" in str(e.value), str(e.value))
    # and the same turn, nothing failing: all of it lands together
    r = emem.add(conv("c1", LIKE), "fine")
    k.check(bool(r.stored) and bool(r.episodes and r.episodes.stored), "the control ingest stored nothing")


class _SlowExtractor:
    """An extractor that burns CPU on every turn (a stand-in for a reader on a huge turn)."""

    def __init__(self, inner, seconds: float):
        self.inner, self.seconds = inner, seconds

    def extract(self, conversation, schema):
        end = time.thread_time() + self.seconds
        while time.thread_time() < end:   # CPU, not a wait: the limit counts CPU time
            pass
        return self.inner.extract(conversation, schema)


def test_cpu_per_ingest_is_bounded_by_a_named_limit(tmp_path, schema, cue_extractor, kind):
    k = kind("ingest: CPU deadline")
    store = SQLiteStore(tmp_path / "slow.db")
    mem = Memory(schema=schema, store=store, extractor=_SlowExtractor(cue_extractor, 0.3), maintainer=RuleMaintainer(),
                 embedder=HashEmbedder(), episodic=EpisodicSettings(enabled=True), max_ingest_seconds=0.1)
    with pytest.raises(IngestTooLong) as e:
        mem.add(conv("c1", LIKE), "slow")
    k.check(isinstance(e.value, LimitError) and "max_ingest_seconds" in str(e.value), str(e.value))
    k.check(held(mem, "slow") == (0, 0, 0, 0), held(mem, "slow"))
    with TestClient(create_app(mem, KEYS, rate_limit=Throttle())) as c:
        r = c.post("/v1/users/slow/conversations", headers=auth(KEY_A),
                   json={"id": "c2", "turns": [{"role": "user", "text": LIKE}]})
    k.check(r.status_code == 413 and "max_ingest_seconds" in r.text, (r.status_code, r.text[:200]))
    k.check(held(mem, "acme:slow") == (0, 0, 0, 0), "stored after the limit")
    store.close()
