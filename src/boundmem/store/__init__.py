from .base import AuditCheck, EmbeddingDimensionError, OptedOutError, Store, StoreBusy, StoreTx, blocking_rule, unit
from .sqlite import SQLiteStore

__all__ = ["AuditCheck", "EmbeddingDimensionError", "OptedOutError", "Store", "StoreBusy", "StoreTx", "blocking_rule", "unit", "SQLiteStore"]
