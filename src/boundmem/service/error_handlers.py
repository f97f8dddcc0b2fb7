"""Every error the API answers, mapped once: each branch of `boundmem.errors` to one status code, all in one JSON
shape (`api_models.ErrorOut`: code, message, detail, and the limit that was hit). Routes raise and never catch;
a new concrete error needs no handler of its own.

    InputError 422 · LimitError 413 (its own status if it has one) · NotFoundError 404 · ConflictError 409 ·
    UpstreamError 502 · StoreError 503 + Retry-After when busy, 503 on a read-only replica, else 500 · ConfigError and the rest 500

Messages never show the store's namespaced user id (the caller's own id replaces it) nor an upstream's address.
"""
from __future__ import annotations

import logging
import re
import sqlite3
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..api_models import ErrorOut
from ..errors import (BoundmemError, ConfigError, ConflictError, InputError, LimitError, NotFoundError, StoreError,
                      UpstreamError)
from ..extract.base import ExtractionError
from ..store.base import is_store_busy
from .limits import LimitExceeded, dimension_error, error_body, retry_after

log = logging.getLogger("boundmem.service")
_ENDPOINT = re.compile(r"\bhttps?://[^\s)'\"]+")   # an upstream's address, which a client never sees

HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
              409: "conflict", 413: "too_large", 422: "invalid_request", 429: "rate_limited", 500: "internal_error",
              502: "upstream_failed", 503: "store_busy"}
# for the OpenAPI document: every route may answer these
RESPONSES: dict[int | str, dict[str, Any]] = {c: {"model": ErrorOut} for c in (401, 403, 409, 413, 422, 429, 500, 502, 503)}
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut}}


def _field(loc) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "path", "query", "header"):
        where, rest = parts[0], parts[1:]
        return f"{where} field {'.'.join(rest)!r}" if rest else f"request {where}"
    return ".".join(parts)


def _said(request: Request, exc: BaseException) -> str:
    """The exception's message with the store's id of the user (TENANT:USER) put back as the caller named it."""
    msg = str(exc)
    s = getattr(request.state, "subject", None)
    return msg.replace(s.ns, s.user) if s is not None else msg


def _json(status: int, code: str, message: str, headers: Optional[dict] = None, **kw: Any) -> JSONResponse:
    return JSONResponse(status_code=status, content=error_body(code, message, **kw), headers=headers)


@contextmanager
def about_field(*loc: str, kind: str = "value_error") -> Iterator[None]:
    """An InputError raised inside is about one request field (`loc`, as FastAPI writes it: ("query", "category")):
    answered like FastAPI's own validation errors, 422 naming the field with `detail` [{loc, msg, type}]."""
    try:
        yield
    except InputError as e:
        raise RequestValidationError([{"loc": loc, "msg": str(e), "type": kind}]) from e


async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    errs = exc.errors()
    msg = "; ".join(f"{_field(e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in errs)
    clean = [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in errs]
    return _json(422, "invalid_request", msg, detail=clean)


async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = getattr(exc, "code", None) or HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    msg = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    return _json(exc.status_code, code, msg, headers=exc.headers)


async def _input(request: Request, exc: InputError) -> JSONResponse:
    return _json(422, exc.code, _said(request, exc))


async def _limit(request: Request, exc: LimitError) -> JSONResponse:
    if isinstance(exc, LimitExceeded):
        return JSONResponse(status_code=exc.status, content=exc.body())
    return _json(413, exc.code, _said(request, exc))


async def _not_found(request: Request, exc: NotFoundError) -> JSONResponse:
    return _json(404, exc.code, _said(request, exc))


async def _conflict(request: Request, exc: ConflictError) -> JSONResponse:
    return _json(409, exc.code, dimension_error(exc) or _said(request, exc))


async def _upstream(request: Request, exc: UpstreamError) -> JSONResponse:
    # the client learns which upstream failed and how, the log the rest (the message may name the endpoint)
    log.warning("%s failed on %s %s: %s", exc.upstream, request.method, request.url.path, exc)
    if isinstance(exc, ExtractionError):   # the model's answer was unusable: the message is about the output
        return _json(502, exc.code, f"extraction failed, nothing stored: {_ENDPOINT.sub('<endpoint>', _said(request, exc))}",
                     upstream=exc.upstream)
    http = f", HTTP {exc.status}" if exc.status else ""
    return _json(502, exc.code, f"{exc.upstream} failed ({type(exc).__name__}{http}); nothing was stored, "
                                f"retry later", upstream=exc.upstream)


async def _store(request: Request, exc: Exception) -> JSONResponse:
    if is_store_busy(exc):
        wait = retry_after(exc)
        return _json(503, "store_busy", f"the store is busy with another writer; nothing was changed, retry in "
                                        f"{wait} s", headers={"Retry-After": str(wait)})
    if getattr(exc, "code", None) == "read_only_replica":
        # a server whose BOUNDMEM_DB points at a streaming replica serves reads; writes belong to the primary
        return _json(503, "read_only_replica", "this server reads from a replica of the store; send writes to the "
                                               "server on the primary")
    log.error("store error on %s %s", request.method, request.url.path, exc_info=exc)
    return _json(500, "internal_error", "internal error")


async def _crash(request: Request, exc: Exception) -> JSONResponse:
    # the same JSON shape for the unexpected and for a misconfigured server (logged here or by Starlette)
    if isinstance(exc, ConfigError):
        log.error("configuration error on %s %s", request.method, request.url.path, exc_info=exc)
    return _json(500, "internal_error", "internal error")


def install(app: FastAPI) -> None:
    """Register the handlers on `app`; Starlette picks the most specific class of the exception's MRO."""
    for cls, handler in ((RequestValidationError, _invalid_request), (StarletteHTTPException, _http),
                         (InputError, _input), (LimitError, _limit), (NotFoundError, _not_found),
                         (ConflictError, _conflict), (UpstreamError, _upstream), (StoreError, _store),
                         (sqlite3.OperationalError, _store), (BoundmemError, _crash), (Exception, _crash)):
        app.add_exception_handler(cls, handler)
