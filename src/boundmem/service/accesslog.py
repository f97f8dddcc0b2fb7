"""The server's logs without user ids or credentials: the HTTP access log and the error log.

Why: every API path names a user (`/v1/users/alice/...`) and error messages name the store's id ('acme:alice'), so
plain logs keep user ids after the users were forgotten. The server's logs show a pseudonym instead: an HMAC of the
id under a key that lives only in this process, the same in the access and the error log, so one run's lines of a
user can still be followed, but nothing in the log names the user or can be matched to one later (the key is gone
with the process). A credential sent in the query string (refused by the server) is cut out too.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
from urllib.parse import unquote

from ..user_id import TENANT_PATTERN, USER_ID_PATTERN

_USER_IN_PATH = re.compile(r"(/v1/users/)([^/?#]+)")
# a credential sent in the query string (refused, but it is still a secret): its value never reaches the log
# a store id as messages write it: 'tenant:user' (repr), in any message of any logger
_STORE_ID = re.compile(rf"""(['"])({TENANT_PATTERN}):({USER_ID_PATTERN})\1""")
_SECRET_IN_QUERY = re.compile(r"([?&](?:[^=&#]*(?:key|token|secret|auth|password|bearer)[^=&#]*)=)[^&#]*", re.I)


class PseudonymousAccessLog(logging.Filter):
    """Rewrites the path of uvicorn access-log records: `/v1/users/<id>` -> `/v1/users/u-<12 hex>`."""

    def __init__(self, key: bytes | None = None):
        super().__init__()
        self._key = key or os.urandom(32)

    def pseudonym(self, user: str) -> str:
        return "u-" + hmac.new(self._key, user.encode("utf-8"), hashlib.sha256).hexdigest()[:12]

    def redact(self, path: str) -> str:
        path = _SECRET_IN_QUERY.sub(r"\1[redacted]", path)
        return _USER_IN_PATH.sub(lambda m: m.group(1) + self.pseudonym(unquote(m.group(2))), path)

    def redact_text(self, text: str) -> str:
        """Any log text: user paths and quoted store ids ('acme:alice' -> 'acme:u-...') pseudonymised."""
        text = self.redact(text)
        return _STORE_ID.sub(lambda m: f"{m.group(1)}{m.group(2)}:{self.pseudonym(m.group(3))}{m.group(1)}", text)

    def redact_record(self, record: logging.LogRecord) -> None:
        """The record's message and traceback as redacted text (the traceback formatted now, so a handler's
        formatter uses the redacted one)."""
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logging's business, not ours
            return
        record.msg, record.args = self.redact_text(message), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = self.redact_text(logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = self.redact_text(record.stack_info)

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):   # uvicorn's access record
            record.args = (args[0], args[1], self.redact(args[2]), args[3], args[4])
        return True


def install(logger_name: str = "uvicorn.access") -> PseudonymousAccessLog:
    """For a server process: the access log's paths, and every other record of the process (boundmem's own,
    uvicorn's errors with their tracebacks, libraries'), pseudonymised with one key. Every record: a filter on a
    logger would miss the records its children propagate, and boundmem's loggers have no handler of their own."""
    global _installed
    if _installed is not None:   # once per process (a second server in it shares the key)
        logging.getLogger(logger_name).addFilter(_installed)
        return _installed
    f = _installed = PseudonymousAccessLog()
    logging.getLogger(logger_name).addFilter(f)
    previous = logging.getLogRecordFactory()

    def factory(*args, **kwargs) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if record.name != logger_name:   # the access log's own records: its filter rewrites the path argument
            f.redact_record(record)
        return record

    def uninstall() -> None:
        global _installed
        logging.getLogger(logger_name).removeFilter(f)
        logging.setLogRecordFactory(previous)
        _installed = None

    logging.setLogRecordFactory(factory)
    f.uninstall = uninstall   # type: ignore[attr-defined]
    return f


_installed: "PseudonymousAccessLog | None" = None
