"""Consent: the categories a user opted out of; opt out of one (purging what is held there) or back in.

No `from __future__ import annotations`: FastAPI resolves the Annotated aliases at runtime."""

from fastapi import APIRouter

from ...api_models import OptInOut, OptOutList, OptOutOut
from ..deps import Category, Mem, Subj
from ..error_handlers import NOT_FOUND
from .preferences import preference_out

router = APIRouter(tags=["consent"])


@router.get("/v1/users/{user}/opt-outs", response_model=OptOutList)
def list_opt_outs(s: Subj, mem: Mem) -> OptOutList:
    return OptOutList(user=s.user, opt_outs=mem.store.opt_outs(s.ns), consents=mem.consents(s.ns))


@router.put("/v1/users/{user}/opt-outs/{category:path}", response_model=OptOutOut, responses=NOT_FOUND)
def opt_out(pre: Category, s: Subj, mem: Mem) -> OptOutOut:
    """Stop remembering a main, sub or detail category (key, name or path) and purge what is held there."""
    purged = mem.opt_out(s.ns, pre)
    return OptOutOut(user=s.user, category=pre, purged=[preference_out(mem, p, s.user) for p in purged])


@router.delete("/v1/users/{user}/opt-outs/{category:path}", response_model=OptInOut, responses=NOT_FOUND)
def opt_in(pre: Category, s: Subj, mem: Mem) -> OptInOut:
    """Allow a category again (only removes an opt-out of exactly this category)."""
    return OptInOut(user=s.user, category=pre, changed=mem.opt_in(s.ns, pre))
