"""CAIM's SQLite file: users isolated, writes all-or-nothing, state survives the process."""
from datetime import date

import pytest

from boundmem.caim.base import DialogueTurn
from boundmem.caim.models import ThoughtDraft
from boundmem.caim.store import CAIMStore
from boundmem.errors import NotFoundError
from boundmem.caim.system import CAIM

D = date(2023, 5, 1)


def _draft(text, src="2023-05-01#0"):
    return ThoughtDraft(text=text, tags=("Preferences/Music/genre",), timestamp=D, source_turn_ids=(src,))


def test_users_never_see_each_other(tmp_path):
    s = CAIMStore(tmp_path / "c.db")
    with s.tx("alice") as tx:
        a = tx.insert(_draft("User likes jazz"))
        tx.push(D, DialogueTurn(id="2023-05-01#0", query="hi", response="hello"))
    with s.tx("bob") as tx:
        assert tx.thoughts() == [] and tx.stm() == []
        with pytest.raises(NotFoundError):
            tx.get(a.id)
        with pytest.raises(NotFoundError):
            tx.delete(a.id)
        with pytest.raises(NotFoundError):
            tx.update(a.id, text="hacked", tags=(), timestamp=D, sources=())
        tx.forget()
    assert [t.text for t in s.thoughts("alice")] == ["User likes jazz"]
    assert len(s.stm("alice")) == 1


def test_transaction_rolls_back_on_error(tmp_path):
    s = CAIMStore(tmp_path / "c.db")
    with pytest.raises(RuntimeError):
        with s.tx("alice") as tx:
            tx.insert(_draft("User likes jazz"))
            raise RuntimeError("boom")
    assert s.thoughts("alice") == []


def test_memory_persists_across_store_instances(tmp_path):
    db = tmp_path / "c.db"
    with CAIMStore(db).tx("alice") as tx:
        tx.insert(_draft("User likes jazz"))
    other = CAIMStore(db)
    assert [t.source_turn_ids for t in other.thoughts("alice")] == [("2023-05-01#0",)]


def test_retrieval_is_per_user(tmp_path):
    m = CAIM(db=tmp_path / "c.db")  # no model: lexicon tags, hashing embedder
    m.add_session("alice", D, [DialogueTurn(id="2023-05-01#0", query="I love jazz music, especially Miles Davis.",
                                            response="Jazz is wonderful.")])
    m.add_session("bob", D, [DialogueTurn(id="2023-05-01#0", query="I went hiking in the mountains.",
                                          response="Sounds fun.")])
    q = "What music do I like?"
    assert any("jazz" in i.text.lower() for i in m.retrieve("alice", q, date(2023, 5, 7)).items)
    bob = m.retrieve("bob", q, date(2023, 5, 7))
    assert all("jazz" not in i.text.lower() for i in bob.items)
    assert all("jazz" not in t.text.lower() for t in m.thoughts("bob"))


def test_empty_user_id_is_refused(tmp_path):
    with pytest.raises(ValueError, match="user id"):
        with CAIMStore(tmp_path / "c.db").tx(" "):
            pass
