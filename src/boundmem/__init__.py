"""boundmem: long-term memory for LLM assistants that keeps only what the user agreed to, shows it, and forgets it."""
from .errors import (BoundmemError, ConfigError, ConflictError, InputError, LimitError, NotFoundError, StoreError,
                     UpstreamError)
from .memory import Memory
from .models import AuditEntry, Candidate, Conversation, Decision, IngestResult, Preference, RecallHit, Turn, UserExport
from .schema import CategoryPath, Schema, builtin_schema, load_schema

__version__ = "0.1.0"
__all__ = ["Memory", "AuditEntry", "Candidate", "Conversation", "Decision", "IngestResult", "Preference", "RecallHit",
           "Turn", "UserExport", "CategoryPath", "Schema", "builtin_schema", "load_schema", "Client", "AsyncClient",
           "BoundmemError", "InputError", "LimitError", "NotFoundError", "ConflictError", "UpstreamError", "StoreError",
           "ConfigError"]


def __getattr__(name: str):
    """`boundmem.Client` / `AsyncClient` are imported on first use (they need httpx: `pip install 'boundmem[client]'`)."""
    if name in ("Client", "AsyncClient"):
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module 'boundmem' has no attribute {name!r}")
