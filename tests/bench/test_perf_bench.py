"""The perf harness runs on tiny sizes and reports what it measured (numbers themselves are not asserted)."""
from __future__ import annotations

import json

import pytest
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
                                 "--latency-queries", "10", "--async-conversations", "4", "--cache-recalls", "50",
                                 "--slurp", str(shared_data / "slurp" / "devel.jsonl"), "--load-requests", "4",
                                 "--load-rounds", "1", "--load-clients", "1,2", "--out", str(out)])
    assert r.exit_code == 0, r.output
    res = json.loads((out / "results.json").read_text())
    ex = res["extraction"]
    assert {"onnx", "torch"} <= set(ex) and all(e["conversations"] == 12 for e in ex.values())
    # the reader reads turns with its own encoder: the shared embedder embeds no user text (the schema once, at warm-up)
    assert all(e["embedded_texts_per_conversation"] == 0 for e in ex.values())
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
    # one forward pass per distinct text of an ingest; the interleaved surfaces and the query cache reported
    e = res["ingest"]["embedding"]
    assert 0 < e["distinct_per_conversation"] <= e["requested_per_conversation"]
    assert e["encoded_per_distinct_text"] <= 1.0
    # forward passes per conversation (MiniLM + the reader) equal the distinct texts, and the report says so
    f, r = res["ingest"]["forward_passes"], res["ingest"]["reader"]
    assert r["read_per_conversation"] == r["distinct_per_conversation"] > 0
    assert f["per_conversation"] == pytest.approx(f["distinct_texts_per_conversation"])
    assert "forward passes per conversation (MiniLM + reader) / distinct texts" in md
    assert lat["http"]["recall"]["cpu_ms"] > 0 and "CPU per recall" in md
    assert lat["concurrency"]["http"]["2"]["n"] == 4 and "requests/s at 2 clients / at 1" in md
    assert lat["surfaces"]["library"]["n"] == lat["surfaces"]["proxied"]["n"] == 10
    assert lat["query_cache"]["requests"] == 50 and 0 < lat["query_cache"]["hit_rate"] < 1
    assert "HTTP recall p95 - library p95" in md and "Query cache" in md


def test_repeated_command_stream_repeats_each_users_repertoire_and_keeps_one_offs_new(shared_data):
    from collections import Counter

    from boundmem_bench.perf import repeated_command_stream

    slurp = shared_data / "slurp" / "devel.jsonl"
    a = repeated_command_stream(slurp, users=10, per_user=30, repertoire=5, novel=0.3, seed=1)
    assert a == repeated_command_stream(slurp, users=10, per_user=30, repertoire=5, novel=0.3, seed=1)
    assert len(a) == 300
    said = Counter(q for _, q in a)
    once = [q for q, n in said.items() if n == 1]
    repeated = {q for q, n in said.items() if n > 1}
    # every repeated command belongs to one user (a repertoire is a user's own) and there are at most 5 per user
    owners = {q: {u for u, x in a if x == q} for q in repeated}
    assert all(len(o) == 1 for o in owners.values())
    assert all(sum(1 for q in repeated if u in owners[q]) <= 5 for u in range(10))
    assert 0.15 < len(once) / len(a) < 0.45   # the one-off share (some repertoire entries are asked once too)
    # without SLURP: synthetic commands, the same shape
    b = repeated_command_stream(None, users=3, per_user=10, repertoire=2, novel=0.5)
    assert len(b) == 30 and len({q for _, q in b}) < 30


def test_query_cache_and_surfaces_are_measured_on_a_model_free_memory(keyword_memory, tmp_path):
    from boundmem_bench.perf import _bench_user, measure_query_cache, measure_surfaces, server_args

    for i in range(3):
        keyword_memory.add([{"role": "user", "content": "I always prefer Italian food."}], _bench_user(i))
    stream = [(0, "play my music"), (1, "play my music"), (0, "play my music"), (2, "find a charger")]
    c = measure_query_cache(keyword_memory, stream)
    # the cache is per Memory and keyed by the text: the second and third "play my music" are hits
    assert (c["requests"], c["distinct"], c["hits"], c["misses"]) == (4, 2, 2, 2)
    assert c["recall_hit"]["n"] == 2 and c["recall_miss"]["n"] == 2
    qs = ["where should we eat", "any food nearby", "I am hungry"]
    # `boundmem serve` and `boundmem proxy` in their own processes, on the same database and stages
    s = measure_surfaces(keyword_memory, qs, tmp_path, server_args(keyword_memory, "hash", "keyword", "rules"))
    assert all(s[k]["n"] == 3 for k in ("embedding", "library", "http", "direct", "proxied", "proxy_recall"))
    assert s["proxy_overhead"]["n"] == 3 and set(s["ratios"]) >= {
        "library_p95_over_embedding_p95", "http_p95_minus_library_p95_ms", "proxy_overhead_p95_minus_recall_p95_ms"}
    # the proxy learnt every exchange before the next sample started
    assert all(j.finished for u in range(3) for j in keyword_memory.jobs.of_user(_bench_user(u)))


def test_throughput_as_clients_grow_is_measured_interleaved_with_the_load_beside(keyword_memory, tmp_path):
    from boundmem_bench.perf import _bench_user, _concurrency_lines, measure_concurrency, server_args

    keyword_memory.add([{"role": "user", "content": "I always prefer Italian food."}], _bench_user(0))
    c = measure_concurrency(keyword_memory, ["where should we eat", "any food nearby"], tmp_path,
                            server_args(keyword_memory, "hash", "keyword", "rules"), clients=(1, 3), per_level=6,
                            rounds=2, serve_args=("--workers", "2"), reference_args=("--workers", "1"))
    for name in ("http", "proxy", "http_reference"):
        assert c[name]["1"]["n"] == c[name]["3"]["n"] == 12 and len(c[name]["3"]["requests_per_s"]) == 2
        assert len(c[name]["load_per_round"]) == 2 and c[name]["scaling"] > 0
        assert c[name]["3"]["server_cores"] >= 0
    assert c["workers_gain"] > 0
    md = "\n".join(_concurrency_lines(c))
    assert "`--workers 2`" in md and "requests/s at 3 clients / at 1" in md and "re-measure on a quiet machine" in md
    assert "http `--workers 1` | 3 |" in md and "`--workers 2` / `--workers 1`" in md
