"""One row per user holding everything a recall reads of that user's preferences: the PostgreSQL search path.

Why: `preferences` is a heap table, and a heap keeps rows in the order they arrived. A user states preferences
over weeks, so in a fleet their ten rows sit on ten pages far apart, and a search reads one page per preference;
once the table outgrows memory every one of those is a cache miss (a manual CLUSTER puts them back together, until
the next writes scatter them again). Here each write transaction of a user ends by rewriting that user's block: the
user's rows, in recall order, as parallel arrays in one row of `preference_blocks`. A row larger than ~2 KB is
moved out of line into the table's TOAST relation, whose chunks of one value are written one after the other, so
a search reads the primary key's path to one row and a few adjacent pages, however many users the table holds and
in whatever order they wrote. The cost is paid on writes (the user's rows are read and the block written again:
tens to hundreds of rows of one user, under the lock the transaction already holds) and on disk (the block
repeats what `preferences` holds).

`preferences` stays the table of record: every other read, the audit chain and erasure work on it, and the block is
rebuilt from it in the same transaction, so the two never disagree. Blocks are derived data: a database without
them (made before, or filled by bulk SQL) gets them from `rebuild_blocks`.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

# (block column, preferences column): the order of the search's result columns follows the store's row layout
_FIELDS = (("ids", "id"), ("mains", "main"), ("subs", "sub"), ("details", "detail"), ("attributes", "attribute"),
           ("sentences", "sentence"), ("conversation_ids", "conversation_id"), ("created_ats", "created_at"),
           ("updated_ats", "updated_at"), ("polarities", "polarity"), ("seqs", "seq"), ("embeddings", "embedding"))
_TYPES = {"created_ats": "timestamptz[]", "updated_ats": "timestamptz[]", "seqs": "bigint[]",
          "embeddings": "vector[]"}

BLOCKS_DDL = [
    "CREATE TABLE IF NOT EXISTS preference_blocks (user_id text PRIMARY KEY, "
    + ", ".join(f"{b} {_TYPES.get(b, 'text[]')} NOT NULL" for b, _ in _FIELDS) + ")",
    # random floats do not compress: skip the attempt, store the vectors out of line as they are
    "ALTER TABLE preference_blocks ALTER COLUMN embeddings SET STORAGE EXTERNAL",
]

_BLOCK_COLS = ", ".join(b for b, _ in _FIELDS)
_AGGREGATES = ", ".join(f"array_agg({c} ORDER BY created_at, seq)" for _, c in _FIELDS)
_REBUILD = (f"INSERT INTO preference_blocks(user_id, {_BLOCK_COLS}) SELECT user_id, {_AGGREGATES} "
            "FROM preferences {where} GROUP BY user_id")
_UNNEST = (f"preference_blocks b CROSS JOIN LATERAL unnest({', '.join('b.' + b for b, _ in _FIELDS)}) "
           f"AS x({', '.join(c for _, c in _FIELDS)})")
# the same columns, in the same order, as PostgresStore's _COLS, then the distance
SEARCH_FROM = ("SELECT x.id, b.user_id, x.main, x.sub, x.detail, x.attribute, x.sentence, x.conversation_id, "
               f"x.created_at, x.updated_at, x.polarity, x.embedding <#> %s AS d FROM {_UNNEST}")


def refresh_block(con: Any, user: str) -> None:
    """Rewrite `user`'s block from their rows in `preferences` (none left: no block), inside the caller's transaction."""
    con.execute("DELETE FROM preference_blocks WHERE user_id = %s", (user,))
    con.execute(_REBUILD.format(where="WHERE user_id = %s"), (user,))


def rebuild_blocks(con: Any, users: Optional[Sequence[str]] = None) -> None:
    """Rebuild the blocks of `users` (default: every user) from `preferences`."""
    if users is None:
        con.execute("DELETE FROM preference_blocks")
        con.execute(_REBUILD.format(where=""))
        return
    con.execute("DELETE FROM preference_blocks WHERE user_id = ANY(%s)", (list(users),))
    con.execute(_REBUILD.format(where="WHERE user_id = ANY(%s)"), (list(users),))
