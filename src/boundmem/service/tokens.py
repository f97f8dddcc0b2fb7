"""Per-user access tokens: what an end user (the transparency page) or an agent (an MCP server) holds instead of the
tenant's key.

Why: the tenant key reads and erases every user of the tenant; a link or an agent that carries it lets one user (or
a prompt injection) reach all the others. A token names one tenant and one user, expires, and is signed by the
server, so a holder can only act on that user and cannot mint more tokens.

Format: `bmu1.<payload>.<signature>`, both base64url; the payload is JSON `{"t": tenant, "u": user, "g": generation,
"iat": issued, "exp": expiry}` (Unix seconds), the signature HMAC-SHA256 of `bmu1.<payload>` under the server
secret. Revocation: the service keeps a generation counter per (tenant, user); revoking bumps it and every token
minted before is refused. The counters live in a small SQLite file when one is given (`--token-state`), so they
survive restarts and are shared by the API servers and MCP servers that use the same file and secret; otherwise in
this process's memory (which is enough when the secret is random per process too: a restart voids all tokens).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ..errors import ConfigError, InputError
from ..store.sqlite_connect import MEMORY, connect
from ..user_id import InvalidUserId, check_tenant, check_user_id

PREFIX = "bmu1"
DEFAULT_TTL = 15 * 60
MAX_TTL = 24 * 3600
MIN_SECRET_BYTES = 32


class TokenError(InputError):
    """A token that is malformed, forged, expired or revoked; the message says which (never the secret)."""


@dataclass(frozen=True)
class UserToken:
    tenant: str
    user: str
    generation: int
    issued_at: int
    expires_at: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def looks_like_token(credential: str) -> bool:
    return credential.startswith(PREFIX + ".")


def load_secret(path: str | Path) -> bytes:
    """A secret file: at least 32 bytes (raw or text; surrounding whitespace is dropped)."""
    p = Path(path)
    try:
        data = p.read_bytes().strip()
    except OSError as e:
        raise ConfigError(f"{p}: cannot read token secret ({e.strerror})") from e
    if len(data) < MIN_SECRET_BYTES:
        raise ConfigError(f"{p}: a token secret must be at least {MIN_SECRET_BYTES} bytes, got {len(data)}")
    return data


class Generations:
    """Per-(tenant, user) token generation counters; in memory or in a SQLite file of their own."""

    def __init__(self, path: str | Path | None = None):
        self._lock = threading.Lock()
        # durable: a revocation lost to a power cut would bring the revoked tokens back
        self._con = connect(path or MEMORY, timeout=5.0, durable=True)
        self._con.execute("CREATE TABLE IF NOT EXISTS token_generation (tenant TEXT NOT NULL, user TEXT NOT NULL, "
                          "generation INTEGER NOT NULL, PRIMARY KEY (tenant, user))")

    def current(self, tenant: str, user: str) -> int:
        with self._lock:
            row = self._con.execute("SELECT generation FROM token_generation WHERE tenant = ? AND user = ?",
                                    (tenant, user)).fetchone()
        return row[0] if row else 0

    def bump(self, tenant: str, user: str) -> int:
        with self._lock:
            self._con.execute("INSERT INTO token_generation VALUES (?, ?, 1) ON CONFLICT (tenant, user) "
                              "DO UPDATE SET generation = generation + 1", (tenant, user))
            return self._con.execute("SELECT generation FROM token_generation WHERE tenant = ? AND user = ?",
                                     (tenant, user)).fetchone()[0]

    def close(self) -> None:
        self._con.close()


class TokenIssuer:
    """Mints and verifies user tokens with one server secret."""

    def __init__(self, secret: Optional[bytes] = None, generations: Optional[Generations] = None,
                 default_ttl: int = DEFAULT_TTL, max_ttl: int = MAX_TTL, clock: Callable[[], float] = time.time):
        if secret is None:
            secret = os.urandom(MIN_SECRET_BYTES)
        if len(secret) < MIN_SECRET_BYTES:
            raise ConfigError(f"a token secret must be at least {MIN_SECRET_BYTES} bytes")
        if not 1 <= default_ttl <= max_ttl:
            raise ConfigError(f"token lifetimes must satisfy 1 <= default ({default_ttl}) <= max ({max_ttl})")
        self._secret = secret
        self.generations = generations or Generations()
        self.default_ttl, self.max_ttl, self._clock = default_ttl, max_ttl, clock

    def _sign(self, body: str) -> str:
        return _b64(hmac.new(self._secret, body.encode("ascii"), hashlib.sha256).digest())

    def mint(self, tenant: str, user: str, ttl: Optional[int] = None) -> tuple[str, UserToken]:
        ttl = self.default_ttl if ttl is None else int(ttl)
        if not 1 <= ttl <= self.max_ttl:
            raise InputError(f"token lifetime must be 1..{self.max_ttl} s, got {ttl}")
        now = int(self._clock())
        tok = UserToken(check_tenant(tenant), check_user_id(user), self.generations.current(tenant, user), now, now + ttl)
        payload = json.dumps({"t": tok.tenant, "u": tok.user, "g": tok.generation, "iat": tok.issued_at,
                              "exp": tok.expires_at}, separators=(",", ":")).encode()
        body = f"{PREFIX}.{_b64(payload)}"
        return f"{body}.{self._sign(body)}", tok

    def verify(self, token: str) -> UserToken:
        parts = token.split(".")
        if not token.isascii() or len(parts) != 3 or parts[0] != PREFIX:
            raise TokenError("not a boundmem user token")
        body = f"{parts[0]}.{parts[1]}"
        if not hmac.compare_digest(self._sign(body), parts[2]):
            raise TokenError("token signature does not verify (forged, altered, or signed with another secret)")
        try:
            d = json.loads(_unb64(parts[1]))
            tok = UserToken(check_tenant(d["t"]), check_user_id(d["u"]), int(d["g"]), int(d["iat"]), int(d["exp"]))
        except (ValueError, KeyError, TypeError, InvalidUserId) as e:
            raise TokenError("token payload is malformed") from e
        if self._clock() >= tok.expires_at:
            raise TokenError("token has expired")
        if tok.generation < self.generations.current(tok.tenant, tok.user):
            raise TokenError("token has been revoked")
        return tok

    def revoke(self, tenant: str, user: str) -> int:
        """Void every token minted so far for this user; returns the new generation."""
        return self.generations.bump(check_tenant(tenant), check_user_id(user))
