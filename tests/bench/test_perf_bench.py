"""The perf harness runs on tiny sizes and reports what it measured (numbers themselves are not asserted)."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from boundmem.cli.root import app, _mount


def test_perf_harness_store_only(tmp_path):
    _mount()
    out = tmp_path / "perf"
    r = CliRunner().invoke(app, ["bench", "perf", "--skip-models", "--users", "20,60", "--queries", "15",
                                 "--writers", "0", "--out", str(out)])
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    rows = res["recall_scaling"]["sqlite"]
    assert [x["users"] for x in rows] == [20, 60] and [x["preferences"] for x in rows] == [200, 600]
    assert all(0 < x["p50_ms"] <= x["p99_ms"] for x in rows)
    assert (out / "recall_latency.png").stat().st_size > 1000
    assert "| 60 | 600 |" in (out / "report.md").read_text()


def test_perf_harness_measures_both_backends_on_real_conversations(tmp_path, shared_data, minilm, minilm_torch):
    from boundmem_bench.perf import backends

    assert {"onnx", "torch"} <= set(backends())   # the dev install has both (and the int8 file); each is measured
    _mount()
    out = tmp_path / "perf"
    r = CliRunner().invoke(app, ["bench", "perf", "--data", str(shared_data / "carmem" / "dataset.jsonl"),
                                 "--conversations", "12", "--users", "10", "--queries", "5", "--writers", "0",
                                 "--latency-queries", "10", "--async-conversations", "4", "--out", str(out)])
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    ex = res["extraction"]
    assert {"onnx", "torch"} <= set(ex) and all(e["conversations"] == 12 for e in ex.values())
    assert all(e["embedded_texts_per_conversation"] > 0 for e in ex.values())
    # the two backends give the same vectors, hence the same extractions
    assert ex["onnx"]["candidates"] == ex["torch"]["candidates"] > 0
    assert res["ingest"]["conversations"] == 12
    lat = res["latency"]
    assert lat["recall_library"]["n"] == lat["http"]["recall"]["n"] == lat["proxy"]["proxied"]["n"] == 10
    assert lat["http"]["async_accept"]["n"] == 4 and lat["http"]["queue_lag"]["not_done"] == 0
    md = (out / "report.md").read_text()
    # every row names its backend: the file the ONNX backend runs, or torch
    assert "[onnx fp32]" in md and "[torch]" in md and "[onnx]" not in md
    assert "fraction of the embedding ceiling" in md and "recall over HTTP" in md and "boundmem proxy" in md
