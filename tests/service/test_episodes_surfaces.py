"""Episodic memory through every surface: the HTTP routes (service/routes/episodes.py), Client and
AsyncClient, the MCP tools and the proxy, opt-in per tenant (acme has it, globex does not); erasure through the API
leaves no byte on SQLite and no row on PostgreSQL."""
from __future__ import annotations

import asyncio
import json
import sqlite3
import time
import uuid
from datetime import date
from pathlib import Path

import anyio
import httpx
import pytest
from fastapi.testclient import TestClient

from boundmem import AsyncClient, Client
from boundmem.client import Conflict, InvalidRequest, NotFound
from boundmem.config import EpisodicSettings
from boundmem.service.app import create_app

from .conftest import KEY_A, KEY_B, KEYS, auth

A, B = auth(KEY_A), auth(KEY_B)
TUESDAY, THURSDAY, FRIDAY = date(2024, 5, 7), date(2024, 5, 9), date(2024, 5, 10)
DINNER = [{"role": "user", "text": "Can you suggest a restaurant for dinner tonight?"},
          {"role": "assistant", "text": "I recommend Green Leaf, a vegan place on Main Street with great curries."},
          {"role": "user", "text": "I went hiking at Blue Peak last weekend and loved the views."}]
JAZZ = [{"role": "user", "text": "Play some jazz for the drive please"},
        {"role": "assistant", "text": "Sure, I suggest the album Kind of Blue by Miles Davis."}]
RESTAURANT_TUESDAY = "What was that restaurant you suggested on Tuesday?"
GREEN_LEAF = "AI recommended Green Leaf, Main Street to user (a restaurant for dinner tonight)"


def episodic_memory(store, schema, cue_extractor, tenants=("acme", "agent")):
    from boundmem.embed import HashEmbedder
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.memory import Memory

    return Memory(schema=schema, store=store, extractor=cue_extractor, maintainer=RuleMaintainer(),
                  embedder=HashEmbedder(), episodic=EpisodicSettings(enabled=True, tenants=tenants))


@pytest.fixture()
def emem(tmp_path, schema, cue_extractor):
    from boundmem.store.sqlite import SQLiteStore

    m = episodic_memory(SQLiteStore(tmp_path / "ep.db"), schema, cue_extractor)
    yield m
    m.store.close()


@pytest.fixture()
def app(emem):
    return create_app(emem, KEYS)


@pytest.fixture()
def http(app):
    with TestClient(app) as tc:
        yield tc


def post_conversation(http, turns, at: date, user="alice", key=A, cid="c1"):
    r = http.post(f"/v1/users/{user}/conversations", headers=key,
                  json={"id": cid, "turns": turns, "at": f"{at.isoformat()}T18:00:00Z"})
    assert r.status_code == 200, r.text
    return r.json()


# --- HTTP -------------------------------------------------------------------------------------------------
def test_ingest_learns_dated_episodes_listed_and_recalled_by_day(http):
    body = post_conversation(http, DINNER, TUESDAY)
    assert body["episodes"]["user"] == "alice" and body["episodes"]["day"] == "2024-05-07"
    assert GREEN_LEAF in [e["text"] for e in body["episodes"]["stored"]]
    post_conversation(http, JAZZ, THURSDAY, cid="c2")
    listed = http.get("/v1/users/alice/episodes", headers=A).json()
    assert listed["user"] == "alice" and {e["user"] for e in listed["episodes"]} == {"alice"}
    assert {e["day"] for e in listed["episodes"]} == {"2024-05-07", "2024-05-09"}
    assert "acme:alice" not in json.dumps(listed) and "acme:alice" not in json.dumps(body)
    tue = http.get("/v1/users/alice/episodes", headers=A, params={"until": "2024-05-07", "term": "long"}).json()
    assert tue["episodes"] and {e["day"] for e in tue["episodes"]} == {"2024-05-07"}   # moved to long-term on Thursday
    r = http.post("/v1/users/alice/episodes/recall", headers=A,
                  json={"utterance": RESTAURANT_TUESDAY, "today": FRIDAY.isoformat()}).json()
    assert r["retrieved"] is True and r["hits"][0]["episode"]["text"] == GREEN_LEAF
    assert "on 2024-05-07" in r["hits"][0]["why"] and r["hits"][0]["episode"]["user"] == "alice"
    none = http.post("/v1/users/alice/episodes/recall", headers=A, json={"utterance": "thanks, that's all"}).json()
    assert none == {"user": "alice", "retrieved": False, "reason": none["reason"], "hits": []} and none["reason"]
    raw = http.post("/v1/users/alice/episodes/recall", headers=A,
                    json={"utterance": "What did you suggest?", "gate": False, "since": "2024-05-09", "k": 1}).json()
    assert [h["episode"]["day"] for h in raw["hits"]] == ["2024-05-09"]
    assert http.post("/v1/users/alice/episodes/recall", headers=A, json={"utterance": "x", "k": 0}).status_code == 422


def test_a_tenant_without_episodic_memory_learns_none_and_is_told(http):
    body = post_conversation(http, DINNER, TUESDAY, key=B)
    assert body["episodes"] is None and body["user"] == "alice"
    assert http.get("/v1/users/alice/episodes", headers=B).json()["episodes"] == []   # globex's alice: nothing
    for path, payload in (("/v1/users/alice/episodes", {"turns": DINNER}),
                          ("/v1/users/alice/episodes/recall", {"utterance": RESTAURANT_TUESDAY})):
        r = http.post(path, headers=B, json=payload)
        assert r.status_code == 409 and r.json()["code"] == "episodic_off", r.text
        assert "globex:" not in r.text
    post_conversation(http, DINNER, TUESDAY)   # acme's alice is another user
    assert http.get("/v1/users/alice/episodes", headers=B).json()["episodes"] == []


def test_remember_end_session_delete_and_the_per_tag_opt_out(http):
    r = http.post("/v1/users/alice/episodes", headers=A,
                  json={"id": "c9", "turns": DINNER, "at": "2024-05-07T10:00:00Z"})
    assert r.status_code == 200, r.text
    assert {e["term"] for e in r.json()["stored"]} == {"short"}
    ended = http.post("/v1/users/alice/episodes/end-session", headers=A).json()
    assert ended["consolidated"] == len(r.json()["stored"]) and {e["term"] for e in ended["stored"]} == {"long"}
    out = http.put("/v1/users/alice/episode-opt-outs/recommendations/places", headers=A).json()
    assert out["tag"] == "Recommendations/Places" and [e["text"] for e in out["purged"]] == [GREEN_LEAF]
    assert http.get("/v1/users/alice/episode-opt-outs", headers=A).json()["opt_outs"] == ["Recommendations/Places"]
    again = http.post("/v1/users/alice/episodes", headers=A, json={"turns": DINNER, "at": "2024-05-07T10:00:00Z"}).json()
    assert again["blocked"] == 1
    assert GREEN_LEAF not in [e["text"] for e in http.get("/v1/users/alice/episodes", headers=A).json()["episodes"]]
    assert http.put("/v1/users/alice/episode-opt-outs/Gossip", headers=A).status_code == 422
    assert http.delete("/v1/users/alice/episode-opt-outs/Recommendations/Places", headers=A).json()["changed"] is True
    held = http.get("/v1/users/alice/episodes", headers=A).json()["episodes"]
    gone = http.delete(f"/v1/users/alice/episodes/{held[0]['id']}", headers=A)
    assert gone.status_code == 200 and gone.json()["id"] == held[0]["id"] and gone.json()["user"] == "alice"
    assert http.delete(f"/v1/users/alice/episodes/{held[0]['id']}", headers=A).status_code == 404
    assert http.delete(f"/v1/users/bob/episodes/{held[1]['id']}", headers=A).status_code == 404   # not bob's
    history = [a["op"] for a in http.get("/v1/users/alice/export", headers=A).json()["audit"]]
    assert {"episode", "episode_update", "episode_delete", "episode_opt_out", "episode_opt_in"} <= set(history)


def test_a_user_token_reaches_only_its_own_episodes(http):
    post_conversation(http, DINNER, TUESDAY, user="bob")
    tok = http.post("/v1/users/alice/tokens", headers=A).json()["token"]
    assert http.get("/v1/users/bob/episodes", headers=auth(tok)).status_code == 403
    assert http.get("/v1/users/alice/episodes", headers=auth(tok)).json()["episodes"] == []


def test_export_holds_the_episodes_and_forget_erases_them(http, emem):
    post_conversation(http, DINNER, TUESDAY)
    http.put("/v1/users/alice/episode-opt-outs/Preferences/Music", headers=A)
    x = http.get("/v1/users/alice/export", headers=A).json()
    assert GREEN_LEAF in [e["text"] for e in x["episodes"]] and {e["user"] for e in x["episodes"]} == {"alice"}
    assert x["episode_opt_outs"] == ["Preferences/Music"]
    assert http.delete("/v1/users/alice", headers=A).status_code == 200
    assert emem.episodes("acme:alice") == [] and emem.episode_opt_outs("acme:alice") == ["Preferences/Music"]


# --- raw bytes / rows after erasure through the API ---------------------------------------------------------
def _raw(db: Path, needle: str) -> dict[str, int]:
    return {f.name: n for s in ("", "-wal", "-shm") if (f := Path(f"{db}{s}")).exists()
            and (n := f.read_bytes().count(needle.encode()))}


def _marked_chat(marker: str) -> list[dict]:
    return [{"role": "user", "text": f"Can you suggest a restaurant near {marker} Square for dinner?"},
            {"role": "assistant", "text": f"I recommend {marker} Grill, a vegan place."},
            {"role": "user", "text": f"I went hiking at {marker} Peak last weekend and loved it."}]


@pytest.mark.parametrize("route", ["forget", "opt_out_and_delete"])
def test_erasure_through_the_api_leaves_no_byte_on_sqlite(tmp_path, schema, cue_extractor, route):
    from boundmem.store.sqlite import SQLiteStore

    marker = f"Zq{uuid.uuid4().hex[:10]}Mk"
    db = tmp_path / "raw.db"
    mem = episodic_memory(SQLiteStore(db), schema, cue_extractor)
    with TestClient(create_app(mem, KEYS)) as http:
        http.post("/v1/users/bob/episodes", headers=A, json={"turns": DINNER})
        r = http.post("/v1/users/alice/episodes", headers=A,
                      json={"id": "c1", "turns": _marked_chat(marker), "at": "2024-05-07T09:00:00Z"})
        assert r.status_code == 200 and r.json()["stored"], r.text
        http.post("/v1/users/alice/episodes/end-session", headers=A)   # a revision: more page images
        idle = sqlite3.connect(db)
        idle.execute("SELECT count(*) FROM episodes").fetchone()
        assert _raw(db, marker), "the marker must be on disk first, or the test proves nothing"
        if route == "forget":
            assert http.delete("/v1/users/alice", headers=A).status_code == 200
        else:
            for e in http.get("/v1/users/alice/episodes", headers=A).json()["episodes"]:
                if marker in e["text"] and not e["tags"][0].startswith("Recommendations"):
                    assert http.delete(f"/v1/users/alice/episodes/{e['id']}", headers=A).status_code == 200
            http.put("/v1/users/alice/episode-opt-outs/Recommendations", headers=A)
            assert marker not in http.get("/v1/users/alice/export", headers=A).text
        assert _raw(db, marker) == {}
        assert http.get("/v1/users/bob/episodes", headers=A).json()["episodes"]
        idle.close()
    mem.store.close()
    assert _raw(db, marker) == {}


# --- Client and AsyncClient ---------------------------------------------------------------------------------
def test_the_client_reaches_every_episodic_route(http):
    c = Client("http://testserver", KEY_A, http_client=http)
    r = c.remember_episode("alice", [{"role": t["role"], "content": t["text"]} for t in DINNER], day=TUESDAY)
    assert GREEN_LEAF in [e.text for e in r.stored] and r.day == TUESDAY
    assert c.end_episode_session("alice").consolidated == len(r.stored)
    assert [e.day for e in c.episodes("alice", since=TUESDAY, until=TUESDAY, term="long").episodes] == [TUESDAY] * len(r.stored)
    hit = c.recall_episodes("alice", RESTAURANT_TUESDAY, today=FRIDAY).hits[0]
    assert hit.episode.text == GREEN_LEAF and hit.episode.user == "alice"
    assert c.recall_episodes("alice", "hello there").retrieved is False
    assert c.episode_opt_out("alice", "Recommendations/Places").purged[0].text == GREEN_LEAF
    assert c.episode_opt_outs("alice").opt_outs == ["Recommendations/Places"]
    assert c.episode_opt_in("alice", "recommendations/places").changed is True
    left = c.episodes("alice").episodes
    assert c.delete_episode("alice", left[0].id).id == left[0].id
    with pytest.raises(NotFound):
        c.delete_episode("alice", left[0].id)
    with pytest.raises(InvalidRequest):
        c.episode_opt_out("alice", "Gossip")
    with pytest.raises(Conflict) as off:
        Client("http://testserver", KEY_B, http_client=http).recall_episodes("alice", RESTAURANT_TUESDAY)
    assert off.value.code == "episodic_off"


def test_the_async_client_too(app):
    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as h:
            c = AsyncClient("http://testserver", KEY_A, http_client=h)
            await c.remember_episode("alice", [{"role": t["role"], "content": t["text"]} for t in DINNER], day=TUESDAY)
            hits = (await c.recall_episodes("alice", RESTAURANT_TUESDAY, today=FRIDAY)).hits
            opted = await c.episode_opt_out("alice", "Recommendations")
            return hits, opted, await c.episodes("alice")

    hits, opted, left = asyncio.run(scenario())
    assert hits[0].episode.text == GREEN_LEAF and GREEN_LEAF in [e.text for e in opted.purged]
    assert GREEN_LEAF not in [e.text for e in left.episodes]


# --- MCP ----------------------------------------------------------------------------------------------------
def test_the_mcp_tools(emem):
    pytest.importorskip("mcp")
    from boundmem.service.mcp import Binding, ToolError, build_server

    server = build_server(emem, Binding(tenant="agent", user="alice"))

    def call(tool, args=None):
        res = anyio.run(server.call_tool, tool, args or {})
        return getattr(res, "structured_content", None) or getattr(res, "structuredContent")

    got = call("remember_episode", {"turns": DINNER, "day": "2024-05-07"})
    assert GREEN_LEAF in [e["text"] for e in got["stored"]]
    assert '"user"' not in json.dumps(got) and "agent:" not in json.dumps(got)
    r = call("recall_episodes", {"utterance": RESTAURANT_TUESDAY})   # today: not Friday, so no date bonus
    assert r["retrieved"] is True and GREEN_LEAF in [e["text"] for e in r["episodes"]]
    declined = call("recall_episodes", {"utterance": "thanks, that's all"})
    assert declined == {"retrieved": False, "reason": declined["reason"], "episodes": [], "scores": [], "why": []}
    listed = call("list_episodes")["episodes"]
    assert {e["day"] for e in listed} == {"2024-05-07"}
    out = call("episode_opt_out", {"tag": "recommendations/places"})
    assert out["tag"] == "Recommendations/Places" and [e["text"] for e in out["purged"]] == [GREEN_LEAF]
    assert call("episode_opt_in", {"tag": "Recommendations/Places"})["opted_in"] is True
    left = call("list_episodes")["episodes"]
    assert call("delete_episode", {"episode_id": left[0]["id"]})["id"] == left[0]["id"]
    with pytest.raises(ToolError, match="no episode"):
        call("delete_episode", {"episode_id": left[0]["id"]})
    exported = call("export")
    assert "agent:alice" not in json.dumps(exported) and len(exported["episodes"]) == len(left) - 1
    off = build_server(emem, Binding(tenant="other", user="alice"))
    with pytest.raises(ToolError, match="not enabled for this memory server's tenant"):
        anyio.run(off.call_tool, "recall_episodes", {"utterance": RESTAURANT_TUESDAY})
    assert emem.episodes("agent:bob") == []


# --- the proxy ----------------------------------------------------------------------------------------------
@pytest.fixture()
def upstream():
    from llm.fake_openai import FakeOpenAI

    with FakeOpenAI() as srv:
        yield srv


def chat(tc, text: str, key=A, user="alice"):
    return tc.post("/v1/chat/completions", headers=key,
                   json={"model": "m", "user": user, "messages": [{"role": "user", "content": text}]})


def wait_for(pred, timeout: float = 30.0):   # the proxy's worker applies the exchange after the reply
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def test_the_proxy_learns_episodes_and_injects_them_only_when_memory_is_needed(emem, upstream):
    from llm.fake_openai import content

    from boundmem.proxy.app import EPISODES_HEADER, create_proxy

    today = date.today()
    emem.remember_episode(DINNER, "acme:alice", day=today, end_session=True)
    with TestClient(create_proxy(emem, KEYS, upstream.base_url)) as tc:
        upstream.push(content("It was Green Leaf."), content("Sunny."), content("Sure, I suggest the album Kind of Blue by Miles Davis."),
                      content("It was Green Leaf."))
        r = chat(tc, "What was that restaurant you suggested today?")
        assert r.status_code == 200 and r.headers["x-boundmem-episodic"] == "retrieved"
        assert int(r.headers["x-boundmem-episodes"]) >= 1
        system = upstream.requests[0].messages[0]["content"]
        assert EPISODES_HEADER in system and f'{{"day": "{today.isoformat()}", "memory": "{GREEN_LEAF}"}}' in system
        r = chat(tc, "What's the weather like?")
        assert r.headers["x-boundmem-episodic"] == "declined" and r.headers["x-boundmem-episodes"] == "0"
        assert all(EPISODES_HEADER not in str(m.get("content")) for m in upstream.requests[1].messages)
        # the exchange is learnt, the assistant's recommendation with it
        chat(tc, "Play some jazz for the drive please")
        wait_for(lambda: any("Kind of Blue" in e.text for e in emem.episodes("acme:alice")))
        # globex has no episodic memory: nothing injected, nothing learnt
        r = chat(tc, "What was that restaurant you suggested today?", key=B)
        assert r.headers["x-boundmem-episodic"] == "off" and r.headers["x-boundmem-episodes"] == "0"
        assert all(EPISODES_HEADER not in str(m.get("content")) for m in upstream.requests[3].messages)
        wait_for(lambda: emem.jobs.pending() == 0)
        assert emem.episodes("globex:alice") == []
