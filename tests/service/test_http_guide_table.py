"""The HTTP guide's quick reference names every route the app serves and every field of every request body."""
from __future__ import annotations

import re
from pathlib import Path

from boundmem.api_models import ConversationIn, PreferenceEdit, RecallRequest, TokenRequest
from boundmem.service.app import create_app

from .conftest import KEYS


def _table() -> str:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "http.md").read_text(encoding="utf-8")
    return readme[readme.index("## Routes"):readme.index("## Per-user access")]


def _norm(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def test_every_route_is_in_the_guide_table(memory):
    table = _table()
    rows = {(m, _norm(p)) for m, p in re.findall(r"`(GET|POST|PUT|DELETE|PATCH) (/v1/[^`\s]*)`", table)}
    spec = create_app(memory, KEYS).openapi()
    served = {(m.upper(), _norm(p)) for p, ops in spec["paths"].items() if p.startswith("/v1/") for m in ops}
    assert served - rows == set(), f"routes missing from the HTTP guide's quick reference: {sorted(served - rows)}"


def test_every_request_field_is_named():
    table = _table()
    for model in (ConversationIn, RecallRequest, TokenRequest, PreferenceEdit):
        for name in model.model_fields:
            if name != "at":   # accepted and ignored
                assert f'"{name}"' in table, (model.__name__, name)
