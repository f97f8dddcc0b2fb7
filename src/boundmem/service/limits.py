"""Request limits for the API: body size, and requests per tenant.

Why: one conversation is a few kilobytes; a client that posts megabytes (by mistake or on purpose) would
otherwise be read into memory, parsed and embedded turn by turn while other users wait. The limit is checked
against Content-Length before anything is read, and against the bytes actually received for chunked
bodies, so a lying or missing Content-Length does not get past it. At most `max_bytes` are buffered.
"""
from __future__ import annotations

import json
import threading
import time
from typing import Callable, Optional

DEFAULT_MAX_BODY_BYTES = 1_000_000


class BodySizeLimit:
    def __init__(self, app, max_bytes: int = DEFAULT_MAX_BODY_BYTES):
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        self.app, self.max_bytes = app, max_bytes

    async def _reject(self, send) -> None:
        body = json.dumps({"detail": f"request body larger than {self.max_bytes} bytes",
                           "message": f"request body larger than {self.max_bytes} bytes"}).encode()
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
