from .base import (AuditCheck, EmbeddingDimensionError, NotFoundError, OptedOutError, Store, StoreBusy, StoreError,
                   StoreTx, blocking_rule, opt_out_prefix, unit)
from .sqlite import SQLiteStore

__all__ = ["AuditCheck", "EmbeddingDimensionError", "NotFoundError", "OptedOutError", "Store", "StoreBusy", "StoreError",
           "StoreTx", "blocking_rule", "opt_out_prefix", "unit", "SQLiteStore"]
