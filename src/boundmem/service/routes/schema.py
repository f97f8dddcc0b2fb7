"""The schema: every category the operator allows, and the part a user agreed to.

No `from __future__ import annotations`: FastAPI resolves the Annotated aliases at runtime."""

from fastapi import APIRouter

from ...schema.model import Schema
from ..deps import Mem, Subj, Who

router = APIRouter(tags=["schema"])


@router.get("/v1/schema", response_model=Schema)
def schema(who: Who, mem: Mem) -> Schema:
    """Every category the operator allows boundmem to remember."""
    return mem.schema


@router.get("/v1/users/{user}/schema", response_model=Schema)
def user_schema(s: Subj, mem: Mem) -> Schema:
    """The categories this user agreed to: the schema without their opt-outs."""
    return mem.user_schema(s.ns)
