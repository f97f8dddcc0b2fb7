"""The default extractor is the trained reader: what it stores from a turn read with the assistant's turn before it,
what it never stores, and that its files fail loudly when they do not belong together."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from boundmem.config import Settings
from boundmem.embed.registry import make_embedder
from boundmem.errors import BoundmemError
from boundmem.extract.reader import ReaderExtractor
from boundmem.extract.reader_model import BUNDLED, ReaderModel, ReaderModelMismatch, load_settings
from boundmem.models import Conversation, Turn
from boundmem.schema.load import builtin_schema

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reader():
    return ReaderExtractor(make_embedder("minilm", Settings()))


def read(reader, text: str, context: str = "", schema=None):
    turns = ((Turn(role="assistant", text=context),) if context else ()) + (Turn(role="user", text=text),)
    found = reader.extract(Conversation(id="c", turns=turns), schema or builtin_schema()).candidates
    return {(c.path.detail, c.attribute, c.polarity, c.evidence) for c in found}


def test_a_stated_preference_is_stored_in_the_users_words(reader):
    assert read(reader, "I'm a huge fan of Rammstein, honestly.") == {
        ("favorite_artists_bands", "Rammstein", "like", "stated")}


def test_a_terse_answer_is_read_with_the_assistants_question(reader):
    assert read(reader, "Ionity, always", context="Which charging network do you use?") == {
        ("preferred_charging_network", "Ionity", "like", "stated")}


@pytest.mark.parametrize("text", ["My wife loves jazz.", "What's your favourite kind of music?",
                                  "I love my dog, she is twelve now.", "Wie spät ist es in Berlin?"])
def test_nothing_is_stored_from_others_tastes_questions_out_of_schema_or_other_languages(reader, text):
    assert {r for r in read(reader, text) if r[3] == "stated"} == set()


def test_values_are_the_users_words_or_a_listed_item(reader):
    schema = builtin_schema()
    listed = {r.detail.key: set(r.detail.attributes) for r in schema.details()}
    closed = {r.detail.key for r in schema.details() if r.detail.value_kind == "closed"}
    texts = ["please always keep it at twenty two degrees", "I can't stand highways, avoid them",
             "we always stop at Sainsbury's for the weekly shop", "the fan on low is how I like it",
             "my go-to is Peruvian food", "I only ever fill up at Esso", "keep the lights dim for me please"]
    for text in texts:
        for detail, value, _, _ in read(reader, text):
            if detail in closed:
                assert value in listed[detail], (text, value)
            else:
                assert value.casefold() in text.casefold(), (text, value)


def test_an_opted_out_category_is_not_filed_under_a_neighbour(reader):
    schema = builtin_schema()
    pruned = schema.prune(["Favorite Genres"])
    assert not any(d == "favorite_genres" for d, *_ in read(reader, "I love jazz, always have.", schema=pruned))
    assert pruned.unpruned is schema


def test_after_warm_only_the_users_turns_cost_a_forward_pass(schema):
    calls: list[list[str]] = []
    emb = make_embedder("minilm", Settings())    # the reader scores in MiniLM's space: its own embedder, recorded
    inner = emb.embed

    def recording(texts):
        calls.append(list(texts))
        return inner(texts)

    emb.embed = recording
    ex = ReaderExtractor(emb)
    ex.warm(schema)
    assert calls, "the schema's descriptions are embedded at warm-up"
    calls.clear()
    ex.extract(Conversation(id="c", turns=(Turn(role="user", text="I always prefer covered parking."),)), schema)
    assert calls == []


def test_model_files_that_do_not_belong_together_fail_loudly(tmp_path: Path):
    for name in ("encoder.onnx", "heads.onnx", "reader.json"):
        shutil.copy(BUNDLED / name, tmp_path / name)
    assert load_settings(tmp_path).input_hash == load_settings(BUNDLED).input_hash
    with (tmp_path / "heads.onnx").open("ab") as f:
        f.write(b"\0")
    with pytest.raises(ReaderModelMismatch, match="retrain") as e:
        ReaderModel(tmp_path).warm()
    assert isinstance(e.value, BoundmemError)
    (tmp_path / "reader.json").unlink()
    with pytest.raises(ReaderModelMismatch, match="missing"):
        load_settings(tmp_path)


def test_the_bundled_model_was_trained_on_the_data_as_it_is():
    """The trainer records a hash of every data file it learned from; a changed training file, or a new file with
    training lines, means the bundled model is stale: retrain (held-out and dev files may grow without it)."""
    pytest.importorskip("boundmem_bench")
    from boundmem_bench.train.reader import training_files
    from boundmem_bench.train.reader_data import annotated_files, manifest

    trained = json.loads((BUNDLED / "training.json").read_text())["data"]
    now = manifest(training_files(annotated_files(), {"train"}))
    assert {k: v for k, v in trained.items() if k != "devel_slots.jsonl"} == now, "reader data changed: retrain"


def test_a_one_off_choice_of_an_open_value_repeated_in_three_conversations_is_promoted(tmp_path):
    from boundmem import Memory

    m = Memory.local(tmp_path / "m.db")
    try:
        results = [m.add(Conversation(id=f"c{k}", turns=(Turn(role="user", text=text),)), user="u")
                   for k, text in enumerate(["play some Radiohead", "play some Radiohead", "play some Radiohead"])]
        # kept apart twice; the third time it is promoted (and leaves the observations)
        assert [len(r.observed) for r in results] == [1, 1, 0] and results[0].stored == []
        assert [p.attribute for p in results[2].promoted] == ["Radiohead"]
    finally:
        m.store.close()


def test_a_bulk_read_goes_through_the_encoder_in_bounded_batches_with_the_same_readings(reader):
    """One call over many turns is read in batches (a single batch of every window ran a machine out of memory),
    each turn keeping its own readings across the batch boundaries."""
    model = reader.model
    turns = [("", f"I always listen to jazz number {i} on the way to work.") for i in range(model.BATCH_WINDOWS + 9)]
    sizes: list[int] = []
    real = model._read_batch

    def spy(ts, ws):
        sizes.append(sum(len(w) for w in ws))
        return real(ts, ws)

    model._read_batch = spy
    try:
        bulk = model.read_many(turns)
    finally:
        del model._read_batch
    assert len(sizes) >= 2 and max(sizes) <= model.BATCH_WINDOWS and sum(sizes) == len(turns)
    # every turn keeps its own readings, in order, across the batch boundaries
    assert len(bulk) == len(turns)
    assert all(r.text in text for (_, text), rs in zip(turns, bulk) for r in rs)
    assert all(any(r.text.startswith("jazz") for r in rs) for rs in bulk)
