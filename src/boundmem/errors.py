"""One exception root for everything boundmem raises on purpose, with a branch per kind of cause.

Callers catch `BoundmemError` (or one branch) instead of a list of module-specific classes; the HTTP service maps
each branch to one status code and the CLI to one exit code, so a new concrete error needs no new handler. The
concrete classes live beside the code that raises them and inherit from one branch here."""
from __future__ import annotations


class BoundmemError(Exception):
    """Root of every error boundmem raises deliberately."""


class InputError(BoundmemError, ValueError):
    """The caller's input is invalid (a field, a file line, a user id, an unknown category); nothing was changed.
    ValueError too, so code written against the standard library still catches it."""


class LimitError(InputError):
    """The input is valid in form but over a configured limit (size, count, rate)."""


class NotFoundError(BoundmemError, KeyError):
    """What the caller named does not exist (a user, a preference, a job, a thought). A KeyError (so a LookupError)
    because every not-found type it replaces was one, and callers catch it as such."""

    def __str__(self) -> str:  # KeyError quotes its message; ours is a sentence
        return str(self.args[0]) if self.args else "not found"


class ConflictError(BoundmemError):
    """The request contradicts what is stored (another embedding dimension, a duplicate, an opted-out category)."""


class UpstreamError(BoundmemError):
    """A service boundmem depends on failed: the LLM endpoint or the embedding endpoint/model."""


class StoreError(BoundmemError):
    """The store could not do what was asked (busy, unreachable, corrupt)."""


class ConfigError(BoundmemError, ValueError):
    """A setting (environment variable, option, file) is invalid; names the setting."""


__all__ = ["BoundmemError", "InputError", "LimitError", "NotFoundError", "ConflictError", "UpstreamError",
           "StoreError", "ConfigError"]
