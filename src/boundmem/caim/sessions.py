"""Reading dialogue files for `boundmem caim ingest`: the whole file is validated before anything is stored.

Accepted shapes (JSON):
- GVD history: {"2023-04-27": [{"query": ..., "response": ...}, ...], ...}
- a GVD user record: {"history": {...as above...}, ...}
- a list of sessions: [{"date": "2023-04-27", "turns": [{"query": ..., "response": ...}, ...]}, ...]
Turn ids are "<date>#<index>" as in gvd/gold_en.jsonl. Sessions are returned in date order.
"""
from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any, Union

from ..errors import InputError
from .base import DialogueTurn
from .models import turn_id


class SessionFileError(InputError):
    """The file is not a dialogue file; the message names the file and the offending place."""


def _turns(where: str, items: Any, day: date) -> list[DialogueTurn]:
    if not isinstance(items, list):
        raise SessionFileError(f"{where}: turns must be a list, got {type(items).__name__}")
    out = []
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            raise SessionFileError(f"{where}[{i}]: a turn must be an object with 'query' and 'response'")
        q, r = it.get("query"), it.get("response", "")
        if not isinstance(q, str) or not q.strip():
            raise SessionFileError(f"{where}[{i}]: field 'query' is missing or empty")
        if not isinstance(r, str):
            raise SessionFileError(f"{where}[{i}]: field 'response' must be text")
        out.append(DialogueTurn(id=turn_id(day, i), query=q, response=r))
    return out


def _day(where: str, raw: Any) -> date:
    try:
        return date.fromisoformat(str(raw).strip())
    except ValueError:
        raise SessionFileError(f"{where}: {raw!r} is not an ISO date (YYYY-MM-DD)") from None


def parse_sessions(data: Any, source: str = "<data>") -> list[tuple[date, list[DialogueTurn]]]:
    if isinstance(data, dict) and "history" in data:
        data = data["history"]
        source += ": history"
    sessions: dict[date, list[DialogueTurn]] = {}
    if isinstance(data, dict):
        for k, v in data.items():
            d = _day(f"{source}: key {k!r}", k)
            sessions[d] = _turns(f"{source}: {k}", v, d)
    elif isinstance(data, list):
        for i, s in enumerate(data):
            if not isinstance(s, dict) or "date" not in s or "turns" not in s:
                raise SessionFileError(f"{source}: session {i} must be an object with 'date' and 'turns'")
            d = _day(f"{source}: session {i} field 'date'", s["date"])
            if d in sessions:
                raise SessionFileError(f"{source}: session {i}: date {d} appears twice")
            sessions[d] = _turns(f"{source}: session {i} turns", s["turns"], d)
    else:
        raise SessionFileError(f"{source}: expected an object (date -> turns) or a list of sessions")
    if not sessions:
        raise SessionFileError(f"{source}: no sessions")
    return sorted(sessions.items())


def read_sessions(path: Union[str, Path]) -> list[tuple[date, list[DialogueTurn]]]:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except OSError as e:
        raise SessionFileError(f"{p}: cannot read: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise SessionFileError(f"{p}: line {e.lineno}: invalid JSON ({e.msg})") from None
    return parse_sessions(data, str(p))
