"""Every Python block in README.md and the docs runs as written.

Why: an example that no longer runs is worse than none, and nobody notices until a newcomer pastes it. Each page's
blocks run in order in one namespace (a page reads as one session), in a fresh directory, output captured. A block
that cannot run here (it needs a live server, an LLM endpoint, another machine) says so on the line before its fence:
`<!-- not run: why -->`; the reason is required."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)
NOT_RUN = re.compile(r"<!-- not run: *(.*?) *-->\s*$")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md") if "_hooks" not in p.parts)]


def blocks(text: str) -> list[tuple[int, str, str | None]]:
    """(line, code, why it is not run or None) of every ```python block."""
    found = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = NOT_RUN.search(before)
        found.append((text.count("\n", 0, m.start()) + 1, m.group(1), skip.group(1) if skip else None))
    return found


RUNNABLE = [p for p in pages() if any(why is None for _, _, why in blocks(p.read_text(encoding="utf-8")))]


def test_every_skipped_block_says_why():
    for page in pages():
        for line, _, why in blocks(page.read_text(encoding="utf-8")):
            assert why != "", f"{page.relative_to(ROOT)}:{line}: a block not run must say why"


def test_the_finder_sees_blocks_and_markers():
    text = "x\n```python\na = 1\n```\n<!-- not run: needs a server -->\n```python\nb = 2\n```\n"
    assert blocks(text) == [(2, "a = 1\n", None), (6, "b = 2\n", "needs a server")]


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    out = io.StringIO()
    try:
        for line, code, why in blocks(page.read_text(encoding="utf-8")):
            if why is None:
                with contextlib.redirect_stdout(out):
                    exec(compile("\n" * (line) + code, str(page.relative_to(ROOT)), "exec"), namespace)
    finally:
        for value in list(namespace.values()):   # close what the page opened (job workers, stores)
            mem = getattr(value, "memory", value)
            if type(mem).__name__ == "Memory":
                mem.close_jobs()
                mem.store.close()
