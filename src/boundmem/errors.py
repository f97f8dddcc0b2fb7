"""One exception root for everything boundmem raises on purpose, with a branch per kind of cause.

Callers catch `BoundmemError` (or one branch) instead of a list of module-specific classes; the HTTP service maps
each branch to one status code and the CLI to one exit code, so a new concrete error needs no new handler. The
concrete classes live beside the code that raises them and inherit from one branch here.

`code` is the machine-readable name an API client sees (the JSON error's `code`); a concrete class overrides it only
when a client must tell it apart from its branch (a busy store, another embedder's store, which upstream failed)."""
from __future__ import annotations

from typing import ClassVar, Optional


class BoundmemError(Exception):
    """Root of every error boundmem raises deliberately."""

    code: ClassVar[str] = "internal_error"


class InputError(BoundmemError, ValueError):
    """The caller's input is invalid (a field, a file line, a user id, an unknown category); nothing was changed.
    ValueError too, so code written against the standard library still catches it."""

    code: ClassVar[str] = "invalid_request"


class LimitError(InputError):
    """The input is valid in form but over a configured limit (size, count, rate)."""

    code: ClassVar[str] = "too_large"


class NotFoundError(BoundmemError, KeyError):
    """What the caller named does not exist (a user, a preference, a job, a thought). A KeyError (so a LookupError)
    because every not-found type it replaces was one, and callers catch it as such."""

    code: ClassVar[str] = "not_found"

    def __str__(self) -> str:  # KeyError quotes its message; ours is a sentence
        return str(self.args[0]) if self.args else "not found"


class ConflictError(BoundmemError):
    """The request contradicts what is stored (another embedding dimension, a duplicate, an opted-out category)."""

    code: ClassVar[str] = "conflict"


class UpstreamError(BoundmemError):
    """A service boundmem depends on failed: the LLM endpoint or the embedding endpoint/model."""

    code: ClassVar[str] = "upstream_failed"
    upstream: ClassVar[str] = "a service boundmem depends on"   # what failed, in words a client may see (no address)
    status: Optional[int] = None   # the upstream's HTTP status, when it answered with one


class StoreError(BoundmemError):
    """The store could not do what was asked (busy, unreachable, corrupt)."""

    code: ClassVar[str] = "store_error"


class ConfigError(BoundmemError, ValueError):
    """A setting (environment variable, option, file) is invalid; names the setting."""

    code: ClassVar[str] = "config_error"


# The command line's exit status per branch (0 ok; 1 a check that failed, e.g. a broken audit chain; unknown
# exceptions keep their traceback). Input, settings, names that do not exist and conflicts are all "fix the command
# line" (2, as click's own usage errors); 3 is left unused because the CLI has always said 2 for an unknown user.
EXIT_CODES: dict[type[BoundmemError], int] = {InputError: 2, ConfigError: 2, NotFoundError: 2, ConflictError: 2,
                                              UpstreamError: 4, StoreError: 5}


def exit_code(exc: BoundmemError) -> int:
    """The exit status for `exc`: that of the first branch in its MRO (so an EmbeddingDimensionError, a conflict
    and a store error, is a conflict), 1 for an error under the root only."""
    return next((EXIT_CODES[c] for c in type(exc).__mro__ if c in EXIT_CODES), 1)


__all__ = ["BoundmemError", "InputError", "LimitError", "NotFoundError", "ConflictError", "UpstreamError",
           "StoreError", "ConfigError", "EXIT_CODES", "exit_code"]
