"""The HTTP access log without user ids.

Why: every API path names a user (`/v1/users/alice/...`), so a plain access log keeps user ids after the users
were forgotten. The server's log shows a pseudonym instead: an HMAC of the id under a key that lives only in this
process, so one run's lines of a user can still be followed, but nothing in the log names the user or can be
matched to one later (the key is gone with the process).
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
from urllib.parse import unquote

_USER_IN_PATH = re.compile(r"(/v1/users/)([^/?#]+)")


class PseudonymousAccessLog(logging.Filter):
    """Rewrites the path of uvicorn access-log records: `/v1/users/<id>` -> `/v1/users/u-<12 hex>`."""

    def __init__(self, key: bytes | None = None):
        super().__init__()
        self._key = key or os.urandom(32)

    def pseudonym(self, user: str) -> str:
        return "u-" + hmac.new(self._key, user.encode("utf-8"), hashlib.sha256).hexdigest()[:12]

    def redact(self, path: str) -> str:
        return _USER_IN_PATH.sub(lambda m: m.group(1) + self.pseudonym(unquote(m.group(2))), path)

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):   # uvicorn's access record
            record.args = (args[0], args[1], self.redact(args[2]), args[3], args[4])
        return True


def install(logger_name: str = "uvicorn.access") -> PseudonymousAccessLog:
    f = PseudonymousAccessLog()
    logging.getLogger(logger_name).addFilter(f)
    return f
