"""What the routes need from a request: who is asking (a tenant key or a user token, rate-limited), which user the
request acts on, and the Memory. The proxy uses the same `authenticate`, so both servers resolve credentials and
apply rate limits the same way.

Tenancy lives in two small pieces: `principal` turns the bearer key into a tenant, and `subject` joins it with the
path's (validated) user id into the store's namespaced id, so no route ever handles a raw store id taken from the
request. The app's parts (key ring, token issuer, rate limiter, content limits, the lazily built Memory) sit in
`app.state.boundmem` (set by `create_app`), so the routers are plain module-level APIRouters.

Every dependency here is an `async def`: FastAPI runs a plain `def` dependency in its thread pool, one hop (a thread
wake-up and a return to the event loop) per dependency per request, and these only read the app's state, hash a
key or check a token's signature. Only building the Memory (a model load, once) goes to a thread.

No `from __future__ import annotations`: FastAPI resolves the Annotated aliases at runtime.
"""

import threading
from dataclasses import dataclass
from typing import Annotated, Callable, Optional, Union

from fastapi import Depends, HTTPException, Path, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AfterValidator

from ..errors import BoundmemError, NotFoundError
from ..memory import Memory
from ..schema.model import UnknownCategoryError
from ..user_id import RULE as USER_ID_RULE
from ..user_id import USER_ID_PATTERN, check_user_id, namespaced
from .auth import KeyRing
from .limits import ContentLimits, RateLimited, Throttle
from .tokens import TokenError, TokenIssuer, looks_like_token

MemorySource = Union[Memory, Callable[[], Memory]]


class LazyMemory:
    """Build the Memory on first use, once, so importing or creating the app never loads a model."""

    def __init__(self, source: MemorySource):
        self._source, self._mem, self._lock = source, None, threading.Lock()

    def __call__(self) -> Memory:
        if self._mem is None:
            with self._lock:
                if self._mem is None:
                    self._mem = self._source if isinstance(self._source, Memory) else self._source()
        return self._mem

    @property
    def built(self) -> Optional[Memory]:
        """The Memory if it has been built, else None (shutting down must not build one)."""
        return self._mem

    async def get(self) -> Memory:
        """The Memory, from the event loop: built in a worker thread the first time (a model load must not stop the
        loop), at once after."""
        return self._mem if self._mem is not None else await run_in_threadpool(self)


@dataclass(frozen=True)
class Service:
    """The parts of one app that its requests share."""

    ring: KeyRing
    tokens: TokenIssuer
    throttle: Throttle
    limits: ContentLimits
    memory: LazyMemory


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


async def service(request: Request) -> Service:
    return request.app.state.boundmem


bearer = HTTPBearer(auto_error=False, description="A tenant API key, or a user token minted with it: "
                                                  "`Authorization: Bearer KEY-OR-TOKEN`.")


class Unauthorized(BoundmemError):
    """No valid tenant key or user token was presented (401); each surface answers it in its own error shape."""

    code = "unauthorized"


def authenticate(svc: Service, presented: Optional[str], address: Optional[str]) -> Principal:
    """The principal of a bearer credential, after the rate limits: an address over its failed-authentication
    budget is refused first (RateLimited), a bad credential counts against its address (Unauthorized), and a
    good one against its tenant and, for a user token, its user (RateLimited)."""
    svc.throttle.check_address(address)
    try:
        who = _identify(svc, presented)
    except Unauthorized:
        svc.throttle.failed(address)
        raise
    svc.throttle.admit(who.tenant, who.user)
    return who


def _identify(svc: Service, presented: Optional[str]) -> Principal:
    if presented and looks_like_token(presented):
        try:
            tok = svc.tokens.verify(presented)
        except TokenError as e:
            raise Unauthorized(f"invalid user token: {e}") from e
        if tok.tenant not in svc.ring.tenants:   # the tenant's key was withdrawn: so are its users' tokens
            raise Unauthorized("invalid user token: unknown tenant")
        return Principal(tok.tenant, tok.user, tok.expires_at)
    t = svc.ring.tenant(presented)
    if t is None:
        raise Unauthorized("missing or invalid API key or user token (Authorization: Bearer KEY)")
    return Principal(t)


def client_address(request: Request) -> Optional[str]:
    """The peer's address as the server sees it (behind a reverse proxy: run uvicorn with --forwarded-allow-ips so
    this is the client's, not the proxy's)."""
    return request.client.host if request.client else None


async def principal(request: Request, svc: Annotated[Service, Depends(service)],
              cred: Annotated[Optional[HTTPAuthorizationCredentials], Depends(bearer)]) -> Principal:
    try:
        return authenticate(svc, cred.credentials if cred else None, client_address(request))
    except Unauthorized as e:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, str(e), headers={"WWW-Authenticate": "Bearer"}) from e
    except RateLimited as e:
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, str(e),
                            headers={"Retry-After": str(e.retry_after)}) from e


UserId = Annotated[str, Path(pattern=f"^{USER_ID_PATTERN}$", description=f"Your user id: {USER_ID_RULE}."),
                   AfterValidator(check_user_id)]
Who = Annotated[Principal, Depends(principal)]


async def subject(request: Request, user: UserId, who: Who) -> Subject:
    """The path's user, if the caller may act on it: a tenant key any of its users, a user token only its own.
    Kept on the request so an error message never shows the store's namespaced id (see error_handlers)."""
    if who.user is not None and who.user != user:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this user token is for another user; it can only read, "
                                                       "change or forget its own user")
    request.state.subject = s = Subject(user, namespaced(who.tenant, user))
    return s


async def tenant_only(who: Who) -> str:
    if who.user is not None:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "needs the tenant API key (a user token cannot do this)")
    return who.tenant


async def memory(svc: Annotated[Service, Depends(service)]) -> Memory:
    return await svc.memory.get()


async def limits(svc: Annotated[Service, Depends(service)]) -> ContentLimits:
    return svc.limits


async def tokens(svc: Annotated[Service, Depends(service)]) -> TokenIssuer:
    return svc.tokens


Subj = Annotated[Subject, Depends(subject)]
Tenant = Annotated[str, Depends(tenant_only)]
Mem = Annotated[Memory, Depends(memory)]
Limits = Annotated[ContentLimits, Depends(limits)]
Tokens = Annotated[TokenIssuer, Depends(tokens)]


async def category_prefix(category: str, mem: Mem) -> str:
    """The path's category (key, name or path) as the schema's prefix. A category in the path names a resource, so
    one the schema does not hold is not found (404), not invalid input."""
    try:
        return mem.schema.resolve_prefix(category)
    except UnknownCategoryError as e:
        raise NotFoundError(f"unknown category {category!r} in schema {mem.schema.name!r}") from e


Category = Annotated[str, Depends(category_prefix)]
