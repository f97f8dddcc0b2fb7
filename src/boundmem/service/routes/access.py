"""Access: user tokens minted and revoked with the tenant key, and what the presented credential is.

No `from __future__ import annotations`: FastAPI resolves the Annotated aliases at runtime."""

from datetime import datetime, timezone
from typing import Optional

from fastapi import APIRouter, Request

from ...api_models import RevokeOut, TokenOut, TokenRequest, WhoAmIOut
from ..deps import Tenant, Tokens, UserId, Who
from ..error_handlers import about_field

router = APIRouter(tags=["access"])


@router.post("/v1/users/{user}/tokens", response_model=TokenOut, status_code=201)
def mint_token(user: UserId, t: Tenant, tokens: Tokens, request: Request, body: Optional[TokenRequest] = None) -> TokenOut:
    """Mint a short-lived token for one user (tenant API key only). It can read, export, change and forget
    that user and nothing else, and cannot mint tokens. `page_url` opens the transparency page with it (in
    the URL fragment, which browsers never send to a server); the tenant key never goes into a URL."""
    with about_field("body", "ttl_seconds"):
        token, tok = tokens.mint(t, user, body.ttl_seconds if body else None)
    return TokenOut(user=user, token=token, expires_at=datetime.fromtimestamp(tok.expires_at, timezone.utc),
                    page_url=f"{str(request.base_url).rstrip('/')}/ui#token={token}")


@router.delete("/v1/users/{user}/tokens", response_model=RevokeOut)
def revoke_tokens(user: UserId, t: Tenant, tokens: Tokens) -> RevokeOut:
    """Revoke every token minted so far for this user (tenant API key only)."""
    tokens.revoke(t, user)
    return RevokeOut(user=user, revoked=True)


@router.get("/v1/whoami", response_model=WhoAmIOut)
def whoami(who: Who) -> WhoAmIOut:
    """What the presented credential is: the tenant key, or a user token (its user and expiry)."""
    exp = None if who.expires_at is None else datetime.fromtimestamp(who.expires_at, timezone.utc)
    return WhoAmIOut(kind="tenant" if who.user is None else "user", user=who.user, expires_at=exp)
