"""The abuse tier: the attacks of the probes so far, re-runnable, counted per kind. Each test runs many
cases of one kind and records every case tried and every one that failed; the session ends with a table

    abuse suite: kind | tried | failed

so the next probe starts from it. Run alone with `python -m pytest -m abuse tests/abuse` (it is part of the default
run too; ~1 min here). Each test still fails on its own failures, naming the first ones."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import pytest

from service.conftest import memory  # noqa: F401  (the fast Memory fixture: keyword extractor, hash embedder)

_TALLY: dict[str, list[int]] = defaultdict(lambda: [0, 0])


@dataclass
class Kind:
    name: str
    failures: list[str] = field(default_factory=list)

    def check(self, ok: bool, case: object) -> None:
        _TALLY[self.name][0] += 1
        if not ok:
            _TALLY[self.name][1] += 1
            self.failures.append(repr(case)[:300])

    def done(self) -> None:
        assert not self.failures, f"{self.name}: {len(self.failures)} failed, e.g. {self.failures[:5]}"


@pytest.fixture()
def emem(tmp_path, schema, cue_extractor):
    """The fast Memory with episodic memory on for every user."""
    from boundmem.config import EpisodicSettings
    from boundmem.embed import HashEmbedder
    from boundmem.maintain.rules import RuleMaintainer
    from boundmem.memory import Memory
    from boundmem.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "episodic.db")
    mem = Memory(schema=schema, store=store, extractor=cue_extractor, maintainer=RuleMaintainer(),
                 embedder=HashEmbedder(), episodic=EpisodicSettings(enabled=True))
    yield mem
    mem.close_jobs()
    store.close()


@pytest.fixture()
def kind(request):
    """`kind("name")`: a counter of cases of one attack kind; its failures fail the test at the end."""
    made: list[Kind] = []

    def make(name: str) -> Kind:
        made.append(Kind(name))
        return made[-1]

    yield make
    for k in made:
        k.done()


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/abuse/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.abuse)


def pytest_terminal_summary(terminalreporter):
    if not _TALLY:
        return
    w = max(len(k) for k in _TALLY)
    terminalreporter.section("abuse suite: tried / failed per kind")
    for k, (tried, failed) in sorted(_TALLY.items()):
        terminalreporter.write_line(f"{k:<{w}}  {tried:>6} tried  {failed:>4} failed")
    tried, failed = (sum(v[i] for v in _TALLY.values()) for i in (0, 1))
    terminalreporter.write_line(f"{'total':<{w}}  {tried:>6} tried  {failed:>4} failed")
