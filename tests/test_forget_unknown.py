"""One rule for a user the store does not hold: `Memory.forget` raises NotFoundError as `prefs forget` exits 2
and `DELETE /v1/users/{user}` answers 404 (tests/service/test_tenancy.py), and records nothing about the typo."""
from __future__ import annotations

import pytest

from boundmem import NotFoundError


@pytest.fixture()
def mem(keyword_memory):
    return keyword_memory


def test_forget_of_an_unknown_or_forgotten_user_is_not_found(mem):
    with pytest.raises(NotFoundError, match="no user 'ghost'"):
        mem.forget("ghost")
    assert mem.store.audit("ghost") == [] and mem.store.users() == []
    mem.add("I love Italian food.", "u")
    assert mem.forget("u") == 1
    with pytest.raises(NotFoundError, match="forgotten"):
        mem.forget("u")


def test_forget_of_a_user_with_only_queued_conversations_drops_them(mem):
    mem.submit("I love Italian food.", "q", start_worker=False)
    assert mem.forget("q") == 0 and mem.jobs.pending("q") == 0
