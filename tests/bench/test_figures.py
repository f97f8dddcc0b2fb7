"""Published figures come from results files: README's table and docs/benchmarks/ equal what the committed files in
benchmarks/results/ render to; a results file round-trips; a bad one is refused naming the file."""
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from boundmem_bench.cli import app
from boundmem_bench.render import END, START, benches, block_of, differences, headline_table, load_all, rendered
from boundmem_bench.results import Figure, ResultsFileError, read_results, write_results

ROOT = Path(__file__).resolve().parents[2]
RESULTS, DOCS, README = ROOT / "benchmarks" / "results", ROOT / "docs" / "benchmarks", ROOT / "README.md"


def test_readme_figures_are_the_rendered_ones():
    want = headline_table(benches(app), load_all(RESULTS, [b.name for b in benches(app)]))
    assert block_of(README.read_text(encoding="utf-8")) == want.strip(), \
        "README's figures table differs from the results files: run `boundmem bench render`"


def test_benchmark_pages_are_the_rendered_ones():
    files = rendered(benches(app), RESULTS, DOCS, README)
    assert differences(files, DOCS) == [], "run `boundmem bench render`"


def test_a_hand_edited_figure_is_caught(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(README.read_text(encoding="utf-8"), encoding="utf-8")
    docs = tmp_path / "docs"
    files = rendered(benches(app), RESULTS, docs, readme)
    for p, text in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    assert differences(files, docs) == []
    text = readme.read_text(encoding="utf-8")
    block = block_of(text)
    readme.write_text(text.replace(block, block.replace("|---|---|---|---|", "|---|---|---|---|\n| made up | 0.999 | x | y |")))
    page = docs / "index.md"
    page.write_text(page.read_text() + "\n| a figure typed by hand | 1.000 |\n")
    (docs / "old-results.md").write_text("# An old before/after table\n")
    diffs = differences(files, docs)
    assert any(str(readme) in d for d in diffs) and any(str(page) in d for d in diffs)
    assert any("old-results.md" in d and "no bench renders" in d for d in diffs)


def _bench_names():
    return [b.name for b in benches(app)]


def test_results_file_round_trips_with_its_provenance(tmp_path):
    path = write_results("recall", tmp_path, "# bench recall\n\n## part\n\n![plot](curve.png)\n",
                         [Figure("hit@1", 0.91234), Figure("none injected", 0.5, "pct"), Figure("p95", 12.25, ".1f", "ms"),
                          Figure("ratio", 1.5, ".2f", "x"), Figure("missing", None)],
                         summary={"n": 3})
    assert path == tmp_path / "recall.json"
    r = read_results(path)
    assert [f.text() for f in r.headline] == ["0.912", "50.0 %", "12.2 ms", "1.50x", "–"]
    assert r.run["date"] and "load" in r.run and r.run["machine"]["cores"]
    assert r.summary == {"n": 3}
    files = rendered(benches(app), tmp_path, tmp_path / "docs", None)
    page = files[tmp_path / "docs" / "recall.md"]
    assert "## The run" in page and "| hit@1 | 0.912 |" in page
    assert "### part" in page and "![plot]" not in page   # the report's headings one level down, plots named
    assert "Not yet run on this commit" in files[tmp_path / "docs" / "carmem.md"]


@pytest.mark.parametrize("content, says", [
    ("not json", "not JSON"),
    ("[1, 2]", "JSON object"),
    (json.dumps({"format": 99}), "format 99"),
    (json.dumps({"format": 1, "bench": "recall", "run": {}, "headline": [], "report": 3}), "'report'"),
    (json.dumps({"format": 1, "bench": "scale", "run": {}, "headline": [], "report": ""}), "named scale.json"),
    (json.dumps({"format": 1, "bench": "recall", "run": {}, "headline": [{"label": "x", "value": [1]}], "report": ""}),
     "headline[0]"),
])
def test_a_bad_results_file_is_refused_naming_it(tmp_path, content, says):
    p = tmp_path / "recall.json"
    p.write_text(content)
    with pytest.raises(ResultsFileError) as e:
        load_all(tmp_path, _bench_names())
    assert str(p) in str(e.value) and says in str(e.value)


def test_a_results_file_for_no_bench_is_refused(tmp_path):
    write_results("nosuchbench", tmp_path, "# x\n")
    with pytest.raises(ResultsFileError, match="no `boundmem bench nosuchbench`"):
        load_all(tmp_path, _bench_names())


def test_bad_figures_and_names_are_refused_before_writing(tmp_path):
    with pytest.raises(ResultsFileError, match="format spec"):
        Figure("x", 1.0, "%%")
    with pytest.raises(ResultsFileError, match="results name"):
        write_results("../escape", tmp_path, "")
    with pytest.raises(ResultsFileError, match="not a Figure"):
        write_results("recall", tmp_path, "", [("x", 1)])
    assert list(tmp_path.iterdir()) == []


def test_render_command_checks_writes_and_needs_the_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{START}\nA-HAND-TYPED-TABLE\n{END}\n")
    args = ["render", "--results", str(RESULTS), "--docs", str(tmp_path / "docs"), "--readme", str(readme)]
    run = CliRunner().invoke
    assert run(app, [*args, "--check"]).exit_code == 1
    assert run(app, args).exit_code == 0
    assert run(app, [*args, "--check"]).exit_code == 0
    assert "A-HAND-TYPED-TABLE" not in readme.read_text() and "| figure | value | bench | run |" in readme.read_text()
    readme.write_text("# no markers\n")
    res = run(app, args)
    assert res.exit_code == 2 and "figures:start" in res.output


def test_the_index_page_example_runs(tmp_path, monkeypatch, capsys):
    import tempfile

    code = (DOCS / "index.md").read_text(encoding="utf-8").split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    exec(compile(code, str(DOCS / "index.md"), "exec"), {})
    written = read_results(Path(capsys.readouterr().out.strip()))
    assert written.bench == "recall" and [f.text() for f in written.headline] == ["0.750", "0.0 %"]


def test_a_bench_command_writes_its_results_file(tmp_path):
    """One real (tiny) bench run: its results file carries the run's provenance, its report and its figures."""
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["scale", "--users", "20,40", "--per-user", "2", "--queries", "10", "--out", str(out),
                                 "--work", str(tmp_path)])
    assert r.exit_code == 0, r.output
    res = read_results(out / "scale.json")
    assert res.report == (out / "report.md").read_text()
    assert res.headline[0].label.startswith("per-user search p95 at 40 users, sqlite") and res.headline[0].value > 0
    assert res.run["load"]["start"] and res.run["load"]["end"] and res.run["machine"]["cores"]
    assert "commit" in res.run and "dirty" in res.run
