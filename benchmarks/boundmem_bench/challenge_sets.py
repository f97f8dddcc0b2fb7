"""Loading boundmem's challenge sets (`boundmem_bench/challenge_data/`, format in its FORMAT.md) with full validation.

Every record is checked against FORMAT.md and against the set's own schema before anything runs: a bad path,
an unknown kind, an empty turn or a split that breaks the every-third-is-heldout rule is an error naming the
file, line and field, because a silently skipped or mis-split case would change the benchmark's numbers.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterator, Literal, Optional

from pydantic import BaseModel, ConfigDict

from boundmem.conversation import ConversationFileError, parse_conversation
from boundmem.models import Conversation
from boundmem.schema.load import SchemaFileError, builtin_schema, load_schema
from boundmem.schema.model import CategoryPath, Schema

Split = Literal["train", "heldout"]
Polarity = Literal["like", "dislike", "indifferent"]
POLARITIES: tuple[str, ...] = ("like", "dislike", "indifferent")
SPLITS: tuple[str, ...] = ("train", "heldout")
STYLES: tuple[str, ...] = ("written", "spoken")
# kinds that must store nothing, then kinds that store something (FORMAT.md's table, in its order)
EMPTY_KINDS: tuple[str, ...] = ("one_off", "no_value", "other_person", "accepted_suggestion", "question", "odd_input",
                                 "no_value_request", "chat")
STORE_KINDS: tuple[str, ...] = ("lasting", "negated", "two_in_one", "principle_after_choice", "implicit", "open_value",
                                "negation")
# kinds whose case is a user's several conversations in order (`conversations`), scored on the final state
MULTI_KINDS: tuple[str, ...] = ("change_of_mind", "repeated_choice", "mixed_choices", "single_choice", "not_evidence")
KINDS: tuple[str, ...] = EMPTY_KINDS + STORE_KINDS + MULTI_KINDS
MAX_CONVERSATIONS = 5
# how many expected preferences each kind allows (min, max); other_person may hold the speaker's own
EXPECTED_COUNT: dict[str, tuple[int, Optional[int]]] = {
    **{k: (0, 0) for k in EMPTY_KINDS}, "other_person": (0, None),
    "lasting": (1, None), "negated": (1, None), "two_in_one": (2, 2), "principle_after_choice": (1, 1), "implicit": (1, 1),
    "open_value": (1, None), "negation": (0, None), "change_of_mind": (0, None), "repeated_choice": (0, None),
    **{k: (0, 0) for k in ("mixed_choices", "single_choice", "not_evidence")}}
# conversations per multi-conversation kind (min, max); single_choice is one conversation in the same shape
CONVERSATION_COUNT: dict[str, tuple[int, int]] = {
    "change_of_mind": (2, MAX_CONVERSATIONS), "repeated_choice": (2, MAX_CONVERSATIONS),
    "mixed_choices": (2, MAX_CONVERSATIONS), "single_choice": (1, 1), "not_evidence": (2, MAX_CONVERSATIONS)}
HELDOUT_EVERY = 3  # within each kind, the 3rd, 6th, 9th, ... conversation in file order is heldout

_FIELDS = {"id", "split", "style", "kind", "turns", "conversations", "expected", "expected_observed", "note"}
_EXPECTED_FIELDS = {"path", "attribute", "polarity", "accept"}


class SetSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    files: tuple[str, ...]
    schema_file: Optional[str] = None  # None = the built-in in-car schema
    zero_shot: bool = False
    id_prefix: Optional[str] = None    # what ids start with (default: the set's name); sets may share a file
    note: str = ""

    @property
    def prefix(self) -> str:
        return self.id_prefix or self.name


SETS: dict[str, SetSpec] = {
    "incar": SetSpec(name="incar", files=("incar-negative.jsonl", "incar-positive.jsonl", "incar-open-values.jsonl",
                                          "incar-negation.jsonl", "incar-no-value.jsonl", "chat-non-preference.jsonl")),
    "travel": SetSpec(name="travel", files=("travel.jsonl",), schema_file="travel.yaml", zero_shot=True),
    # values in the user's words, negation, requests naming no value, change of mind, repeated choices
    "incar-words": SetSpec(name="incar-words", id_prefix="incar",
                           files=("incar-open.jsonl", "incar-negation-forms.jsonl", "incar-novalue.jsonl",
                                  "incar-change.jsonl", "incar-choices.jsonl")),
    "smarthome": SetSpec(name="smarthome", files=("smarthome.jsonl",), schema_file="smarthome.yaml", zero_shot=True),
    # one file of non-preference chat-assistant messages, run with each schema: nothing may be stored
    "chat": SetSpec(name="chat", files=("chat.jsonl",), note="in-car schema"),
    "chat-travel": SetSpec(name="chat-travel", id_prefix="chat", files=("chat.jsonl",), schema_file="travel.yaml",
                           zero_shot=True, note="travel schema"),
    "chat-smarthome": SetSpec(name="chat-smarthome", id_prefix="chat", files=("chat.jsonl",),
                              schema_file="smarthome.yaml", zero_shot=True, note="smart home schema"),
}


class ChallengeDataError(ConversationFileError):
    """A challenge or SLURP file that does not fit: "<file>, line N, field 'x': problem" (.file/.line/.field/.problem)."""


class Expected(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: CategoryPath
    attribute: str
    polarity: Polarity = "like"
    accept: tuple[str, ...] = ()


class ChallengeItem(BaseModel):
    model_config = ConfigDict(frozen=True)

    set: str
    file: str
    line: int
    id: str
    split: Split
    style: str
    kind: str
    conversations: tuple[Conversation, ...]   # one, or a user's several in order (MULTI_KINDS)
    expected: tuple[Expected, ...]             # the preferences held after the last conversation
    expected_observed: Optional[tuple[Expected, ...]] = None  # the observations held then (None = not checked)
    note: str = ""

    @property
    def conversation(self) -> Conversation:
        """The case's conversation when it has one (a multi-conversation case has no single one)."""
        if len(self.conversations) != 1:
            raise ValueError(f"{self.id} has {len(self.conversations)} conversations")
        return self.conversations[0]

    @property
    def multi(self) -> bool:
        return self.kind in MULTI_KINDS


@dataclass(frozen=True)
class ChallengeSet:
    name: str
    schema: Schema
    items: tuple[ChallengeItem, ...]
    files: tuple[str, ...]          # the files read
    missing_files: tuple[str, ...]  # files of the set not there (yet)
    zero_shot: bool = False


def default_data_dir() -> Path:
    """The challenge data shipped inside the package."""
    return Path(str(resources.files("boundmem_bench").joinpath("challenge_data")))


def _expected(raw: object, schema: Schema, file: str, line: int, field: str) -> Expected:
    if not isinstance(raw, dict):
        raise ChallengeDataError(file, "an expected preference is an object {path, attribute, polarity, accept}", line, field)
    extra = sorted(set(raw) - _EXPECTED_FIELDS)
    if extra:
        raise ChallengeDataError(file, f"unknown field {extra[0]!r} (allowed: {', '.join(sorted(_EXPECTED_FIELDS))})",
                                 line, f"{field}.{extra[0]}")
    path = raw.get("path")
    parts = path.split("/") if isinstance(path, str) else []
    if len(parts) != 3 or not all(p.strip() for p in parts):
        raise ChallengeDataError(file, f"must be 'main_key/sub_key/detail_key', got {path!r}", line, f"{field}.path")
    cp = CategoryPath(main=parts[0], sub=parts[1], detail=parts[2])
    if not any(ref.path == cp for ref in schema.details()):
        raise ChallengeDataError(file, f"path {path!r} is not a detail category of schema {schema.name!r}", line,
                                 f"{field}.path")
    attr = raw.get("attribute")
    if not isinstance(attr, str) or not attr.strip():
        raise ChallengeDataError(file, "must be a non-empty string", line, f"{field}.attribute")
    pol = raw.get("polarity", "like")
    if pol not in POLARITIES:
        raise ChallengeDataError(file, f"must be one of {', '.join(POLARITIES)}, got {pol!r}", line, f"{field}.polarity")
    accept = raw.get("accept", [])
    if not isinstance(accept, list) or not all(isinstance(a, str) and a.strip() for a in accept):
        raise ChallengeDataError(file, "must be a list of non-empty strings", line, f"{field}.accept")
    return Expected(path=cp, attribute=attr.strip(), polarity=pol, accept=tuple(a.strip() for a in accept))


def _jsonl(p: Path) -> Iterator[tuple[int, object]]:
    """(line number, parsed object) for every non-blank line."""
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ChallengeDataError(str(p), f"cannot read: {e}") from None
    for n, ln in enumerate(lines, start=1):
        if ln.strip():
            try:
                yield n, json.loads(ln)
            except json.JSONDecodeError as e:
                raise ChallengeDataError(str(p), f"invalid JSON: {e.msg}", n) from None


def parse_item(obj: object, schema: Schema, set_name: str, file: str, line: int,
               id_prefix: Optional[str] = None) -> ChallengeItem:
    """One JSONL record, validated against FORMAT.md and the set's schema (split rule checked by `load_file`)."""
    if not isinstance(obj, dict):
        raise ChallengeDataError(file, "a line must be a JSON object (one conversation)", line)
    extra = sorted(set(obj) - _FIELDS)
    if extra:
        raise ChallengeDataError(file, f"unknown field (allowed: {', '.join(sorted(_FIELDS))})", line, extra[0])
    for key in ("id", "split", "style", "kind", "expected"):
        if key not in obj:
            raise ChallengeDataError(file, "missing field", line, key)
    cid = obj["id"]
    if not isinstance(cid, str) or not re.fullmatch(rf"{re.escape(id_prefix or set_name)}\w*-\d+", cid):
        raise ChallengeDataError(file, f"must look like '{id_prefix or set_name}-NNNN', got {cid!r}", line, "id")
    for key, allowed in (("split", SPLITS), ("style", STYLES), ("kind", KINDS)):
        if obj[key] not in allowed:
            raise ChallengeDataError(file, f"unknown {key} {obj[key]!r} (one of {', '.join(allowed)})", line, key)
    kind = obj["kind"]
    convs = _conversations(obj, kind, cid, file, line)
    raw_exp = obj["expected"]
    if not isinstance(raw_exp, list):
        raise ChallengeDataError(file, "must be a list (empty = store nothing)", line, "expected")
    expected = tuple(_expected(e, schema, file, line, f"expected[{i}]") for i, e in enumerate(raw_exp))
    lo, hi = EXPECTED_COUNT[kind]
    if len(expected) < lo or (hi is not None and len(expected) > hi):
        want = f"exactly {lo}" if lo == hi else f"at least {lo}" if hi is None else f"{lo} to {hi}"
        raise ChallengeDataError(file, f"kind {kind!r} needs {want} expected preference(s), got {len(expected)}",
                                 line, "expected")
    observed: Optional[tuple[Expected, ...]] = None
    if "expected_observed" in obj:
        raw_obs = obj["expected_observed"]
        if kind not in MULTI_KINDS:
            raise ChallengeDataError(file, f"only cases of kinds {', '.join(MULTI_KINDS)} list observations", line,
                                     "expected_observed")
        if not isinstance(raw_obs, list):
            raise ChallengeDataError(file, "must be a list (empty = no observation held)", line, "expected_observed")
        observed = tuple(_expected(e, schema, file, line, f"expected_observed[{i}]") for i, e in enumerate(raw_obs))
    note = obj.get("note", "")
    if not isinstance(note, str):
        raise ChallengeDataError(file, "must be a string", line, "note")
    return ChallengeItem(set=set_name, file=file, line=line, id=cid, split=obj["split"], style=obj["style"],
                         kind=kind, conversations=convs, expected=expected, expected_observed=observed, note=note)


def _conversations(obj: dict, kind: str, cid: str, file: str, line: int) -> tuple[Conversation, ...]:
    """`turns` (one conversation) or, for the multi-conversation kinds, `conversations` (a list of turn lists,
    the user's conversations in order; each gets the id '<id>-c<n>' so they count as distinct conversations)."""
    if kind in MULTI_KINDS:
        if "turns" in obj:
            raise ChallengeDataError(file, f"kind {kind!r} lists its conversations in 'conversations', not 'turns'",
                                     line, "turns")
        raw = obj.get("conversations")
        lo, hi = CONVERSATION_COUNT[kind]
        if not isinstance(raw, list) or not lo <= len(raw) <= hi:
            got = f"{len(raw)}" if isinstance(raw, list) else type(raw).__name__ if raw is not None else "nothing"
            raise ChallengeDataError(file, f"kind {kind!r} needs a list of {lo}" + (f" to {hi}" if hi != lo else "")
                                     + f" conversations (each a list of turns), got {got}", line, "conversations")
        listed = [(f"conversations[{i}]", f"{cid}-c{i + 1}", t) for i, t in enumerate(raw)]
    else:
        if "conversations" in obj:
            raise ChallengeDataError(file, f"kind {kind!r} is one conversation: use 'turns' "
                                           f"(several only for {', '.join(MULTI_KINDS)})", line, "conversations")
        if "turns" not in obj:
            raise ChallengeDataError(file, "missing field", line, "turns")
        listed = [("turns", cid, obj["turns"])]
    out = []
    for field, conv_id, turns in listed:
        try:  # roles user/assistant, text a non-empty string (FORMAT.md: never the empty string)
            conv = parse_conversation({"id": conv_id, "turns": turns}, file, line)
        except ConversationFileError as e:
            inner = e.field if field == "turns" else f"{field}.{e.field}" if e.field else field
            raise ChallengeDataError(file, e.problem, line, inner) from None
        if not conv.user_sentences():
            raise ChallengeDataError(file, "a conversation needs at least one user turn", line, field)
        out.append(conv)
    return tuple(out)


def load_file(path: str | Path, schema: Schema, set_name: str, id_prefix: Optional[str] = None) -> list[ChallengeItem]:
    """All records of one JSONL file, or an error; also enforces the split rule within each kind, in file order."""
    p = Path(path)
    items: list[ChallengeItem] = []
    seen_per_kind: dict[str, int] = {}
    for n, obj in _jsonl(p):
        it = parse_item(obj, schema, set_name, str(p), n, id_prefix)
        k = seen_per_kind[it.kind] = seen_per_kind.get(it.kind, 0) + 1
        want = "heldout" if k % HELDOUT_EVERY == 0 else "train"
        if it.split != want:
            raise ChallengeDataError(str(p), f"conversation {k} of kind {it.kind!r} in this file must be {want!r} "
                                             f"(every {HELDOUT_EVERY}rd of a kind is heldout), got {it.split!r}", n, "split")
        items.append(it)
    if not items:
        raise ChallengeDataError(str(p), "file is empty")
    return items


def set_schema(spec: SetSpec, data_dir: Path) -> Schema:
    if spec.schema_file is None:
        return builtin_schema()
    f = data_dir / spec.schema_file
    if not f.is_file():
        raise ChallengeDataError(str(f), f"the schema of set {spec.name!r} is missing")
    try:
        return load_schema(f)
    except SchemaFileError as e:
        raise ChallengeDataError(str(f), f"invalid schema: {e}") from None


def available_sets(data_dir: Optional[Path] = None) -> list[str]:
    """Sets with at least one data file present."""
    d = Path(data_dir) if data_dir else default_data_dir()
    return [name for name, spec in SETS.items() if any((d / f).is_file() for f in spec.files)]


def load_set(name: str, data_dir: Optional[Path] = None) -> ChallengeSet:
    """A set from the files of it that exist (at least one must); ids must be unique across them."""
    if name not in SETS:
        raise ChallengeDataError(name, f"unknown challenge set (one of {', '.join(SETS)})")
    spec, d = SETS[name], Path(data_dir) if data_dir else default_data_dir()
    present = [f for f in spec.files if (d / f).is_file()]
    if not present:
        raise ChallengeDataError(str(d), f"no data file of set {name!r} ({', '.join(spec.files)})")
    schema = set_schema(spec, d)
    items = [it for f in present for it in load_file(d / f, schema, name, spec.prefix)]
    first: dict[str, ChallengeItem] = {}
    for it in items:
        if it.id in first:
            o = first[it.id]
            raise ChallengeDataError(it.file, f"duplicate id {it.id!r} (first at {o.file}, line {o.line})", it.line, "id")
        first[it.id] = it
    return ChallengeSet(name=name, schema=schema, items=tuple(items), files=tuple(present),
                        missing_files=tuple(f for f in spec.files if f not in present), zero_shot=spec.zero_shot)


# --- SLURP -----------------------------------------------------------------------------------
# intents whose commands can state a genuine lasting music preference: not counted as false stores
SLURP_PREFERENCE_INTENTS = ("music_likeness", "music_dislikeness")


class SlurpItem(BaseModel):
    model_config = ConfigDict(frozen=True)

    slurp_id: int
    sentence: str
    scenario: str
    intent: str
    line: int

    @property
    def split(self) -> str:
        return "heldout" if self.slurp_id % 3 == 0 else "train"

    @property
    def id(self) -> str:
        return f"slurp-{self.slurp_id}"


def load_slurp(path: str | Path) -> list[SlurpItem]:
    p = Path(path)
    out: list[SlurpItem] = []
    ids: set[int] = set()
    for n, obj in _jsonl(p):
        if not isinstance(obj, dict):
            raise ChallengeDataError(str(p), "a line must be a JSON object", n)
        sid = obj.get("slurp_id")
        if not isinstance(sid, int) or isinstance(sid, bool):
            raise ChallengeDataError(str(p), "must be an integer", n, "slurp_id")
        if sid in ids:
            raise ChallengeDataError(str(p), f"duplicate slurp_id {sid}", n, "slurp_id")
        ids.add(sid)
        for key in ("sentence", "scenario", "intent"):
            if not isinstance(obj.get(key), str) or not obj[key].strip():
                raise ChallengeDataError(str(p), "must be a non-empty string", n, key)
        out.append(SlurpItem(slurp_id=sid, sentence=obj["sentence"].strip(), scenario=obj["scenario"],
                             intent=obj["intent"], line=n))
    if not out:
        raise ChallengeDataError(str(p), "file is empty")
    return out
