"""The one rule for user ids (and tenant names), used by the CLI, the HTTP API and the MCP server alike.

Why one rule, matched whole: a user id accepted by one surface but not by another is stored where the other can
never reach it (to show, export or forget it). `re.match` with `$` lets a trailing newline through ("alice\\n"),
so every check here is a `fullmatch` of a pattern without anchors.

A tenant's user is stored as `"{tenant}:{user}"`; ":" is in neither alphabet, so the two parts cannot be confused
and a caller cannot name another tenant's user.
"""
from __future__ import annotations

import functools
import inspect
import re
from typing import Any, Callable, Optional

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


# --- the names people who know mem0 type -----------------------------------------------------------------------------
_RECORD_ID = re.compile(r"[0-9a-f]{32}")        # preference, observation and episode ids: uuid4 hex
_RECORD_ARGS = ("preference_id", "observation_id", "episode_id")


def _looks_like_record_id(value: object) -> bool:
    return isinstance(value, str) and _RECORD_ID.fullmatch(value) is not None


def _check_not_swapped(qualname: str, bound: dict) -> None:
    """A record id given where the user belongs (`update(pid, "Vegan")`, mem0's order) would otherwise be read as a
    user and answer something misleading ("nothing to change", "not found"): refuse it, naming both arguments."""
    user = bound.get("user")
    for arg in _RECORD_ARGS:
        if arg in bound and _looks_like_record_id(user) and not _looks_like_record_id(bound[arg]):
            err = InvalidUserId(f"argument 'user' is {user!r}, which looks like a {arg[:-3]} id, and {arg!r} is "
                                f"{bound[arg]!r}, which does not: {qualname} takes the user first; name the user with "
                                f"user_id= to give the {arg[:-3]} id first")
            err.argument = "user"
            raise err


def _check_user(bound: dict, argument: str, optional: bool) -> None:
    """One user-id rule for every public method, checked before the method runs, so nothing is stored or looked up
    under an id the CLI would then refuse to list or forget. A missing user is left to Python's own error."""
    if argument in bound and not (optional and bound[argument] is None):
        check_store_user_id(bound[argument], argument)


def _with_user_id(func: Callable) -> Callable:
    sig = inspect.signature(func)
    optional = sig.parameters["user"].default is None    # `job(id, user=None)`: any user's, for the operator
    names = [n for n, p in sig.parameters.items() if n not in ("self", "user")
             and p.kind in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY)]

    def arguments(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if "user_id" not in kwargs:
            try:
                bound = sig.bind(self, *args, **kwargs).arguments
            except TypeError:
                bound = {}      # the call itself raises Python's own error, naming the argument
            _check_not_swapped(func.__qualname__, bound)
            _check_user(bound, "user", optional)
            return args, kwargs
        if "user" in kwargs:
            raise InputError(f"{func.__qualname__}: give user= or user_id= (the same argument), not both")
        if len(args) > len(names):
            raise TypeError(f"{func.__qualname__}() takes at most {len(names)} positional arguments besides the "
                            f"user ({len(args)} given)")
        twice = [n for n in names[:len(args)] if n in kwargs]
        if twice:
            raise TypeError(f"{func.__qualname__}() got multiple values for argument {twice[0]!r}")
        # the user is named, so every positional argument is one of the others, in order: `add(msgs, user_id=)`
        # on Memory and on the client (whose user comes first) mean the same
        _check_user(kwargs, "user_id", optional)
        named = {k: v for k, v in kwargs.items() if k != "user_id"}
        return (), {**named, **dict(zip(names, args)), "user": kwargs["user_id"]}

    if inspect.iscoroutinefunction(func):
        @functools.wraps(func)
        async def call(self, *args: Any, **kwargs: Any) -> Any:
            args, kwargs = arguments(self, args, kwargs)
            return await func(self, *args, **kwargs)
    else:
        @functools.wraps(func)
        def call(self, *args: Any, **kwargs: Any) -> Any:
            args, kwargs = arguments(self, args, kwargs)
            return func(self, *args, **kwargs)

    call.accepts_user_id = True   # type: ignore[attr-defined]
    return call


def accepts_user_id(cls: type) -> type:
    """Class decorator: every public method with a `user` parameter (the class's own and inherited ones) also takes
    it as `user_id=`, mem0's name, and then reads its positional arguments as the others in order; without
    `user_id=`, a record id in the user's place is an InvalidUserId naming it (`_check_not_swapped`)."""
    for name in dir(cls):
        func = getattr(cls, name)
        if (name.startswith("_") or not inspect.isfunction(func) or getattr(func, "accepts_user_id", False)
                or "user" not in inspect.signature(func).parameters):
            continue
        setattr(cls, name, _with_user_id(func))
    return cls
