"""Request limits for the API, the proxy and the MCP server: body size, JSON depth, what a conversation may hold,
requests per tenant, per user token and failed authentications per client address.

Why: one conversation is a few kilobytes; a client that posts megabytes (by mistake or on purpose) would
otherwise be read into memory, parsed and embedded turn by turn while other users wait. The limit is checked
against Content-Length before anything is read, and against the bytes actually received for chunked
bodies, so a lying or missing Content-Length does not get past it. At most `max_bytes` are buffered.
"""
from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from ..errors import LimitError
from ..store.base import BUSY_RETRY_AFTER, EmbeddingDimensionError


DEFAULT_MAX_BODY_BYTES = 1_000_000
DEFAULT_RATE = 20.0     # requests/s per tenant; on by default (0 or None turns it off)
DEFAULT_BURST = 40
DEFAULT_USER_RATE = 5.0   # requests/s per user token, inside its tenant's budget: one user cannot drain the tenant
DEFAULT_USER_BURST = 20
DEFAULT_FAILURE_RATE = 1.0   # failed authentications/s per client address (a key or token guessed, a flood)
DEFAULT_FAILURE_BURST = 30
MAX_JSON_DEPTH = 64      # deeper JSON is refused before anything reads it (a chat request nests ~10 levels)
STORE_BUSY_RETRY_AFTER = math.ceil(BUSY_RETRY_AFTER)   # seconds a client is told to wait when the store is busy


def dimension_error(exc: BaseException) -> Optional[str]:
    """If `exc` is the store's EmbeddingDimensionError, a message naming both dimensions (and no store user id,
    which would show the tenant namespace); else None."""
    if not isinstance(exc, EmbeddingDimensionError):
        return None
    return (f"embedding dimension mismatch: this user's memory holds {exc.stored}-d embeddings, this server's "
            f"embedder gives {exc.got}-d vectors; the memory was filled with another embedder (nothing was changed)")


def retry_after(exc: BaseException) -> int:
    """Whole seconds for a Retry-After header: the store's hint, rounded up, or the default (the stores' own hint,
    so every route gives the same advice for the same busy store, whether the store or SQLite itself raised)."""
    hint = getattr(exc, "retry_after", None)
    return max(1, math.ceil(hint)) if isinstance(hint, (int, float)) and hint > 0 else STORE_BUSY_RETRY_AFTER


def error_body(code: str, message: str, limit: Optional[dict] = None, detail: Any = None,
               upstream: Optional[str] = None) -> dict:
    """The one JSON shape of every error the service answers: a machine-readable `code`, a `message` for people,
    the `limit` that was hit (name and value) when one was, the `upstream` that failed when one did, and `detail`
    (the message, or validation details)."""
    body: dict = {"detail": message if detail is None else detail, "message": message, "code": code}
    if limit is not None:
        body["limit"] = limit
    if upstream is not None:
        body["upstream"] = upstream
    return body


@dataclass
class LimitExceeded(LimitError):
    """A request over one of the content limits; `name` is the setting (and the JSON `code`)."""

    name: str
    value: int
    actual: int
    status: int = 413

    def __str__(self) -> str:
        what = {"max_turn_chars": "a turn of {a} characters", "max_turns": "{a} turns",
                "max_total_chars": "{a} characters in all turns", "max_body_bytes": "a request body larger than {v} bytes",
                "max_utterance_chars": "an utterance of {a} characters",
                "max_json_depth": "JSON nested more than {v} levels deep"}[self.name].format(a=self.actual, v=self.value)
        return f"{what} is over the limit {self.name}={self.value}"

    @property
    def code(self) -> str:   # type: ignore[override]  # the limit's name is the JSON code
        return self.name

    def body(self) -> dict:
        return error_body(self.name, str(self), {"name": self.name, "value": self.value})


@dataclass(frozen=True)
class ContentLimits:
    """What one request may ask the extractor to read. Why: the local extractor embeds every sentence, so cost
    grows with the characters sent (a 1 MB body of long turns took ~73 s of CPU); these caps bound one request to
    about a second of work by default. The body-size limit still applies on top."""

    max_turn_chars: int = 4_000
    max_turns: int = 100
    max_total_chars: int = 20_000
    max_utterance_chars: int = 4_000

    def __post_init__(self):
        for k, v in vars(self).items():
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{k} must be a positive integer, got {v!r}")

    def check_turns(self, texts: Iterable[str]) -> None:
        """Raise LimitExceeded for the first limit these turns break (turn count, a turn's length, the total)."""
        texts = list(texts)
        if len(texts) > self.max_turns:
            raise LimitExceeded("max_turns", self.max_turns, len(texts))
        for t in texts:
            if len(t) > self.max_turn_chars:
                raise LimitExceeded("max_turn_chars", self.max_turn_chars, len(t))
        total = sum(map(len, texts))
        if total > self.max_total_chars:
            raise LimitExceeded("max_total_chars", self.max_total_chars, total)

    def check_utterance(self, text: str) -> None:
        if len(text) > self.max_utterance_chars:
            raise LimitExceeded("max_utterance_chars", self.max_utterance_chars, len(text))


def _too_deep(obj: Any, limit: int) -> bool:
    """Whether a parsed JSON value nests more than `limit` containers deep (iteratively: no recursion to run out of)."""
    stack = [(obj, 1)]
    while stack:
        o, depth = stack.pop()
        children = o.values() if isinstance(o, dict) else o
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def parse_json(data: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """JSON from an untrusted client, bounded in depth: ValueError (json.JSONDecodeError, UnicodeDecodeError) for
    what is not JSON, LimitExceeded `max_json_depth` (400) for what nests deeper than `max_depth`. Why: the
    standard parser recurses, so `[` x 100000 raises RecursionError, which no caller expects (a 500, or a dead
    MCP server); and a deep value that parses still makes every later walk over it (validation, re-encoding) deep."""
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    if text.count("[") + text.count("{") <= max_depth:   # cannot be too deep: the common, cheap case
        return json.loads(text)
    try:
        obj = json.loads(text)
    except RecursionError:
        raise LimitExceeded("max_json_depth", max_depth, max_depth + 1, status=400) from None
    if isinstance(obj, (dict, list)) and _too_deep(obj, max_depth):
        raise LimitExceeded("max_json_depth", max_depth, max_depth + 1, status=400)
    return obj


def json_depth_error(body: bytes, max_depth: int = MAX_JSON_DEPTH) -> Optional[LimitExceeded]:
    """The depth limit a JSON request body breaks, if any (anything else wrong with it is left to the route)."""
    if body.count(b"[") + body.count(b"{") <= max_depth:
        return None
    try:
        parse_json(body, max_depth)
    except LimitExceeded as e:
        return e
    except ValueError:
        return None
    return None


def service_error(exc: LimitExceeded) -> dict:
    return exc.body()


class BodySizeLimit:
    """Refuses a body over `max_bytes` (413) and a JSON body nested deeper than `max_depth` (400) before the app
    sees it. `render` turns the limit hit into the JSON body of the answer (the API's shape by default; the proxy
    passes OpenAI's)."""

    def __init__(self, app, max_bytes: int = DEFAULT_MAX_BODY_BYTES, max_depth: int = MAX_JSON_DEPTH,
                 render: Callable[[LimitExceeded], dict] = service_error):
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        self.app, self.max_bytes, self.max_depth, self.render = app, max_bytes, max_depth, render

    async def _reject(self, send, exc: Optional[LimitExceeded] = None) -> None:
        exc = exc or LimitExceeded("max_body_bytes", self.max_bytes, self.max_bytes + 1)
        body = json.dumps(self.render(exc)).encode()
        await send({"type": "http.response.start", "status": exc.status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        for k, v in scope.get("headers", ()):
            if k == b"content-length":
                try:
                    too_big = int(v) > self.max_bytes
                except ValueError:
                    too_big = False   # the server rejects a malformed header itself
                if too_big:
                    return await self._reject(send)
        # read the body up front (at most max_bytes of it): a limit hit while the endpoint is reading would be
        # turned into a 400 "error parsing the body" by FastAPI
        chunks, seen = [], 0
        while True:
            msg = await receive()
            if msg["type"] != "http.request":
                return   # client went away
            chunk = msg.get("body", b"")
            seen += len(chunk)
            if seen > self.max_bytes:
                return await self._reject(send)
            chunks.append(chunk)
            if not msg.get("more_body", False):
                break
        body, replayed = b"".join(chunks), False
        deep = json_depth_error(body, self.max_depth) if body else None
        if deep is not None:
            return await self._reject(send, deep)

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()   # after the body: wait for a disconnect, as the server would report it

        await self.app(scope, replay, send)


class RateLimiter:
    """Requests per key (a tenant, a user token, a client address): a token bucket of `burst` requests refilled at
    `per_second`.

    The buckets live in this process: with several servers behind a balancer each enforces its own share (set the
    rate accordingly)."""

    def __init__(self, per_second: float, burst: Optional[int] = None, clock: Callable[[], float] = time.monotonic):
        if per_second <= 0:
            raise ValueError(f"per_second must be positive, got {per_second}")
        self.rate = float(per_second)
        self.burst = int(burst) if burst is not None else max(1, int(round(per_second)))
        if self.burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}   # key -> (tokens, last refill time)
        self._lock = threading.Lock()

    def _level(self, key: str, now: float) -> float:
        tokens, last = self._buckets.get(key, (float(self.burst), now))
        return min(float(self.burst), tokens + (now - last) * self.rate)

    def take(self, key: str) -> Optional[float]:
        """None if the request may go ahead (one token taken), else the seconds to wait before the next one will."""
        now = self._clock()
        with self._lock:
            tokens = self._level(key, now)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return None
            self._buckets[key] = (tokens, now)
            if len(self._buckets) > 100_000:   # a flood of distinct keys (addresses) must not grow memory forever
                self._prune(now)
            return (1.0 - tokens) / self.rate

    def wait(self, key: str) -> Optional[float]:
        """What `take` would answer, without taking anything."""
        now = self._clock()
        with self._lock:
            tokens = self._level(key, now)
        return None if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def refund(self, key: str) -> None:
        """Give back a token taken by a request that was then refused by another limit."""
        now = self._clock()
        with self._lock:
            self._buckets[key] = (min(float(self.burst), self._level(key, now) + 1.0), now)

    def _prune(self, now: float) -> None:
        full = [k for k in self._buckets if self._level(k, now) >= self.burst]
        for k in full:
            del self._buckets[k]


@dataclass
class RateLimited(LimitError):
    """Over a rate limit: `name` says which (tenant_rate, user_rate, auth_failures), `retry_after` when to retry."""

    name: str
    message: str
    wait: float
    status: int = 429

    def __str__(self) -> str:
        return self.message

    @property
    def code(self) -> str:   # type: ignore[override]
        return "rate_limited"

    @property
    def retry_after(self) -> int:
        return max(1, math.ceil(self.wait))

    def body(self) -> dict:
        return error_body("rate_limited", self.message, {"name": self.name})


def _per_second(limiter: RateLimiter) -> str:
    return f"{limiter.rate:g} requests/s (burst {limiter.burst})"


@dataclass(frozen=True)
class Throttle:
    """The rate limits of one server. Why three: the tenant's bucket keeps one tenant from starving the others; a
    user token's own, smaller bucket inside it keeps one end user (or an agent holding their token) from draining
    the tenant for its other users; and failed authentications are counted per client address, so guessing keys or
    tokens, or a flood of bad credentials, is slowed down before it costs anything. None turns one off."""

    tenant: Optional[RateLimiter] = None
    user: Optional[RateLimiter] = None
    failures: Optional[RateLimiter] = None

    @classmethod
    def default(cls, tenant: Optional[RateLimiter] = None) -> "Throttle":
        return cls(tenant=tenant, user=RateLimiter(DEFAULT_USER_RATE, DEFAULT_USER_BURST),
                   failures=RateLimiter(DEFAULT_FAILURE_RATE, DEFAULT_FAILURE_BURST))

    def check_address(self, address: Optional[str]) -> None:
        """Before authenticating: an address over its failed-authentication budget is refused without a look at
        what it sent."""
        if self.failures is None or not address:
            return
        wait = self.failures.wait(address)
        if wait is not None:
            raise RateLimited("auth_failures", f"too many failed authentications from this address (limit "
                                               f"{_per_second(self.failures)}); retry in {wait:.2f} s", wait)

    def failed(self, address: Optional[str]) -> None:
        if self.failures is not None and address:
            self.failures.take(address)

    def admit(self, tenant: str, user: Optional[str] = None) -> None:
        """Count one request of a tenant (and of one user token of it); RateLimited if either is over its limit.
        A request refused by the tenant's bucket does not use up the user's."""
        user_key = f"{tenant}\x00{user}" if user is not None else None
        if user_key is not None and self.user is not None:
            wait = self.user.take(user_key)
            if wait is not None:
                raise RateLimited("user_rate", f"this user token is over its rate limit of {_per_second(self.user)}; "
                                               f"retry in {wait:.2f} s", wait)
        if self.tenant is not None:
            wait = self.tenant.take(tenant)
            if wait is not None:
                if user_key is not None and self.user is not None:
                    self.user.refund(user_key)
                raise RateLimited("tenant_rate", f"tenant {tenant!r} is over its rate limit of "
                                                 f"{_per_second(self.tenant)}; retry in {wait:.2f} s", wait)


DEFAULT_RATE_LIMIT: Any = object()   # the `rate_limit` argument's default: every limit on, at the defaults


def throttle(rate_limit: Any = DEFAULT_RATE_LIMIT) -> Throttle:
    """The Throttle a `rate_limit` argument of `create_app` / `create_proxy` stands for: a RateLimiter is the
    tenant's bucket (the others at their defaults), a Throttle all three, None none."""
    if rate_limit is DEFAULT_RATE_LIMIT:
        return Throttle.default(RateLimiter(DEFAULT_RATE, DEFAULT_BURST))
    if rate_limit is None:
        return Throttle()
    if isinstance(rate_limit, RateLimiter):
        return Throttle.default(rate_limit)
    if isinstance(rate_limit, Throttle):
        return rate_limit
    raise TypeError(f"rate_limit must be a RateLimiter, a Throttle or None, not {type(rate_limit).__name__}")
