"""Reading schema files (YAML or the CarMem CSV) with errors that point at file, line and field."""
from __future__ import annotations

import csv
import io
from importlib import resources
from pathlib import Path

import yaml
from pydantic import ValidationError

from ..errors import InputError
from .model import Schema, slug


class SchemaFileError(InputError):
    """A schema file is malformed. The message names the file, the line (when known) and the field."""

    def __init__(self, file: str, problem: str, line: int | None = None, field: str | None = None):
        self.file, self.line, self.field, self.problem = file, line, field, problem
        where = file + (f", line {line}" if line else "") + (f", field {field!r}" if field else "")
        super().__init__(f"{where}: {problem}")


CSV_COLUMNS = ["Main Category", "Subcategory", "Preference Type", "Detail Category", "Attributes"]


def load_csv(text: str, file: str = "<csv>") -> Schema:
    """The CarMem layout: `Main#Sub#Type#Detail#Attributes`, one detail category per line."""
    rows = list(csv.reader(io.StringIO(text), delimiter="#"))
    if not rows:
        raise SchemaFileError(file, "file is empty", line=1)
    header = [h.strip() for h in rows[0]]
    if header != CSV_COLUMNS:
        raise SchemaFileError(file, f"header must be {'#'.join(CSV_COLUMNS)!r}, got {'#'.join(header)!r}", line=1)
    mains: dict[str, dict] = {}
    for lineno, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        if len(row) != 5:
            raise SchemaFileError(file, f"expected 5 '#'-separated fields, got {len(row)}", line=lineno)
        main, sub, ptype, detail, attrs = (c.strip() for c in row)
        for name, value in zip(CSV_COLUMNS, (main, sub, ptype, detail)):
            if not value:
                raise SchemaFileError(file, "must not be empty", line=lineno, field=name)
        if ptype not in ("MP", "MNP"):
            raise SchemaFileError(file, f"must be MP or MNP, got {ptype!r}", line=lineno, field="Preference Type")
        subs = mains.setdefault(main, {})
        details = subs.setdefault(sub, [])
        if any(slug(d["name"]) == slug(detail) for d in details):
            raise SchemaFileError(file, f"duplicate detail category {detail!r} in {main}/{sub}", line=lineno, field="Detail Category")
        details.append({"name": detail, "multiple": ptype == "MP",
                        "attributes": [a.strip() for a in attrs.split(",") if a.strip()]})
    data = {"name": Path(file).stem, "mains": [
        {"name": m, "subs": [{"name": s, "details": ds} for s, ds in subs.items()]} for m, subs in mains.items()]}
    return _validate(data, file, text=None)


def _line_of(text: str | None, loc: tuple) -> int | None:
    """Best-effort line number of a YAML location (loc is pydantic's error location)."""
    if text is None:
        return None
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = node.start_mark.line + 1 if node else None
    for part in loc:
        if node is None:
            break
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            nxt = None
            for k, v in node.value:
                if k.value == part:
                    nxt = v
                    line = k.start_mark.line + 1
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _validate(data, file: str, text: str | None) -> Schema:
    try:
        return Schema.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = tuple(err["loc"])
        field = ".".join(str(p) for p in loc) or None
        raise SchemaFileError(file, err["msg"], line=_line_of(text, loc), field=field) from None


def load_yaml(text: str, file: str = "<yaml>") -> Schema:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise SchemaFileError(file, f"invalid YAML: {getattr(e, 'problem', e)}", line=mark.line + 1 if mark else None) from None
    if not isinstance(data, dict):
        raise SchemaFileError(file, "top level must be a mapping with a 'mains' list", line=1)
    return _validate(data, file, text)


def load_schema(path: str | Path) -> Schema:
    """Load a schema from a .yaml/.yml or .csv file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise SchemaFileError(str(p), f"cannot read: {e.strerror}") from None
    if p.suffix.lower() == ".csv":
        return load_csv(text, str(p))
    return load_yaml(text, str(p))


def dump_yaml(schema: Schema) -> str:
    return yaml.safe_dump(schema.model_dump(mode="json"), sort_keys=False, allow_unicode=True, width=110)


def builtin_schema(name: str = "incar") -> Schema:
    """Schemas shipped in the package ("incar": the CarMem in-car schema, 4/11/41)."""
    ref = resources.files("boundmem.schema").joinpath("data").joinpath(f"{name}.yaml")
    if not ref.is_file():
        raise SchemaFileError(f"{name}.yaml", f"no built-in schema named {name!r}")
    return load_yaml(ref.read_text(encoding="utf-8"), f"boundmem/schema/data/{name}.yaml")
