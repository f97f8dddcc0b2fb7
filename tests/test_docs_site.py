"""The docs site builds with `mkdocs build --strict` (every nav page there, every link resolving, every generated
reference page generated), and README stays the short front door it is meant to be.

Why a test and not only CI: a page renamed on one branch and linked on another breaks the build only after the
merge; the test suite is where that is seen first."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ISSUE_IN_HEADING = re.compile(r"^#+ .*(#\d+|\bissue \d+)", re.I | re.M)


def test_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    start, end = text.index("<!-- figures:start -->"), text.index("<!-- figures:end -->")
    assert start < end
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"


def test_no_issue_numbers_in_headings():
    for page in [ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md")]:
        bad = ISSUE_IN_HEADING.findall(page.read_text(encoding="utf-8"))
        assert not bad, f"{page.relative_to(ROOT)}: a heading carries an issue number: {bad}"


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    site = tmp_path / "site"
    for page in ("reference/cli/index.html", "reference/http/index.html", "reference/settings/index.html",
                 "reference/api/index.html", "reference/openapi.json"):
        assert (site / page).exists(), page
    assert "BOUNDMEM_MAX_INGEST_SECONDS" in (site / "reference/settings/index.html").read_text(encoding="utf-8")
    assert "boundmem prefs list" in (site / "reference/cli/index.html").read_text(encoding="utf-8")


def test_the_settings_table_names_every_variable_settings_reads():
    """The table is generated from the fields' descriptions: a variable read in `from_env` but missing from them
    would be a setting nobody can find."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "_hooks" / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    table = generate.settings_table()
    source = (ROOT / "src" / "boundmem" / "config.py").read_text(encoding="utf-8")
    read = set(re.findall(r'"((?:BOUNDMEM|OPENAI|AZURE)_[A-Z_]+|CMAKE_ARGS|XDG_CACHE_HOME)"',
                          source[source.index("def from_env"):source.index("class _Unset")]))
    missing = sorted(v for v in read if v not in table)
    assert not missing, f"variables read by Settings.from_env but not in the generated table: {missing}"
