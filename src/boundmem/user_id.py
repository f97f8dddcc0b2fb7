"""The one rule for user ids (and tenant names), used by the CLI, the HTTP API and the MCP server alike.

Why one rule, matched whole: a user id accepted by one surface but not by another is stored where the other can
never reach it (to show, export or forget it). `re.match` with `$` lets a trailing newline through ("alice\\n"),
so every check here is a `fullmatch` of a pattern without anchors.

A tenant's user is stored as `"{tenant}:{user}"`; ":" is in neither alphabet, so the two parts cannot be confused
and a caller cannot name another tenant's user.
"""
from __future__ import annotations

import re
from typing import Optional

from .errors import InputError


USER_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,127}"
TENANT_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
SEP = ":"
_USER_RE = re.compile(USER_ID_PATTERN)
_TENANT_RE = re.compile(TENANT_PATTERN)
RULE = "1-128 characters: letters, digits and _ . @ + - (not first), nothing else (no ':', no spaces or newlines)"


class InvalidUserId(InputError):
    """A user id (or tenant name) that breaks the rule; the message names the value and the rule (and the argument,
    `argument`, when a public method's argument was checked)."""

    argument: str = "user"


def valid_user_id(user: object) -> bool:
    return isinstance(user, str) and _USER_RE.fullmatch(user) is not None


def valid_tenant(tenant: object) -> bool:
    return isinstance(tenant, str) and _TENANT_RE.fullmatch(tenant) is not None


def check_user_id(user: object) -> str:
    """`user` if it follows the rule, else InvalidUserId."""
    if not valid_user_id(user):
        raise InvalidUserId(f"invalid user id {user!r}: {RULE}")
    return user  # type: ignore[return-value]


def check_tenant(tenant: object) -> str:
    if not valid_tenant(tenant):
        raise InvalidUserId(f"invalid tenant {tenant!r}: must match {TENANT_PATTERN} in full")
    return tenant  # type: ignore[return-value]


def namespaced(tenant: str, user: str) -> str:
    """The store's user id for a tenant's user. Raises InvalidUserId if either part could escape its namespace."""
    return f"{check_tenant(tenant)}{SEP}{check_user_id(user)}"


def check_store_user_id(user: object, argument: Optional[str] = None) -> str:
    """A user id as the operator's CLI and the library name it: `user`, or `tenant:user` for a user of a tenant of
    the HTTP API or an MCP server. Each part must follow its rule in full. With `argument` (a public method's
    parameter), the error names it: one rule for every surface, refused before anything is stored."""
    try:
        if isinstance(user, str) and SEP in user:
            tenant, _, rest = user.partition(SEP)
            if valid_tenant(tenant) and valid_user_id(rest):
                return user
            raise InvalidUserId(f"invalid user id {user!r}: expected USER or TENANT:USER, the user part {RULE}")
        return check_user_id(user)
    except InvalidUserId as e:
        if argument is None:
            raise
        err = InvalidUserId(f"argument {argument!r}: {e}")
        err.argument = argument
        raise err from None
