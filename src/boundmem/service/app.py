"""The HTTP API and the transparency page, on top of `Memory`: `create_app` assembles the routers (service/routes/,
one per resource), the dependencies they share (service/deps.py), the error handlers (service/error_handlers.py)
and the request limits.

Routes are plain `def`s because `Memory` is synchronous and may embed text; Starlette runs them in its thread pool.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from . import error_handlers, jobs_api
from .auth import KeyRing
from .deps import LazyMemory, MemorySource, Service
from .limits import DEFAULT_MAX_BODY_BYTES, DEFAULT_RATE_LIMIT, BodySizeLimit, ContentLimits, throttle
from .routes import access, conversations, edit, episodes, jobs, observations, opt_outs, page, preferences, schema
from .tokens import TokenIssuer

def create_app(memory: MemorySource, keys: KeyRing | Mapping[str, str],
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, rate_limit: Any = DEFAULT_RATE_LIMIT,
               limits: Optional[ContentLimits] = None, tokens: Optional[TokenIssuer] = None) -> FastAPI:
    """The API for one Memory (or a zero-argument factory of one) and a set of tenant keys.

    Request bodies over `max_body_bytes` are refused with 413 and JSON nested deeper than 64 levels with 400 before
    they are parsed, conversations over `limits` with 413 naming the limit. Each tenant gets a token bucket
    (default 20 requests/s, burst 40), each user token a smaller one inside it (5/s, burst 20), and each client
    address a budget of failed authentications (1/s, burst 30): over one, 429 with Retry-After. `rate_limit`: a
    RateLimiter changes the tenant's bucket, a Throttle sets all three, None turns them all off. A store that
    cannot get its write lock answers 503 with Retry-After. `tokens` mints and checks user tokens (default: a
    random secret of this process, so tokens die with it)."""
    get_memory = LazyMemory(memory)
    # FastAPIOffline serves Swagger UI / ReDoc from the package, not a CDN: the API docs work on a car's or a
    # plant's network that reaches nothing outside
    app = FastAPIOffline(title="boundmem", version="1",
                         description="Bounded long-term memory: only the categories a user agreed to, all of it "
                                     "visible, forgotten on request.", responses=error_handlers.RESPONSES)
    app.state.boundmem = Service(ring=keys if isinstance(keys, KeyRing) else KeyRing(keys),
                                 tokens=tokens or TokenIssuer(),
                                 throttle=throttle(rate_limit),
                                 limits=limits or ContentLimits(), memory=get_memory)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)
    error_handlers.install(app)
    for r in (conversations, preferences, edit, observations, opt_outs, episodes, access, schema, jobs, page):
        app.include_router(r.router)
    jobs_api.run_worker(app, get_memory)
    return app

