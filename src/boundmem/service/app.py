"""The HTTP API and the transparency page, on top of `Memory`.

No `from __future__ import annotations` here: FastAPI must resolve the closures' Annotated aliases at runtime.

Tenancy lives in two small pieces: the `tenant` dependency turns the bearer key into a
tenant, and `stored()` joins it with the path's (validated) user id into the store's
namespaced id, so no endpoint ever handles a raw store id taken from the request. Endpoints are plain `def`s because `Memory` is synchronous and may
embed text; Starlette runs them in its thread pool.
"""

import logging
import math
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path as FsPath
from typing import Annotated, Any, Callable, Mapping, Optional, Union

from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi_offline import FastAPIOffline
from pydantic import AfterValidator
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..api_models import (ConversationIn, ErrorOut, ForgetOut, IngestOut, JobOut, OptInOut, OptOutList, OptOutOut,
                          PreferenceList, PreferenceOut, RecallHitOut, RecallOut, RecallRequest, RevokeOut, TokenOut,
                          TokenRequest, WhoAmIOut)
from ..extract.base import ExtractionError
from ..llm.errors import LLMError
from ..memory import Memory
from ..models import AuditEntry, Conversation, Preference, UserExport
from ..schema.model import Schema, UnknownCategoryError
from ..store import base as store_base
from ..errors import NotFoundError
from ..user_id import RULE as USER_ID_RULE
from ..user_id import USER_ID_PATTERN, check_user_id, namespaced
from . import jobs_api
from .auth import KeyRing
from .limits import (BUSY_ERRORS, DEFAULT_BURST, DEFAULT_MAX_BODY_BYTES, DEFAULT_RATE, BodySizeLimit, ContentLimits,
                     LimitExceeded, RateLimiter, dimension_error, error_body, is_store_busy, retry_after)
from .tokens import TokenError, TokenIssuer, looks_like_token

log = logging.getLogger("boundmem.service")
STATIC = FsPath(__file__).parent / "static"
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
            "form-action 'none'; frame-ancestors 'none'; base-uri 'none'")


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


@dataclass(frozen=True)
class Principal:
    """Who is asking: a tenant (its API key) or one user of a tenant (a user token)."""

    tenant: str
    user: Optional[str] = None       # set for a user token: the only user it may act on
    expires_at: Optional[int] = None


@dataclass(frozen=True)
class Subject:
    """The user a request acts on: the id the caller named and the store's namespaced id."""

    user: str
    ns: str


_DEFAULT = object()
_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
          409: "conflict", 413: "too_large", 422: "invalid_request", 429: "rate_limited", 500: "internal_error",
          502: "extraction_failed", 503: "store_busy"}


def create_app(memory: MemorySource, keys: KeyRing | Mapping[str, str],
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, rate_limit: Any = _DEFAULT,
               limits: Optional[ContentLimits] = None, tokens: Optional[TokenIssuer] = None) -> FastAPI:
    """The API for one Memory (or a zero-argument factory of one) and a set of tenant keys.

    Request bodies over `max_body_bytes` are refused with 413 before they are parsed, conversations over `limits`
    with 413 naming the limit. Each tenant gets a token bucket (default 20 requests/s, burst 40; pass a
    RateLimiter to change it, None to turn it off): over it, 429 with Retry-After. A store that cannot get its
    write lock answers 503 with Retry-After. `tokens` mints and checks user tokens (default: a random secret of
    this process, so tokens die with it)."""
    ring = keys if isinstance(keys, KeyRing) else KeyRing(keys)
    if rate_limit is _DEFAULT:
        rate_limit = RateLimiter(DEFAULT_RATE, DEFAULT_BURST)
    limits = limits or ContentLimits()
    tokens = tokens or TokenIssuer()
    get_memory = _Lazy(memory)
    bearer = HTTPBearer(auto_error=False, description="A tenant API key, or a user token minted with it: "
                                                      "`Authorization: Bearer KEY-OR-TOKEN`.")
    # FastAPIOffline serves Swagger UI / ReDoc from the package, not a CDN: the API docs work on a car's or a
    # plant's network that reaches nothing outside
    errors = {c: {"model": ErrorOut} for c in (401, 403, 409, 413, 422, 429, 500, 502, 503)}
    app = FastAPIOffline(title="boundmem", version="1",
                  description="Bounded long-term memory: only the categories a user agreed to, all of it visible, "
                              "forgotten on request.", responses=errors)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        errs = exc.errors()
        msg = "; ".join(f"{_field(e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in errs)
        clean = [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in errs]
        return JSONResponse(status_code=422, content=error_body("invalid_request", msg, detail=clean))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        code = getattr(exc, "code", None) or _CODES.get(exc.status_code, f"http_{exc.status_code}")
        msg = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return JSONResponse(status_code=exc.status_code, content=error_body(code, msg), headers=exc.headers)

    @app.exception_handler(LimitExceeded)
    async def _limit(request: Request, exc: LimitExceeded):
        return JSONResponse(status_code=exc.status, content=exc.body())

    async def _busy(request: Request, exc: Exception):
        if not is_store_busy(exc):
            log.error("store error on %s %s", request.method, request.url.path, exc_info=exc)
            return JSONResponse(status_code=500, content=error_body("internal_error", "internal error"))
        wait = retry_after(exc)
        return JSONResponse(status_code=503, headers={"Retry-After": str(wait)},
                            content=error_body("store_busy", f"the store is busy with another writer; nothing was "
                                                             f"changed, retry in {wait} s"))

    for cls in BUSY_ERRORS:
        app.add_exception_handler(cls, _busy)

    async def _dimension(request: Request, exc: Exception):
        return JSONResponse(status_code=409, content=error_body("embedding_dimension_mismatch", dimension_error(exc)))

    if getattr(store_base, "EmbeddingDimensionError", None) is not None:
        app.add_exception_handler(store_base.EmbeddingDimensionError, _dimension)

    @app.exception_handler(LLMError)
    async def _llm(request: Request, exc: LLMError):
        # the endpoint's own message may name the endpoint; the client learns the kind of failure, the log the rest
        log.warning("LLM call failed on %s %s: %s", request.method, request.url.path, exc)
        status_ = f", HTTP {exc.status}" if getattr(exc, "status", None) else ""
        return JSONResponse(status_code=502, content=error_body(
            "llm_unavailable", f"the language model endpoint failed ({type(exc).__name__}{status_}); nothing was "
                               "stored, retry later"))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception):   # the same JSON shape for the unexpected (logged by Starlette)
        return JSONResponse(status_code=500, content=error_body("internal_error", "internal error"))

    # --- dependencies --------------------------------------------------------------------------
    def principal(cred: Annotated[Optional[HTTPAuthorizationCredentials], Depends(bearer)]) -> Principal:
        presented = cred.credentials if cred else None
        if presented and looks_like_token(presented):
            try:
                tok = tokens.verify(presented)
            except TokenError as e:
                raise HTTPException(status.HTTP_401_UNAUTHORIZED, f"invalid user token: {e}",
                                    headers={"WWW-Authenticate": "Bearer"}) from e
            if tok.tenant not in ring.tenants:   # the tenant's key was withdrawn: so are its users' tokens
                raise HTTPException(status.HTTP_401_UNAUTHORIZED, "invalid user token: unknown tenant",
                                    headers={"WWW-Authenticate": "Bearer"})
            who = Principal(tok.tenant, tok.user, tok.expires_at)
        else:
            t = ring.tenant(presented)
            if t is None:
                raise HTTPException(status.HTTP_401_UNAUTHORIZED,
                                    "missing or invalid API key or user token (Authorization: Bearer KEY)",
                                    headers={"WWW-Authenticate": "Bearer"})
            who = Principal(t)
        if rate_limit is not None:
            wait = rate_limit.take(who.tenant)
            if wait is not None:
                raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS,
                                    f"tenant {who.tenant!r} is over its rate limit of {rate_limit.rate:g} requests/s "
                                    f"(burst {rate_limit.burst}); retry in {wait:.2f} s",
                                    headers={"Retry-After": str(max(1, math.ceil(wait)))})
        return who

    UserId = Annotated[str, Path(pattern=f"^{USER_ID_PATTERN}$", description=f"Your user id: {USER_ID_RULE}."),
                       AfterValidator(check_user_id)]
    Who = Annotated[Principal, Depends(principal)]

    def subject(user: UserId, who: Who) -> Subject:
        """The path's user, if the caller may act on it: a tenant key any of its users, a user token only its own."""
        if who.user is not None and who.user != user:
            raise HTTPException(status.HTTP_403_FORBIDDEN, "this user token is for another user; it can only read, "
                                                           "change or forget its own user")
        return Subject(user, namespaced(who.tenant, user))

    def tenant_only(who: Who) -> str:
        if who.user is not None:
            raise HTTPException(status.HTTP_403_FORBIDDEN, "needs the tenant API key (a user token cannot do this)")
        return who.tenant

    Subj = Annotated[Subject, Depends(subject)]
    Tenant = Annotated[str, Depends(tenant_only)]
    Mem = Annotated[Memory, Depends(get_memory)]

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
              responses={502: {"model": ErrorOut}, 202: {"model": JobOut}})
    def add_conversation(body: ConversationIn, s: Subj, mem: Mem,
                         run_async: Annotated[bool, Query(alias="async", description=(
                             "Answer 202 with a job at once; a worker applies it (durable, in order per user). "
                             "Follow it at GET /v1/users/{user}/jobs/{id}."))] = False) -> IngestOut:
        """Extract preferences from a conversation and store them (all of them or none). Over a content limit
        (`max_turns`, `max_turn_chars`, `max_total_chars`): 413 naming it, nothing read or stored."""
        limits.check_turns(t.text for t in body.turns)
        conv = Conversation(id=body.id, turns=tuple(body.turns), at=body.at)
        if run_async:
            return jobs_api.accepted(mem, s.user, s.ns, conv)
        try:
            r = mem.add(conv, s.ns)
        except ExtractionError as e:
            raise HTTPException(status.HTTP_502_BAD_GATEWAY, f"extraction failed, nothing stored: {e}") from e
        return IngestOut(user=s.user, conversation_id=r.conversation_id, decisions=r.decisions, blocked=r.blocked,
                         consent=r.consent)

    @app.post("/v1/users/{user}/recall", response_model=RecallOut, tags=["memory"])
    def recall(body: RecallRequest, s: Subj, mem: Mem) -> RecallOut:
        """The stored preferences most relevant to what the user just said."""
        limits.check_utterance(body.utterance)
        hits = mem.recall(body.utterance, s.ns, k=body.k)
        return RecallOut(user=s.user, hits=[RecallHitOut(preference=out(mem, h.preference, s.user), score=h.score) for h in hits])

    # --- transparency and control ------------------------------------------------------------
    @app.get("/v1/users/{user}/preferences", response_model=PreferenceList, tags=["transparency"],
             responses={422: {"model": ErrorOut}})
    def list_preferences(s: Subj, mem: Mem,
                         category: Annotated[Optional[str], Query(max_length=300, description="Only under this main/sub/detail category.")] = None) -> PreferenceList:
        """Every stored preference, with the sentence it came from."""
        if category is not None:
            try:
                mem.schema.resolve_prefix(category)
            except UnknownCategoryError as e:
                raise RequestValidationError([{"loc": ("query", "category"), "msg": str(e), "type": "unknown_category"}]) from e
        prefs = mem.preferences(s.ns, category)
        return PreferenceList(user=s.user, preferences=[out(mem, p, s.user) for p in prefs])

    @app.delete("/v1/users/{user}/preferences/{pref_id}", response_model=PreferenceOut, tags=["transparency"],
                responses=NOT_FOUND)
    def delete_preference(pref_id: Annotated[str, Path(max_length=100)], s: Subj, mem: Mem) -> PreferenceOut:
        """Delete one preference; returns what was deleted."""
        try:
            p = mem.delete(s.ns, pref_id)
        except NotFoundError as e:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no preference {pref_id!r} for user {s.user!r}") from e
        return out(mem, p, s.user)

    @app.get("/v1/users/{user}/export", response_model=UserExport, tags=["transparency"])
    def export(s: Subj, mem: Mem) -> UserExport:
        """Everything held about the user: preferences, opt-outs and the audit log."""
        ns = s.ns
        e = mem.export(ns)

        def scrub(d: Optional[dict]) -> Optional[dict]:
            return None if d is None else {k: (s.user if k == "user" and v == ns else v) for k, v in d.items()}

        return UserExport(user=s.user, exported_at=e.exported_at, opt_outs=e.opt_outs,
                          preferences=[p.model_copy(update={"user": s.user}) for p in e.preferences],
                          audit=[AuditEntry(**{**a.model_dump(), "user": s.user, "before": scrub(a.before), "after": scrub(a.after)})
                                 for a in e.audit], consents=e.consents)

    @app.delete("/v1/users/{user}", response_model=ForgetOut, tags=["transparency"])
    def forget(s: Subj, mem: Mem) -> ForgetOut:
        """Erase everything stored about the user (the erasure itself stays recorded)."""
        return ForgetOut(user=s.user, erased=mem.forget(s.ns))

    @app.get("/v1/users/{user}/opt-outs", response_model=OptOutList, tags=["consent"])
    def list_opt_outs(s: Subj, mem: Mem) -> OptOutList:
        return OptOutList(user=s.user, opt_outs=mem.store.opt_outs(s.ns), consents=mem.consents(s.ns))

    @app.put("/v1/users/{user}/opt-outs/{category:path}", response_model=OptOutOut, tags=["consent"], responses=NOT_FOUND)
    def opt_out(category: str, s: Subj, mem: Mem) -> OptOutOut:
        """Stop remembering a main, sub or detail category (key, name or path) and purge what is held there."""
        pre = prefix(mem, category)
        purged = mem.opt_out(s.ns, pre)
        return OptOutOut(user=s.user, category=pre, purged=[out(mem, p, s.user) for p in purged])

    @app.delete("/v1/users/{user}/opt-outs/{category:path}", response_model=OptInOut, tags=["consent"], responses=NOT_FOUND)
    def opt_in(category: str, s: Subj, mem: Mem) -> OptInOut:
        """Allow a category again (only removes an opt-out of exactly this category)."""
        pre = prefix(mem, category)
        return OptInOut(user=s.user, category=pre, changed=mem.opt_in(s.ns, pre))

    # --- user tokens -----------------------------------------------------------------------------
    @app.post("/v1/users/{user}/tokens", response_model=TokenOut, tags=["access"], status_code=201)
    def mint_token(user: UserId, t: Tenant, request: Request, body: Optional[TokenRequest] = None) -> TokenOut:
        """Mint a short-lived token for one user (tenant API key only). It can read, export, change and forget
        that user and nothing else, and cannot mint tokens. `page_url` opens the transparency page with it (in
        the URL fragment, which browsers never send to a server); the tenant key never goes into a URL."""
        try:
            token, tok = tokens.mint(t, user, body.ttl_seconds if body else None)
        except ValueError as e:
            raise RequestValidationError([{"loc": ("body", "ttl_seconds"), "msg": str(e), "type": "value_error"}]) from e
        return TokenOut(user=user, token=token, expires_at=datetime.fromtimestamp(tok.expires_at, timezone.utc),
                        page_url=f"{str(request.base_url).rstrip('/')}/ui#token={token}")

    @app.delete("/v1/users/{user}/tokens", response_model=RevokeOut, tags=["access"])
    def revoke_tokens(user: UserId, t: Tenant) -> RevokeOut:
        """Revoke every token minted so far for this user (tenant API key only)."""
        tokens.revoke(t, user)
        return RevokeOut(user=user, revoked=True)

    @app.get("/v1/whoami", response_model=WhoAmIOut, tags=["access"])
    def whoami(who: Who) -> WhoAmIOut:
        """What the presented credential is: the tenant key, or a user token (its user and expiry)."""
        exp = None if who.expires_at is None else datetime.fromtimestamp(who.expires_at, timezone.utc)
        return WhoAmIOut(kind="tenant" if who.user is None else "user", user=who.user, expires_at=exp)

    # --- schema --------------------------------------------------------------------------------
    @app.get("/v1/schema", response_model=Schema, tags=["schema"])
    def schema(who: Who, mem: Mem) -> Schema:
        """Every category the operator allows boundmem to remember."""
        return mem.schema

    @app.get("/v1/users/{user}/schema", response_model=Schema, tags=["schema"])
    def user_schema(s: Subj, mem: Mem) -> Schema:
        """The categories this user agreed to: the schema without their opt-outs."""
        return mem.user_schema(s.ns)

    jobs_api.install(app, Subj=Subj, Mem=Mem, memory=get_memory, not_found=NOT_FOUND)

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
