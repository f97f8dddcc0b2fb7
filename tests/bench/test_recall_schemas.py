"""The per-schema recall sets (boundmem_bench/recall_data): every request names preferences its schema has, the
held-out parts are whole schemas and writers, and the summary keeps them apart."""
from boundmem_bench.recall_schemas import HELD_OUT_SCHEMAS, HELD_OUT_WRITERS, load_sets, markdown, past_cases, summarise


def test_every_set_resolves_in_its_schema_and_holds_every_kind():
    sets = load_sets()
    assert len(sets) >= 4 and HELD_OUT_SCHEMAS <= {s.name for s, _ in sets}
    for schema, cases in sets:
        kinds = {c.kind for c in cases}
        assert {"related", "unrelated", "own_value", "constrained"} <= kinds, schema.name
        assert HELD_OUT_WRITERS <= {c.writer for c in cases}, schema.name
        for c in cases:
            for p in c.prefs:
                schema.resolve(p.path)   # UnknownCategoryError if a set names a category its schema lacks
            if c.kind in ("related", "constrained"):
                assert c.expect and all(any(p.path == t for p in c.prefs) for t in c.expect), c.text
        texts = [c.text for c in cases if c.kind == "related"]
        assert len(texts) == len(set(texts)), f"{schema.name}: a related request twice"
        assert past_cases(schema.name, [p for c in cases for p in c.prefs])


def test_the_summary_keeps_held_out_apart_and_counts_episodes():
    rows = [{"schema": "s", "held_out": h, "kind": k, "ok": ok, "got": ["a/b/c"] if not ok else [],
             "tokens_added": 10, "episodes": [] if ok else ["x"]}
            for h in (False, True) for k, ok in (("related", False), ("unrelated", True), ("unrelated", False))]
    rows.append({"schema": "s", "held_out": False, "kind": "past", "ok": True, "got": [], "tokens_added": 0,
                 "episodes": ["x"]})
    s = summarise(rows)
    assert set(s) == {"s/visible", "s/held_out"}
    assert s["s/visible"]["unrelated_empty"] == 0.5 and s["s/visible"]["unrelated_episodes_empty"] == 0.5
    assert s["s/visible"]["past_episode_hit@1"] == 1.0 and "past_episode_hit@1" not in s["s/held_out"]
    assert "| s/held_out |" in markdown(s)
