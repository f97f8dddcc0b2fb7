"""Loads the GVD benchmark (MemoryBank's eval_data/en) and our gold annotations, validating every record.

The shipped files have quirks the loader absorbs so the harness never sees them: user-name keys with stray spaces,
questions wrapped in literal quote marks. Everything else that is off (a missing field, an evidence turn that does not
exist, a question that does not match the probing file) is an error naming the file, line and field, because a silently
skipped gold line would change the benchmark's numbers without anyone noticing.
"""
from __future__ import annotations

import json
import re
from datetime import date, timedelta
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict

from boundmem.errors import InputError
from boundmem.caim.base import DialogueTurn

HISTORY_FILE = "memory_bank_en.json"
QUESTIONS_FILE = "probing_questions_en.jsonl"
GOLD_FILE = "gold_en.jsonl"
_EVIDENCE = re.compile(r"^(\d{4}-\d{2}-\d{2})#(\d+)$")


class GVDDataError(InputError):
    """Malformed GVD data; the message names the file, line (for jsonl) and field."""


class GVDSession(BaseModel):
    model_config = ConfigDict(frozen=True)

    day: date
    turns: tuple[DialogueTurn, ...]


class GVDUser(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    sessions: tuple[GVDSession, ...]  # date order
    meta: dict[str, str] = {}

    @property
    def raw_chars(self) -> int:
        return sum(len(t.query) + len(t.response) for s in self.sessions for t in s.turns)

    @property
    def turn_ids(self) -> frozenset[str]:
        return frozenset(t.id for s in self.sessions for t in s.turns)


class GoldAnnotation(BaseModel):
    model_config = ConfigDict(frozen=True)

    evidence: tuple[str, ...]  # "<date>#<index>" turn ids
    answer: str
    keywords: tuple[tuple[str, ...], ...]  # correct = one string of every group
    answerable: bool
    note: str = ""

    @property
    def gold_dates(self) -> frozenset[date]:
        return frozenset(date.fromisoformat(e.split("#")[0]) for e in self.evidence)

    @property
    def polarity(self) -> Optional[str]:
        """"yes"/"no" for yes/no questions the note marks with POLARITY (taken from the gold answer's first word)."""
        if not self.note.startswith("POLARITY"):
            return None
        m = re.match(r"\W*(yes|no)\b", self.answer, re.I)
        return m.group(1).lower() if m else None


class GVDQuestion(BaseModel):
    model_config = ConfigDict(frozen=True)

    user: str
    qid: str  # "<user>_<index into the user's probing questions>"
    question: str
    gold: Optional[GoldAnnotation] = None


class GVDDataset(BaseModel):
    model_config = ConfigDict(frozen=True)

    users: dict[str, GVDUser]
    questions: tuple[GVDQuestion, ...]
    session_date: date  # "today" when the probing questions are asked

    def questions_for(self, user: str) -> list[GVDQuestion]:
        return [q for q in self.questions if q.user == user]


def _clean_question(text: str) -> str:
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] == '"':
        t = t[1:-1].strip()
    return t


def _load_json(path: Path):
    if not path.exists():
        raise GVDDataError(f"{path}: file not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise GVDDataError(f"{path}: line {e.lineno}: invalid JSON ({e.msg})") from None


def _jsonl(path: Path):
    if not path.exists():
        raise GVDDataError(f"{path}: file not found")
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise GVDDataError(f"{path}: line {n}: invalid JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise GVDDataError(f"{path}: line {n}: expected a JSON object, got {type(obj).__name__}")
        yield n, obj


def load_history(path: Path) -> dict[str, GVDUser]:
    data = _load_json(path)
    if not isinstance(data, dict):
        raise GVDDataError(f"{path}: expected an object of users")
    users: dict[str, GVDUser] = {}
    for raw_key, rec in data.items():
        name = raw_key.strip()
        where = f"{path}: user {name!r}"
        if not isinstance(rec, dict) or not isinstance(rec.get("history"), dict):
            raise GVDDataError(f"{where}: field 'history' missing or not an object")
        sessions = []
        for day_s, turns in sorted(rec["history"].items()):
            try:
                day = date.fromisoformat(day_s)
            except ValueError:
                raise GVDDataError(f"{where}: history key {day_s!r} is not an ISO date") from None
            if not isinstance(turns, list):
                raise GVDDataError(f"{where}: history[{day_s!r}] is not a list")
            parsed = []
            for i, t in enumerate(turns):
                if not isinstance(t, dict) or not isinstance(t.get("query"), str):
                    raise GVDDataError(f"{where}: history[{day_s!r}][{i}]: field 'query' missing or not a string")
                resp = t.get("response", "")
                if not isinstance(resp, str):
                    raise GVDDataError(f"{where}: history[{day_s!r}][{i}]: field 'response' is not a string")
                parsed.append(DialogueTurn(id=f"{day_s}#{i}", query=t["query"].strip(), response=resp.strip()))
            sessions.append(GVDSession(day=day, turns=tuple(parsed)))
        meta = rec.get("meta_information") or {}
        if name in users:
            raise GVDDataError(f"{where}: user appears twice (after stripping spaces)")
        users[name] = GVDUser(name=name, sessions=tuple(sessions),
                              meta={k: str(v) for k, v in meta.items()} if isinstance(meta, dict) else {})
    return users


def load_questions(path: Path, users: dict[str, GVDUser]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n, obj in _jsonl(path):
        for raw_user, qs in obj.items():
            user = raw_user.strip()
            if user not in users:
                raise GVDDataError(f"{path}: line {n}: user {user!r} has no dialogue history")
            if not isinstance(qs, list) or not all(isinstance(q, str) for q in qs):
                raise GVDDataError(f"{path}: line {n}: questions of {user!r} must be a list of strings")
            out.setdefault(user, []).extend(_clean_question(q) for q in qs)
    return out


_GOLD_FIELDS = {"user": str, "qid": str, "question": str, "evidence": list, "answer": str, "keywords": list,
                "answerable": bool}


def load_gold(path: Path, users: dict[str, GVDUser], questions: dict[str, list[str]]) -> dict[str, GoldAnnotation]:
    gold: dict[str, GoldAnnotation] = {}
    for n, obj in _jsonl(path):
        where = f"{path}: line {n}"
        for field, typ in _GOLD_FIELDS.items():
            if field not in obj:
                raise GVDDataError(f"{where}: field '{field}' missing")
            if not isinstance(obj[field], typ):
                raise GVDDataError(f"{where}: field '{field}' must be {typ.__name__}, got {type(obj[field]).__name__}")
        user, qid = obj["user"].strip(), obj["qid"].strip()
        if user not in questions:
            raise GVDDataError(f"{where}: field 'user': {user!r} has no probing questions")
        prefix, _, idx = qid.rpartition("_")
        if prefix != user or not idx.isdigit() or int(idx) >= len(questions[user]):
            raise GVDDataError(f"{where}: field 'qid': {qid!r} is not '<user>_<index>' for one of {user!r}'s "
                               f"{len(questions[user])} questions")
        if _clean_question(obj["question"]) != questions[user][int(idx)]:
            raise GVDDataError(f"{where}: field 'question' does not match probing question {qid!r}: "
                               f"{questions[user][int(idx)]!r}")
        known = users[user].turn_ids
        for e in obj["evidence"]:
            if not isinstance(e, str) or not _EVIDENCE.match(e):
                raise GVDDataError(f"{where}: field 'evidence': {e!r} is not '<YYYY-MM-DD>#<index>'")
            if e not in known:
                raise GVDDataError(f"{where}: field 'evidence': turn {e!r} does not exist in {user!r}'s history")
        kws = obj["keywords"]
        if not all(isinstance(g, list) and g and all(isinstance(s, str) and s.strip() for s in g) for g in kws):
            raise GVDDataError(f"{where}: field 'keywords' must be a list of non-empty lists of non-empty strings")
        if obj["answerable"] and not (obj["evidence"] and kws):
            raise GVDDataError(f"{where}: answerable question needs 'evidence' and 'keywords'")
        note = obj.get("note", "")
        if not isinstance(note, str):
            raise GVDDataError(f"{where}: field 'note' must be a string")
        ann = GoldAnnotation(evidence=tuple(obj["evidence"]), answer=obj["answer"],
                             keywords=tuple(tuple(g) for g in kws), answerable=obj["answerable"], note=note)
        if note.startswith("POLARITY") and ann.polarity is None:
            raise GVDDataError(f"{where}: field 'answer' must start with Yes or No for a POLARITY question")
        if qid in gold:
            raise GVDDataError(f"{where}: field 'qid': {qid!r} annotated twice")
        gold[qid] = ann
    return gold


def load_gvd(data_dir: Path, gold_path: Optional[Path] = None) -> GVDDataset:
    """`data_dir` holds the two MemoryBank files; `gold_path` defaults to data_dir/gold_en.jsonl when it exists."""
    data_dir = Path(data_dir)
    users = load_history(data_dir / HISTORY_FILE)
    questions = load_questions(data_dir / QUESTIONS_FILE, users)
    if gold_path is None and (data_dir / GOLD_FILE).exists():
        gold_path = data_dir / GOLD_FILE
    gold = load_gold(Path(gold_path), users, questions) if gold_path else {}
    qs = tuple(GVDQuestion(user=u, qid=f"{u}_{i}", question=q, gold=gold.get(f"{u}_{i}"))
               for u, lst in questions.items() for i, q in enumerate(lst))
    last = max((s.day for u in users.values() for s in u.sessions), default=date(2023, 5, 6))
    # The data gives no date for the probing session; the questions speak of the dialogues as past ("a few days
    # ago", "on May 4th"), so they are asked the day after the last dialogue day.
    return GVDDataset(users=users, questions=qs, session_date=last + timedelta(days=1))
