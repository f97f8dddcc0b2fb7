"""Loading the CarMem dataset (one user per JSONL line) into typed benchmark items.

The ground truth is resolved against the schema up front, so a dataset that does not fit the
schema fails here with the line and field named, not halfway through a ten-minute run.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict

from boundmem.errors import InputError
from boundmem.conversation import ConversationFileError, parse_conversation
from boundmem.models import Conversation
from boundmem.schema.model import CategoryPath, Schema, UnknownCategoryError

Split = Literal["test", "train"]
TEST_USERS = 50  # the authors' code evaluates lines[:50]; the other 50 are never used by them


class CarMemDataError(InputError):
    def __init__(self, file: str, problem: str, line: Optional[int] = None, field: Optional[str] = None):
        where = file + (f", line {line}" if line else "") + (f", field {field!r}" if field else "")
        super().__init__(f"{where}: {problem}")


class MaintenanceUtterances(BaseModel):
    model_config = ConfigDict(frozen=True)

    equal: str
    negate: str
    different: str
    different_attribute: str


class CarMemItem(BaseModel):
    """One conversation with its single ground-truth preference and its follow-up utterances."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    user: str
    user_index: int          # line number - 1 in the file
    position: int            # index of the conversation within the user
    conversation: Conversation
    path: CategoryPath       # ground truth detail category
    attribute: str           # ground truth attribute
    multiple: bool           # MP (True) / MNP (False) of the ground-truth detail category
    next_question: str       # retrieval query
    maintenance: MaintenanceUtterances

    @property
    def id(self) -> str:
        return self.conversation.id


class CarMemUser(BaseModel):
    model_config = ConfigDict(frozen=True)

    user: str
    index: int
    items: tuple[CarMemItem, ...]


def _req(obj: dict, key: str, file: str, line: int, prefix: str = "") -> object:
    if not isinstance(obj, dict) or key not in obj:
        raise CarMemDataError(file, "missing field", line, prefix + key)
    return obj[key]


def _str(obj: dict, key: str, file: str, line: int, prefix: str = "") -> str:
    v = _req(obj, key, file, line, prefix)
    if not isinstance(v, str) or not v.strip():
        raise CarMemDataError(file, "must be a non-empty string", line, prefix + key)
    return v.strip()


def _parse_user(obj: object, schema: Schema, file: str, line: int) -> CarMemUser:
    if not isinstance(obj, dict):
        raise CarMemDataError(file, "a line must be a JSON object (one user)", line)
    user = _str(obj, "user_uuid", file, line)
    data = _req(obj, "data", file, line)
    if not isinstance(data, list) or not data:
        raise CarMemDataError(file, "must be a non-empty list of conversations", line, "data")
    items = []
    for i, conv in enumerate(data):
        pre = f"data[{i}]."
        pref = _str(conv, "user_preference", file, line, pre)
        parts = [p.strip() for p in pref.split(";")]
        if len(parts) != 4 or not all(parts):
            raise CarMemDataError(file, f"expected 'Main; Sub; Detail; Attribute', got {pref!r}", line, pre + "user_preference")
        main, sub, detail, attribute = parts
        try:
            ref = schema.resolve(detail)
        except UnknownCategoryError as e:
            raise CarMemDataError(file, str(e), line, pre + "user_preference") from None
        if ref.main.name != main or ref.sub.name != sub:
            raise CarMemDataError(file, f"detail {detail!r} lies under {ref.main.name}/{ref.sub.name} in the schema, "
                                        f"not {main}/{sub}", line, pre + "user_preference")
        mq = _req(conv, "maintenance_questions", file, line, pre)
        mpre = pre + "maintenance_questions."
        try:
            conversation = parse_conversation(conv, file, line)
        except ConversationFileError as e:
            raise CarMemDataError(file, e.problem, line, pre + (e.field or "extraction_conversation")) from None
        items.append(CarMemItem(
            user=user, user_index=line - 1, position=i, conversation=conversation, path=ref.path, attribute=attribute,
            multiple=ref.detail.multiple, next_question=_str(conv, "next_conversation_question", file, line, pre),
            maintenance=MaintenanceUtterances(
                equal=_str(mq, "question_equal_preference", file, line, mpre),
                negate=_str(mq, "question_negate_preference", file, line, mpre),
                different=_str(mq, "question_different_preference", file, line, mpre),
                different_attribute=_str(mq, "different_attribute", file, line, mpre))))
    return CarMemUser(user=user, index=line - 1, items=tuple(items))


def load_carmem(path: str | Path, schema: Schema, split: Split = "test", users: Optional[int] = None,
                conversations_per_user: Optional[int] = None) -> list[CarMemUser]:
    """The users of one split in file order (test = first 50 lines), optionally truncated for quick runs."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise CarMemDataError(str(p), f"cannot read: {e}") from None
    numbered = [(n, ln) for n, ln in enumerate(lines, start=1) if ln.strip()]
    if not numbered:
        raise CarMemDataError(str(p), "file is empty")
    chosen = numbered[:TEST_USERS] if split == "test" else numbered[TEST_USERS:]
    if users is not None:
        chosen = chosen[:users]
    out: list[CarMemUser] = []
    for n, ln in chosen:
        try:
            obj = json.loads(ln)
        except json.JSONDecodeError as e:
            raise CarMemDataError(str(p), f"invalid JSON: {e.msg}", n) from None
        u = _parse_user(obj, schema, str(p), n)
        if conversations_per_user is not None:
            u = u.model_copy(update={"items": u.items[:conversations_per_user]})
        out.append(u)
    ids = [it.id for u in out for it in u.items]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise CarMemDataError(str(p), f"duplicate conversation_uuid {dup!r}", field="conversation_uuid")
    return out
