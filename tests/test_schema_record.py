"""A store remembers its schema: the first write records name + fingerprint; opening it with another schema
(or with none, so the in-car default) is a ConflictError naming both, CLI exit 2; the shipped smart-home example."""
from __future__ import annotations

import json
import threading
from importlib import resources

import pytest
from typer.testing import CliRunner

from boundmem import ConflictError, Memory, builtin_schema, load_schema
from boundmem.cli import app
from boundmem.embed import HashEmbedder
from boundmem.extract.keyword import KeywordExtractor
from boundmem.maintain.rules import RuleMaintainer
from boundmem.store.schema_record import SchemaMismatchError, bind_schema
from boundmem.store.sqlite import SQLiteStore

SMARTHOME = resources.files("boundmem.schema").joinpath("data/smarthome.yaml")
FAST = ["--extractor", "keyword", "--maintainer", "rules", "--embedder", "hash"]
runner = CliRunner()


def mem(store, schema):
    return Memory(schema=schema, store=store, extractor=KeywordExtractor(), maintainer=RuleMaintainer(),
                  embedder=HashEmbedder())


@pytest.fixture()
def smarthome():
    with resources.as_file(SMARTHOME) as p:
        return load_schema(p)


def test_the_smarthome_example_validates_and_means_what_readme_says(smarthome):
    with resources.as_file(SMARTHOME) as p:
        r = runner.invoke(app, ["schema", "validate", str(p)])
    assert r.exit_code == 0 and "2 main, 3 sub, 6" in r.output
    kinds = {ref.detail.name: (ref.detail.multiple, ref.detail.value_kind) for ref in smarthome.details()}
    assert kinds["Night Mode"] == (False, "closed")        # values unset, attributes listed: closed
    assert kinds["Favorite Artist"] == (True, "open")      # values unset, no attributes: open
    assert kinds["Light Color"] == (True, "open") and builtin_schema("smarthome") == smarthome


def test_first_write_records_the_schema_and_another_one_is_refused(tmp_path, smarthome):
    store = SQLiteStore(tmp_path / "home.db")
    m = mem(store, smarthome)
    assert m.add("hello there", "ann").stored == [] and store.schema_record() is None   # nothing written yet
    assert [p.attribute for p in m.add("I love jazz.", "ann").stored] == ["jazz"]
    assert json.loads(store.schema_record())["name"] == "smarthome"
    with pytest.raises(ConflictError) as e:
        mem(store, builtin_schema())
    assert "'smarthome'" in str(e.value) and "'incar'" in str(e.value) and e.value.code == "schema_mismatch"
    assert [p.attribute for p in mem(store, smarthome).preferences("ann")] == ["jazz"]   # its own schema still opens it
    store.close()


def test_wording_is_not_a_different_schema_but_a_category_is(smarthome):
    reworded = smarthome.model_copy(update={"description": "other words", "version": "2"})
    assert reworded.fingerprint == smarthome.fingerprint
    assert smarthome.prune(["Music"]).fingerprint != smarthome.fingerprint


def test_two_first_writers_with_different_schemas_one_wins(tmp_path, smarthome):
    store = SQLiteStore(tmp_path / "race.db")
    outcomes: list[str] = []

    def write(schema):
        try:
            bind_schema(store, schema)
            outcomes.append("ok")
        except SchemaMismatchError:
            outcomes.append("refused")

    ts = [threading.Thread(target=write, args=(s,)) for s in (smarthome, builtin_schema())]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(outcomes) == ["ok", "refused"]
    store.close()


def test_cli_without_schema_on_a_smarthome_store_exits_2_naming_both(tmp_path):
    db, conv = tmp_path / "home.db", tmp_path / "c.json"
    conv.write_text(json.dumps({"id": "c1", "turns": [{"role": "user", "text": "I love jazz."}]}))
    with resources.as_file(SMARTHOME) as p:
        r = runner.invoke(app, ["ingest", str(conv), "-u", "ann", "--db", str(db), "--schema", str(p), *FAST])
        assert r.exit_code == 0, r.output
        ok = runner.invoke(app, ["prefs", "list", "-u", "ann", "--db", str(db), "--schema", str(p)])
        assert ok.exit_code == 0 and "jazz" in ok.output
    for cmd in (["recall", "music", "-u", "ann", "--embedder", "hash"], ["prefs", "list", "-u", "ann"],
                ["ingest", str(conv), "-u", "ann", *FAST], ["opt-out", "Music", "-u", "ann"]):
        r = runner.invoke(app, [*cmd, "--db", str(db)])
        assert r.exit_code == 2 and "'smarthome'" in r.output and "'incar'" in r.output, (cmd, r.output)


def test_schema_migrate_records_the_new_schema_deliberately(tmp_path, smarthome):
    db = tmp_path / "home.db"
    store = SQLiteStore(db)
    mem(store, smarthome).add("I love jazz.", "ann")
    grown = tmp_path / "incar.yaml"
    from boundmem.schema.load import dump_yaml

    grown.write_text(dump_yaml(builtin_schema()))
    r = runner.invoke(app, ["schema", "migrate", "--db", str(db), "--schema", str(grown)], input="n\n")
    assert r.exit_code == 1 and json.loads(store.schema_record())["name"] == "smarthome"   # declined: unchanged
    r = runner.invoke(app, ["schema", "migrate", "--db", str(db), "--schema", str(grown), "--yes"])
    assert r.exit_code == 0 and "1 stored preference(s) under categories the new schema lacks" in r.output, r.output
    m = mem(store, builtin_schema())            # opens now; the smart-home preference is kept and erasable
    (p,) = m.preferences("ann")
    m.delete("ann", p.id)
    assert m.preferences("ann") == []
    store.close()


def test_docs_schema_guide_example_loads():
    from pathlib import Path

    from boundmem.schema.load import load_yaml

    section = (Path(__file__).resolve().parents[1] / "docs" / "guides" / "schema.md").read_text(encoding="utf-8")
    block = section[section.index("```yaml") + 7:]
    s = load_yaml(block[:block.index("```")], "schema.md")
    kinds = {ref.detail.name: ref.detail.value_kind for ref in s.details()}
    assert kinds == {"Preferred Room Temperature": "closed", "Favorite Artist": "open"}
    for cmd in ("schema validate", "schema show", "schema migrate", "load_schema", "Memory.local("):
        assert cmd in section
