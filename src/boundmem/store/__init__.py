from .base import NotFoundError, OptedOutError, Store, StoreError, StoreTx, blocking_rule, unit
from .sqlite import SQLiteStore

__all__ = ["NotFoundError", "OptedOutError", "Store", "StoreError", "StoreTx", "blocking_rule", "unit", "SQLiteStore"]
