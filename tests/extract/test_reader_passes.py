"""The reader costs one forward pass per distinct input of an extract call: a turn said twice (in one conversation
or across a batch) and an assistant turn that several pronouns point at are each read once."""
from __future__ import annotations

import pytest

from boundmem.config import Settings
from boundmem.embed.registry import make_embedder
from boundmem.extract.reader import ReaderExtractor, _Readings
from boundmem.models import Conversation, Turn
from boundmem.schema.load import builtin_schema

pytestmark = pytest.mark.slow


class _Counting:
    """A stand-in model that records what it is asked to read (no spans)."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[str, str]]] = []

    def read_many(self, inputs):
        self.batches.append(list(inputs))
        return [[] for _ in inputs]


def test_each_distinct_input_is_read_once_across_steps():
    model = _Counting()
    r = _Readings(model)   # type: ignore[arg-type]
    r.read([("", "a"), ("q", "b"), ("", "a")])
    r.read([("", "q")])
    r.read([("", "q"), ("q", "b")])
    assert model.batches == [[("", "a"), ("q", "b")], [("", "q")]]
    assert (r.asked, len(r.memo)) == (6, 3)


@pytest.fixture(scope="module")
def reader():
    ex = ReaderExtractor(make_embedder("minilm", Settings()))
    ex.warm(builtin_schema())
    return ex


def _passes(ex, convs) -> tuple[int, int, int]:
    """(texts the encoder ran on, distinct inputs, inputs asked for) during one extract_many."""
    before = (ex.model.texts_read, ex.distinct, ex.asked)
    ex.extract_many(convs, builtin_schema())
    return ex.model.texts_read - before[0], ex.distinct - before[1], ex.asked - before[2]


def test_a_turn_said_twice_costs_one_pass(reader):
    q, a = Turn(role="assistant", text="Which charging network do you use?"), Turn(role="user", text="Ionity, always.")
    same = Conversation(id="c", turns=(q, a, q, a))
    read, distinct, asked = _passes(reader, [same, same.model_copy(update={"id": "d"})])
    assert read == distinct and asked >= 4 and distinct < asked


def test_forward_passes_equal_distinct_inputs_with_pronouns(reader):
    ctx = Turn(role="assistant", text="Shall I put on some Miles Davis?")
    conv = Conversation(id="p", turns=(ctx, Turn(role="user", text="Yes, I love it, I really love it."),
                                       ctx, Turn(role="user", text="Oh I love that one, play it.")))
    read, distinct, asked = _passes(reader, [conv])
    assert read == distinct <= asked
