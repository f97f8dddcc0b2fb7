"""The model-free maintainer: LocalMaintainer's rules with the cue lexicon as the only polarity judge.

For installs without MiniLM and for tests that must not load a model. Same attribute identity,
same negation handling ("not X" stored on a negation), so switching maintainers changes how well
negations are recognised, not what the decisions mean. CarMem users 1-50: negate recognised
.79 (vs .93 with the MiniLM polarity model).
"""
from __future__ import annotations

from .local import LocalMaintainer


class RuleMaintainer(LocalMaintainer):
    name = "rules"
    # class-level, so subclasses that skip __init__ (test doubles do) still work
    embedder = None
    polarity = None

    def __init__(self) -> None:
        super().__init__(embedder=None)
