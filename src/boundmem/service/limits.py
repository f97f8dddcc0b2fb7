"""Request limits for the API and the MCP server: body size, what a conversation may hold, requests per tenant.

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
from ..store.base import EmbeddingDimensionError


DEFAULT_MAX_BODY_BYTES = 1_000_000
DEFAULT_RATE = 20.0     # requests/s per tenant; on by default (0 or None turns it off)
DEFAULT_BURST = 40
STORE_BUSY_RETRY_AFTER = 2   # seconds a client is told to wait when another writer holds the store


def dimension_error(exc: BaseException) -> Optional[str]:
    """If `exc` is the store's EmbeddingDimensionError, a message naming both dimensions (and no store user id,
    which would show the tenant namespace); else None."""
    if not isinstance(exc, EmbeddingDimensionError):
        return None
    return (f"embedding dimension mismatch: this user's memory holds {exc.stored}-d embeddings, this server's "
            f"embedder gives {exc.got}-d vectors; the memory was filled with another embedder (nothing was changed)")


def retry_after(exc: BaseException) -> int:
    """Whole seconds for a Retry-After header: the store's hint, rounded up, or the default."""
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
                "max_total_chars": "{a} characters in all turns", "max_body_bytes": "a body of {a} bytes",
                "max_utterance_chars": "an utterance of {a} characters"}[self.name].format(a=self.actual)
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


class BodySizeLimit:
    def __init__(self, app, max_bytes: int = DEFAULT_MAX_BODY_BYTES):
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        self.app, self.max_bytes = app, max_bytes

    async def _reject(self, send) -> None:
        body = json.dumps(error_body("max_body_bytes", f"request body larger than {self.max_bytes} bytes "
                                                       f"(limit max_body_bytes={self.max_bytes})",
                                     {"name": "max_body_bytes", "value": self.max_bytes})).encode()
        await send({"type": "http.response.start", "status": 413,
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

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()   # after the body: wait for a disconnect, as the server would report it

        await self.app(scope, replay, send)


class RateLimiter:
    """Requests per tenant: a token bucket of `burst` requests refilled at `per_second`.

    Why per tenant: one tenant's batch job must not starve the others' assistants, and the API key is
    the only identity the service trusts. The buckets live in this process: with several API servers
    behind a balancer each enforces its own share (set the rate accordingly)."""

    def __init__(self, per_second: float, burst: Optional[int] = None, clock: Callable[[], float] = time.monotonic):
        if per_second <= 0:
            raise ValueError(f"per_second must be positive, got {per_second}")
        self.rate = float(per_second)
        self.burst = int(burst) if burst is not None else max(1, int(round(per_second)))
        if self.burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}   # tenant -> (tokens, last refill time)
        self._lock = threading.Lock()

    def take(self, tenant: str) -> Optional[float]:
        """None if the request may go ahead, else the seconds to wait before the next one will."""
        now = self._clock()
        with self._lock:
            tokens, last = self._buckets.get(tenant, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[tenant] = (tokens - 1.0, now)
                return None
            self._buckets[tenant] = (tokens, now)
            return (1.0 - tokens) / self.rate
