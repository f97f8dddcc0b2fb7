from .base import (AuditCheck, EmbeddingDimensionError, NotFoundError, OptedOutError, Store, StoreBusy, StoreError,
                   StoreTx, blocking_rule, unit)
from .sqlite import SQLiteStore

__all__ = ["AuditCheck", "EmbeddingDimensionError", "NotFoundError", "OptedOutError", "Store", "StoreBusy", "StoreError",
           "StoreTx", "blocking_rule", "unit", "SQLiteStore"]
