"""The model-free maintainer under its own name: LocalMaintainer's rules, which need no model (polarity is the
extractor's data, compared rather than re-judged). Kept for installs and tests that name it."""
from __future__ import annotations

from .local import LocalMaintainer


class RuleMaintainer(LocalMaintainer):
    name = "rules"
    embedder = None  # class-level, so subclasses that skip __init__ (test doubles do) still work

    def __init__(self) -> None:
        super().__init__(embedder=None)
