"""The HTTP API and the transparency page, on top of `Memory`.

No `from __future__ import annotations` here: FastAPI must resolve the closures' Annotated aliases at runtime.

Tenancy lives in two small pieces: the `tenant` dependency turns the bearer key into a
tenant, and `stored()` joins it with the path's (validated) user id into the store's
namespaced id, so no endpoint ever handles a raw store id taken from the request. Endpoints are plain `def`s because `Memory` is synchronous and may
embed text; Starlette runs them in its thread pool.
"""

import math
import threading
from datetime import datetime
from pathlib import Path as FsPath
from typing import Annotated, Any, Callable, Mapping, Optional, Union

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ConfigDict, Field

from ..extract.base import ExtractionError
from ..memory import Memory
from ..models import AuditEntry, Candidate, Conversation, Decision, Preference, Turn, UserExport
from ..schema.model import CategoryPath, Schema, UnknownCategoryError
from ..store.base import NotFoundError
from .auth import USER_ID_PATTERN, KeyRing, namespaced
from .limits import DEFAULT_MAX_BODY_BYTES, BodySizeLimit, RateLimiter

STATIC = FsPath(__file__).parent / "static"
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
            "form-action 'none'; frame-ancestors 'none'; base-uri 'none'")


# --- request / response models -------------------------------------------------------------------
class ConversationIn(BaseModel):
    """A conversation to learn from. Only the user's turns are mined for preferences."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=200, description="Your id for the conversation; kept as provenance.")
    turns: list[Turn] = Field(min_length=1, max_length=1000)
    at: Optional[datetime] = None


class RecallRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    utterance: str = Field(min_length=1, max_length=4000, description="What the user just said.")
    k: Optional[int] = Field(5, ge=1, le=100, description="How many preferences; null = dynamic (the best match's subcategory).")


class PreferenceOut(BaseModel):
    id: str
    user: str
    path: CategoryPath
    category: str = Field(description="Display names, 'Main > Sub > Detail'.")
    attribute: str
    sentence: str = Field(description="The user's sentence the preference was taken from.")
    conversation_id: Optional[str] = None
    created_at: datetime
    updated_at: datetime


class PreferenceList(BaseModel):
    user: str
    preferences: list[PreferenceOut]


class IngestOut(BaseModel):
    user: str
    conversation_id: str
    decisions: list[Decision]
    blocked: list[Candidate] = Field(description="Candidates dropped because their category is opted out.")


class RecallHitOut(BaseModel):
    preference: PreferenceOut
    score: float


class RecallOut(BaseModel):
    user: str
    hits: list[RecallHitOut]


class OptOutList(BaseModel):
    user: str
    opt_outs: list[str]


class OptOutOut(BaseModel):
    user: str
    category: str = Field(description="The canonical category prefix opted out.")
    purged: list[PreferenceOut]


class OptInOut(BaseModel):
    user: str
    category: str
    changed: bool = Field(description="False if the user was not opted out of exactly this category.")


class ForgetOut(BaseModel):
    user: str
    erased: int = Field(description="How many preferences were erased.")


class ErrorOut(BaseModel):
    detail: Any
    message: Optional[str] = None


MemorySource = Union[Memory, Callable[[], Memory]]


class _Lazy:
    """Build the Memory on first use, once, so importing or creating the app never loads a model."""

    def __init__(self, source: MemorySource):
        self._source, self._mem, self._lock = source, None, threading.Lock()

    def __call__(self) -> Memory:
        if self._mem is None:
            with self._lock:
                if self._mem is None:
                    self._mem = self._source if isinstance(self._source, Memory) else self._source()
        return self._mem


def _field(loc) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "path", "query", "header"):
        where, rest = parts[0], parts[1:]
        return f"{where} field {'.'.join(rest)!r}" if rest else f"request {where}"
    return ".".join(parts)


def create_app(memory: MemorySource, keys: KeyRing | Mapping[str, str],
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, rate_limit: Optional[RateLimiter] = None) -> FastAPI:
    """The API for one Memory (or a zero-argument factory of one) and a set of tenant keys.
    Request bodies over `max_body_bytes` are refused with 413 before they are parsed; with a
    `rate_limit`, a tenant over its rate gets 429 with Retry-After."""
    ring = keys if isinstance(keys, KeyRing) else KeyRing(keys)
    get_memory = _Lazy(memory)
    bearer = HTTPBearer(auto_error=False, description="A tenant API key: `Authorization: Bearer KEY`.")
    # FastAPIOffline serves Swagger UI / ReDoc from the package, not a CDN: the API docs work on a car's or a
    # plant's network that reaches nothing outside
    app = FastAPIOffline(title="boundmem", version="1",
                  description="Bounded long-term memory: only the categories a user agreed to, all of it visible, "
                              "forgotten on request.",
                  responses={401: {"model": ErrorOut}, 413: {"model": ErrorOut}, 422: {"model": ErrorOut},
                                429: {"model": ErrorOut}})
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        errs = exc.errors()
        msg = "; ".join(f"{_field(e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in errs)
        clean = [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in errs]
        return JSONResponse(status_code=422, content={"detail": clean, "message": msg})

    # --- dependencies --------------------------------------------------------------------------
    def tenant(cred: Annotated[Optional[HTTPAuthorizationCredentials], Depends(bearer)]) -> str:
        t = ring.tenant(cred.credentials if cred else None)
        if t is None:
            raise HTTPException(status.HTTP_401_UNAUTHORIZED, "missing or invalid API key (Authorization: Bearer KEY)",
                                headers={"WWW-Authenticate": "Bearer"})
        if rate_limit is not None:
            wait = rate_limit.take(t)
            if wait is not None:
                raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS,
                                    f"tenant {t!r} is over its rate limit of {rate_limit.rate:g} requests/s "
                                    f"(burst {rate_limit.burst}); retry in {wait:.2f} s",
                                    headers={"Retry-After": str(max(1, math.ceil(wait)))})
        return t

    UserId = Annotated[str, Path(pattern=USER_ID_PATTERN, description="Your user id (no ':').")]
    Tenant = Annotated[str, Depends(tenant)]
    Mem = Annotated[Memory, Depends(get_memory)]

    def stored(tenant_: str, user: str) -> str:
        return namespaced(tenant_, user)

    def out(mem: Memory, p: Preference, user: str) -> PreferenceOut:
        try:
            ref = mem.schema.resolve(p.path)
            cat = f"{ref.main.name} > {ref.sub.name} > {ref.detail.name}"
        except UnknownCategoryError:
            cat = str(p.path)
        return PreferenceOut(id=p.id, user=user, path=p.path, category=cat, attribute=p.attribute, sentence=p.sentence,
                             conversation_id=p.conversation_id, created_at=p.created_at, updated_at=p.updated_at)

    def prefix(mem: Memory, category: str) -> str:
        try:
            return mem.schema.resolve_prefix(category)
        except UnknownCategoryError as e:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"unknown category {category!r} in schema {mem.schema.name!r}") from e

    NOT_FOUND = {404: {"model": ErrorOut}}

    # --- memory --------------------------------------------------------------------------------
    @app.post("/v1/users/{user}/conversations", response_model=IngestOut, tags=["memory"],
              responses={502: {"model": ErrorOut}})
    def add_conversation(user: UserId, body: ConversationIn, t: Tenant, mem: Mem) -> IngestOut:
        """Extract preferences from a conversation and store them (all of them or none)."""
        conv = Conversation(id=body.id, turns=tuple(body.turns), at=body.at)
        try:
            r = mem.add(conv, stored(t, user))
        except ExtractionError as e:
            raise HTTPException(status.HTTP_502_BAD_GATEWAY, f"extraction failed, nothing stored: {e}") from e
        return IngestOut(user=user, conversation_id=r.conversation_id, decisions=r.decisions, blocked=r.blocked)

    @app.post("/v1/users/{user}/recall", response_model=RecallOut, tags=["memory"])
    def recall(user: UserId, body: RecallRequest, t: Tenant, mem: Mem) -> RecallOut:
        """The stored preferences most relevant to what the user just said."""
        hits = mem.recall(body.utterance, stored(t, user), k=body.k)
        return RecallOut(user=user, hits=[RecallHitOut(preference=out(mem, h.preference, user), score=h.score) for h in hits])

    # --- transparency and control ------------------------------------------------------------
    @app.get("/v1/users/{user}/preferences", response_model=PreferenceList, tags=["transparency"],
             responses={422: {"model": ErrorOut}})
    def list_preferences(user: UserId, t: Tenant, mem: Mem,
                         category: Annotated[Optional[str], Query(max_length=300, description="Only under this main/sub/detail category.")] = None) -> PreferenceList:
        """Every stored preference, with the sentence it came from."""
        if category is not None:
            try:
                mem.schema.resolve_prefix(category)
            except UnknownCategoryError as e:
                raise RequestValidationError([{"loc": ("query", "category"), "msg": str(e), "type": "unknown_category"}]) from e
        prefs = mem.preferences(stored(t, user), category)
        return PreferenceList(user=user, preferences=[out(mem, p, user) for p in prefs])

    @app.delete("/v1/users/{user}/preferences/{pref_id}", response_model=PreferenceOut, tags=["transparency"],
                responses=NOT_FOUND)
    def delete_preference(user: UserId, pref_id: Annotated[str, Path(max_length=100)], t: Tenant, mem: Mem) -> PreferenceOut:
        """Delete one preference; returns what was deleted."""
        try:
            p = mem.delete(stored(t, user), pref_id)
        except NotFoundError as e:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no preference {pref_id!r} for user {user!r}") from e
        return out(mem, p, user)

    @app.get("/v1/users/{user}/export", response_model=UserExport, tags=["transparency"])
    def export(user: UserId, t: Tenant, mem: Mem) -> UserExport:
        """Everything held about the user: preferences, opt-outs and the audit log."""
        ns = stored(t, user)
        e = mem.export(ns)

        def scrub(d: Optional[dict]) -> Optional[dict]:
            return None if d is None else {k: (user if k == "user" and v == ns else v) for k, v in d.items()}

        return UserExport(user=user, exported_at=e.exported_at, opt_outs=e.opt_outs,
                          preferences=[p.model_copy(update={"user": user}) for p in e.preferences],
                          audit=[AuditEntry(**{**a.model_dump(), "user": user, "before": scrub(a.before), "after": scrub(a.after)})
                                 for a in e.audit])

    @app.delete("/v1/users/{user}", response_model=ForgetOut, tags=["transparency"])
    def forget(user: UserId, t: Tenant, mem: Mem) -> ForgetOut:
        """Erase everything stored about the user (the erasure itself stays recorded)."""
        return ForgetOut(user=user, erased=mem.forget(stored(t, user)))

    @app.get("/v1/users/{user}/opt-outs", response_model=OptOutList, tags=["consent"])
    def list_opt_outs(user: UserId, t: Tenant, mem: Mem) -> OptOutList:
        return OptOutList(user=user, opt_outs=mem.store.opt_outs(stored(t, user)))

    @app.put("/v1/users/{user}/opt-outs/{category:path}", response_model=OptOutOut, tags=["consent"], responses=NOT_FOUND)
    def opt_out(user: UserId, category: str, t: Tenant, mem: Mem) -> OptOutOut:
        """Stop remembering a main, sub or detail category (key, name or path) and purge what is held there."""
        pre = prefix(mem, category)
        purged = mem.opt_out(stored(t, user), pre)
        return OptOutOut(user=user, category=pre, purged=[out(mem, p, user) for p in purged])

    @app.delete("/v1/users/{user}/opt-outs/{category:path}", response_model=OptInOut, tags=["consent"], responses=NOT_FOUND)
    def opt_in(user: UserId, category: str, t: Tenant, mem: Mem) -> OptInOut:
        """Allow a category again (only removes an opt-out of exactly this category)."""
        pre = prefix(mem, category)
        return OptInOut(user=user, category=pre, changed=mem.opt_in(stored(t, user), pre))

    # --- schema --------------------------------------------------------------------------------
    @app.get("/v1/schema", response_model=Schema, tags=["schema"])
    def schema(t: Tenant, mem: Mem) -> Schema:
        """Every category the operator allows boundmem to remember."""
        return mem.schema

    @app.get("/v1/users/{user}/schema", response_model=Schema, tags=["schema"])
    def user_schema(user: UserId, t: Tenant, mem: Mem) -> Schema:
        """The categories this user agreed to: the schema without their opt-outs."""
        return mem.user_schema(stored(t, user))

    # --- transparency page ---------------------------------------------------------------------
    def page_file(name: str) -> FileResponse:
        r = FileResponse(STATIC / name)
        r.headers["Content-Security-Policy"] = PAGE_CSP
        r.headers["X-Content-Type-Options"] = "nosniff"
        r.headers["Referrer-Policy"] = "no-referrer"
        r.headers["Cache-Control"] = "no-store"
        return r

    @app.get("/", include_in_schema=False)
    def root():
        return RedirectResponse("/ui")

    @app.get("/ui", include_in_schema=False)
    def ui():
        return page_file("index.html")

    @app.get("/ui/{name}", include_in_schema=False)
    def ui_asset(name: str):
        if name not in ("app.js", "style.css"):
            raise HTTPException(404, f"no such file {name!r}")
        return page_file(name)

    return app
