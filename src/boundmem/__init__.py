"""boundmem: long-term memory for LLM assistants that keeps only what the user agreed to, shows it, and forgets it."""
from .errors import (BoundmemError, ConfigError, ConflictError, InputError, LimitError, NotFoundError, StoreError,
                     UpstreamError)
from .config import Settings
from .embed.base import Embedder
from .extract.base import Extraction, Extractor
from .maintain.base import Maintainer, Reconciliation
from .memory import Memory, build_memory
from .async_memory import AsyncMemory
from .store.base import Store
from .models import AuditEntry, Candidate, Conversation, Decision, IngestResult, Preference, RecallHit, Turn, UserExport
from .schema import CategoryPath, Schema, builtin_schema, load_schema

__version__ = "0.1.0"
__all__ = ["Memory", "AsyncMemory", "build_memory", "Settings", "Embedder", "Extractor", "Extraction", "Maintainer", "Reconciliation",
           "Store", "AuditEntry", "Candidate", "Conversation", "Decision", "IngestResult", "Preference", "RecallHit",
           "Turn", "UserExport", "CategoryPath", "Schema", "builtin_schema", "load_schema", "Client", "AsyncClient",
           "BoundmemError", "InputError", "LimitError", "NotFoundError", "ConflictError", "UpstreamError", "StoreError",
           "ConfigError"]


def __getattr__(name: str):
    """`boundmem.Client` / `AsyncClient` are imported on first use (they need httpx: `pip install 'boundmem[client]'`)."""
    if name in ("Client", "AsyncClient"):
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module 'boundmem' has no attribute {name!r}")
