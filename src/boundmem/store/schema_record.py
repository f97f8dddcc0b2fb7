"""The store remembers which schema filled it, so opening it with another one is an error, never a silent switch.

Stored preferences are rows under category paths of one schema; read with another (a smart-home store opened
without `--schema`, so with the in-car default) they would be labelled wrongly, unreachable by the other schema's
opt-outs and extracted into categories the operator never defined for it. The first write records the schema's
name, version and fingerprint (`Schema.fingerprint`: the category paths, not their wording) in the store's `meta`
table; every later opening compares name and fingerprint. `boundmem schema migrate` changes the record deliberately."""
from __future__ import annotations

import json
from typing import Optional

from ..errors import ConflictError
from ..schema.model import Schema
from .base import Store


class SchemaMismatchError(ConflictError):
    """The store was filled with another schema than the one it is opened with; names both."""

    code = "schema_mismatch"


def schema_record(schema: Schema) -> str:
    return json.dumps({"name": schema.name, "version": schema.version, "fingerprint": schema.fingerprint},
                      sort_keys=True)


def _describe(rec: dict) -> str:
    return f"{rec.get('name')!r} (version {rec.get('version')}, fingerprint {rec.get('fingerprint')})"


def check_schema(store: Store, schema: Schema, held: Optional[str] = None) -> None:
    """Raise SchemaMismatchError if the store records another schema (nothing recorded yet: fine)."""
    held = held if held is not None else store.schema_record()
    if held is None:
        return
    rec, mine = json.loads(held), json.loads(schema_record(schema))
    if (rec.get("name"), rec.get("fingerprint")) != (mine["name"], mine["fingerprint"]):
        raise SchemaMismatchError(
            f"this store was filled with schema {_describe(rec)}, but is opened with schema {_describe(mine)}: open "
            "it with its own schema (--schema FILE, Memory.local(db, schema=load_schema(FILE))), or record the new "
            "one deliberately with `boundmem schema migrate`")


def bind_schema(store: Store, schema: Schema) -> None:
    """At the first write: record the schema unless one is, then check what is held (another writer may have won)."""
    check_schema(store, schema, store.record_schema(schema_record(schema)))
