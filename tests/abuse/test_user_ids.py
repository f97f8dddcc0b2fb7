"""Two rules for a user id. `add(user="bad user")` and `user=""` stored data the CLI then refused
to list or forget; `user=None`, `recall(None)`, `recall([...parts])` raised AttributeError and `Turn(role="bot")`
pydantic's ValidationError. One rule everywhere: refused before anything is stored, a BoundmemError naming the
argument."""
from __future__ import annotations

import pytest

from boundmem.errors import BoundmemError
from boundmem.models import Turn

BAD_USERS = ["bad user", "", " alice", "alice\n", None, 7, ["alice"], "a" * 129, "alice:", ":alice", "a:b:c", "bob\x00"]


def test_a_bad_user_id_is_refused_by_every_public_method_before_anything_is_stored(memory, kind):
    k = kind("user ids: one rule in the library")
    calls = {"add": lambda u: memory.add("I love Italian food.", u), "submit": lambda u: memory.submit("I love jazz.", u),
             "recall": lambda u: memory.recall("food", u), "preferences": lambda u: memory.preferences(u),
             "export": lambda u: memory.export(u), "forget": lambda u: memory.forget(u),
             "recall_all": lambda u: memory.recall_all("food", u), "user_schema": lambda u: memory.user_schema(u),
             "opt_out": lambda u: memory.opt_out(u, "points_of_interest"),
             "opt_in": lambda u: memory.opt_in(u, "points_of_interest"),
             "delete": lambda u: memory.delete(u, "0" * 32), "update": lambda u: memory.update(u, "0" * 32, "Vegan"),
             "history": lambda u: memory.history(u, "0" * 32), "observations": lambda u: memory.observations(u),
             "confirm": lambda u: memory.confirm(u, "0" * 32), "dismiss": lambda u: memory.dismiss(u, "0" * 32),
             "consents": lambda u: memory.consents(u), "apply": lambda u: memory.apply([], u, None)}
    for (name, call), user in ((c, u) for c in calls.items() for u in BAD_USERS):
        try:
            call(user)
            ok = False
        except BoundmemError as e:
            ok = "'user'" in str(e)
        except Exception:  # noqa: BLE001 - anything else is the bug
            ok = False
        k.check(ok, (name, user))
    k.check(memory.store.users() == [], f"stored under a bad id: {memory.store.users()}")
    k.check(not memory.consents("alice"), "a consent record was written under a bad id")


@pytest.mark.parametrize("utterance", [None, ["food"], [{"type": "text", "text": "food"}], 3])
def test_a_bad_utterance_is_an_error_naming_it(memory, utterance, kind):
    k = kind("user ids: bad utterance")
    with pytest.raises(BoundmemError) as e:
        memory.recall(utterance, "alice")
    k.check("'utterance'" in str(e.value), str(e.value))


def test_a_bad_turn_is_a_boundmem_error(kind):
    k = kind("user ids: bad turn")
    for args in ({"role": "bot", "text": "hi"}, {"role": "user", "text": ""}, {"role": "user"}):
        with pytest.raises(BoundmemError) as e:
            Turn(**args)
        k.check("argument" in str(e.value), str(e.value))
