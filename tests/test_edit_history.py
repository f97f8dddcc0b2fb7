"""Correcting a preference and reading its history: `Memory.update` (audited "update", cause "edited by the
user", re-embedded, opt-outs respected, closed categories keep to their items) and `Memory.history` (the
preference's audit entries; after a deletion without content), and the CLI's `prefs edit` / `prefs history`."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from boundmem import AsyncMemory, ConflictError, InputError, NotFoundError
from boundmem.cli import app
from boundmem.models import Candidate
from boundmem.store.base import OptedOutError

FAST = ["--embedder", "hash"]
runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture()
def mem(keyword_memory):
    return keyword_memory


def italian(mem, user="u"):
    return mem.add("I love Italian food.", user, conversation_id="c1").stored[0]


def test_update_corrects_the_value_keeping_id_provenance_and_audits_it(mem):
    p = italian(mem)
    q = mem.update("u", p.id, attribute="Mexican")
    assert (q.id, q.path, q.attribute, q.polarity) == (p.id, p.path, "Mexican", "like")
    assert (q.sentence, q.conversation_id, q.created_at) == (p.sentence, p.conversation_id, p.created_at)
    assert mem.preferences("u") == [q]
    last = mem.store.audit("u")[-1]
    assert (last.op, last.preference_id, last.cause, last.why) == ("update", p.id, "edited by the user",
                                                                   "edited by the user")
    assert last.before["attribute"] == "Italian" and last.after["attribute"] == "Mexican"
    # re-embedded: recall now follows the corrected value, not the old sentence
    assert mem.recall("Mexican", "u", k=1, gate=False)[0].score > mem.recall("Italian", "u", k=1, gate=False)[0].score
    assert mem.store.verify_audit("u").ok


def test_update_of_polarity_alone(mem):
    p = italian(mem)
    q = mem.update("u", p.id, polarity="dislike")
    assert (q.attribute, q.polarity) == ("Italian", "dislike")
    assert mem.history("u", p.id)[-1].after["polarity"] == "dislike"
    assert mem.update("u", p.id, polarity="dislike") == q            # nothing to change: nothing written
    assert len(mem.history("u", p.id)) == 2


def test_a_closed_category_takes_only_its_items(mem, schema):
    ref = schema.resolve("Desired Price Range")
    assert ref.detail.value_kind == "closed"
    p = mem.apply([Candidate(path=ref.path, attribute="cheap", sentence="Cheap places, always.")], "u", "c1").stored[0]
    assert mem.update("u", p.id, attribute="EXPENSIVE").attribute == "expensive"    # the listed item, as listed
    with pytest.raises(InputError, match="takes one of 'cheap', 'normal', 'expensive'"):
        mem.update("u", p.id, attribute="free")
    assert mem.preferences("u")[0].attribute == "expensive"


@pytest.mark.parametrize("kw, says", [({}, "nothing to change"), ({"attribute": "  "}, "non-empty"),
                                      ({"attribute": "x" * 201}, "at most 200"),
                                      ({"polarity": "love"}, "polarity must be one of")])
def test_bad_edits_are_input_errors_and_change_nothing(mem, kw, says):
    p = italian(mem)
    with pytest.raises(InputError, match=says):
        mem.update("u", p.id, **kw)
    assert mem.preferences("u") == [p] and len(mem.history("u", p.id)) == 1


def test_the_same_value_twice_in_a_category_is_a_conflict(mem):
    p = italian(mem)
    mem.add("I love Mexican food.", "u")
    with pytest.raises(ConflictError, match="already holds 'Mexican'"):
        mem.update("u", p.id, attribute="mexican")


def test_an_unknown_or_another_users_preference_is_not_found(mem):
    p = italian(mem)
    with pytest.raises(NotFoundError):
        mem.update("other", p.id, attribute="Mexican")
    with pytest.raises(NotFoundError):
        mem.update("u", "nope", attribute="Mexican")
    with pytest.raises(NotFoundError):
        mem.history("other", p.id)
    assert mem.preferences("u")[0].attribute == "Italian"


def test_an_opted_out_category_cannot_be_edited(mem, monkeypatch):
    p = italian(mem)
    # the opt-out purges what it covers, so only a write racing it meets one: the store's rule still refuses it
    monkeypatch.setattr(mem.store, "opt_outs", lambda user: ["points_of_interest/restaurant"])
    with pytest.raises(OptedOutError):
        mem.update("u", p.id, attribute="Mexican")
    monkeypatch.undo()
    assert mem.preferences("u")[0].attribute == "Italian"


def test_history_tells_how_it_came_to_be_and_keeps_no_content_after_a_delete(mem):
    p = italian(mem)
    mem.add("I love Italian food.", "u", conversation_id="c2")                    # seen again: a pass
    mem.update("u", p.id, attribute="Mexican")
    assert [a.op for a in mem.history("u", p.id)] == ["insert", "pass", "update"]
    mem.delete("u", p.id)
    h = mem.history("u", p.id)
    assert [a.op for a in h] == ["insert", "pass", "update", "delete"]
    assert all(a.before is None and a.after is None and a.cause == "erased" for a in h)
    assert "Mexican" not in json.dumps([a.model_dump(mode="json") for a in h])
    assert "Italian" not in json.dumps([a.model_dump(mode="json") for a in h])


def test_async_twin_has_update_and_history(mem):
    import asyncio

    p = italian(mem)
    am = AsyncMemory(mem)

    async def go():
        q = await am.update("u", p.id, attribute="Mexican")
        return q, await am.history("u", p.id)

    q, h = asyncio.run(go())
    assert q.attribute == "Mexican" and [a.op for a in h] == ["insert", "update"]


# --- CLI ---------------------------------------------------------------------------------------------------------
def test_cli_edit_and_history(tmp_path, mem):
    p = italian(mem, "acme:dana")
    mem.store.close()
    db = tmp_path / "m.db"
    r = run("prefs", "edit", p.id[:8], "--value", "Mexican", "--tenant", "acme", "-u", "dana", "--db", db, *FAST)
    assert r.exit_code == 0 and "'Mexican' (like)" in r.output, r.output
    r = run("prefs", "edit", p.id[:8], "--polarity", "dislike", "-u", "acme:dana", "--db", db, *FAST)
    assert r.exit_code == 0 and "(dislike)" in r.output, r.output
    r = run("prefs", "history", p.id[:8], "--tenant", "acme", "-u", "dana", "--db", db)
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "insert 'Italian'" in out and "'Italian' -> 'Mexican'" in out and "'Mexican' -> 'Mexican' (dislike)" in out
    assert "edited by the user" in out
    entries = json.loads(run("prefs", "history", p.id, "-u", "acme:dana", "--db", db, "--json").output)
    assert [e["op"] for e in entries] == ["insert", "update", "update"]


@pytest.mark.parametrize("args, says", [
    (["prefs", "edit", "zzz", "--value", "x", "-u", "acme:dana"], "no preference id 'zzz'"),
    (["prefs", "edit", "PID", "-u", "acme:dana"], "nothing to change"),
    (["prefs", "edit", "PID", "--polarity", "love", "-u", "acme:dana"], "love"),
    (["prefs", "edit", "PID", "--value", "x", "-u", "dana"], "--tenant acme"),
    (["prefs", "history", "zzz", "-u", "acme:dana"], "no preference id 'zzz'"),
])
def test_cli_edit_and_history_errors_exit_2(tmp_path, mem, args, says):
    p = italian(mem, "acme:dana")
    mem.store.close()
    r = run(*[a.replace("PID", p.id[:8]) for a in args], "--db", tmp_path / "m.db", *FAST[: 2 if args[1] == "edit" else 0])
    assert r.exit_code == 2, r.output
    assert says in r.output
