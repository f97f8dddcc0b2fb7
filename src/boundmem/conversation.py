"""Reading conversations from files: JSON, JSONL, or the CarMem layout, with errors that name line and field."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import InputError
from .models import Conversation, Turn


class ConversationFileError(InputError):
    def __init__(self, file: str, problem: str, line: int | None = None, field: str | None = None):
        self.file, self.line, self.field, self.problem = file, line, field, problem
        where = file + (f", line {line}" if line else "") + (f", field {field!r}" if field else "")
        super().__init__(f"{where}: {problem}")


_ROLE_ALIASES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "voice assistant": "assistant"}


def _turns(raw: Any, file: str, line: int | None, field: str) -> list[Turn]:
    if not isinstance(raw, list) or not raw:
        raise ConversationFileError(file, "must be a non-empty list of turns", line, field)
    turns = []
    for i, t in enumerate(raw):
        f = f"{field}[{i}]"
        if isinstance(t, dict) and "role" in t:
            role, text = t.get("role"), t.get("text", t.get("content"))
        elif isinstance(t, dict) and len(t) == 1:  # CarMem: {"USER": "..."}
            (role, text), = t.items()
        else:
            raise ConversationFileError(file, "a turn is {'role': 'user'|'assistant', 'text': ...} or {'USER': ...}", line, f)
        r = _ROLE_ALIASES.get(str(role).strip().lower())
        if r is None:
            raise ConversationFileError(file, f"unknown role {role!r} (use user or assistant)", line, f + ".role")
        if not isinstance(text, str) or not text.strip():
            raise ConversationFileError(file, "turn text must be a non-empty string", line, f + ".text")
        turns.append(Turn(role=r, text=text.strip()))
    return turns


def parse_conversation(obj: Any, file: str = "<input>", line: int | None = None, default_id: str | None = None) -> Conversation:
    """Accepts {"id", "turns": [...]}, CarMem's {"conversation_uuid", "extraction_conversation"}, or a bare turn list."""
    if isinstance(obj, list):
        obj = {"turns": obj}
    if not isinstance(obj, dict):
        raise ConversationFileError(file, "a conversation must be a JSON object or a list of turns", line)
    field = "turns" if "turns" in obj else "extraction_conversation" if "extraction_conversation" in obj else None
    if field is None:
        raise ConversationFileError(file, "missing 'turns'", line, "turns")
    cid = obj.get("id", obj.get("conversation_uuid", obj.get("conversation_id", default_id)))
    if cid is None or not str(cid).strip():
        raise ConversationFileError(file, "missing conversation id", line, "id")
    try:
        return Conversation(id=str(cid), turns=tuple(_turns(obj[field], file, line, field)))
    except ValidationError as e:
        err = e.errors()[0]
        raise ConversationFileError(file, err["msg"], line, ".".join(map(str, err["loc"]))) from None


def read_conversations(path: str | Path) -> list[Conversation]:
    """All conversations in a file, or an error; never a partial list (callers ingest all or nothing)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConversationFileError(str(p), f"cannot read: {e}") from None
    items: list[tuple[int | None, Any]] = []
    stripped = text.strip()
    if not stripped:
        raise ConversationFileError(str(p), "file is empty", 1)
    if p.suffix.lower() == ".jsonl":
        for n, ln in enumerate(text.splitlines(), start=1):
            if not ln.strip():
                continue
            try:
                items.append((n, json.loads(ln)))
            except json.JSONDecodeError as e:
                raise ConversationFileError(str(p), f"invalid JSON: {e.msg}", n) from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConversationFileError(str(p), f"invalid JSON: {e.msg}", e.lineno) from None
        if isinstance(data, dict) and "conversations" in data:
            data = data["conversations"]
        if isinstance(data, list) and data and all(isinstance(x, dict) and ("turns" in x or "extraction_conversation" in x) for x in data):
            items = [(None, x) for x in data]
        else:
            items = [(None, data)]
    out: list[Conversation] = []
    for idx, (line, obj) in enumerate(items):
        # a CarMem user line carries its conversations under "data"
        if isinstance(obj, dict) and isinstance(obj.get("data"), list) and "extraction_conversation" not in obj:
            out += [parse_conversation(c, str(p), line) for c in obj["data"]]
        else:
            out.append(parse_conversation(obj, str(p), line, default_id=f"{p.stem}-{idx + 1}"))
    ids = [c.id for c in out]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ConversationFileError(str(p), f"duplicate conversation id {dup!r}", field="id")
    return out


def render(conv: Conversation, user_label: str = "User") -> str:
    return "\n".join(f"{user_label if t.role == 'user' else 'Voice Assistant'}: {t.text}" for t in conv.turns)
