"""The one way boundmem opens a SQLite file: the store, the job queue (through the store), CAIM's file and the token
generations all come through `connect`, so what holds for one holds for each.

- autocommit (`isolation_level=None`): every transaction is an explicit BEGIN [IMMEDIATE] ... COMMIT of ours, never
  one the driver opens behind our back and leaves holding a lock;
- `check_same_thread=False`: the callers serialise use themselves (a connection per thread, or one under a lock);
- WAL on a file (readers do not block the writer); `synchronous=NORMAL` under WAL loses no committed transaction
  to a killed process, a power cut may roll back the last few (`durable=True`: FULL, for a record whose loss is a
  security fault, e.g. a token revocation);
- `secure_delete=ON`: erased content is zeroed in the file, not only freed (with `truncate_wal_nowait` and the
  callers' WAL wipe after an erasure, no byte of it stays on disk);
- `foreign_keys=ON`: SQLite enforces declared foreign keys only when asked.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Union

MEMORY = ":memory:"


def connect(path: Union[str, Path], timeout: float = 5.0, durable: bool = False) -> sqlite3.Connection:
    """A connection to a SQLite file (or ":memory:") with boundmem's settings; `timeout`: how long a write waits
    for another connection's lock before SQLite answers 'database is locked'."""
    p = str(path)
    con = sqlite3.connect(p, timeout=timeout, isolation_level=None, check_same_thread=False)
    if p != MEMORY:
        con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
    con.execute("PRAGMA foreign_keys=ON")
    con.execute("PRAGMA secure_delete=ON")
    return con


def truncate_wal_nowait(con: sqlite3.Connection) -> bool:
    """Checkpoint the WAL into the file and truncate it, if nobody is using it right now (no waiting). On opening a
    file this closes the window left by a crash between an erasure's commit and its WAL wipe."""
    timeout = con.execute("PRAGMA busy_timeout").fetchone()[0]
    con.execute("PRAGMA busy_timeout=0")
    try:
        return not con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    except sqlite3.OperationalError:
        return False
    finally:
        con.execute(f"PRAGMA busy_timeout={int(timeout)}")
