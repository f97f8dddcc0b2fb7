"""Per-tenant API keys and the tenant namespace of user ids.

Every stored user id is `"{tenant}:{user}"`, built only here. The user part is checked
against a charset without ":" so a caller cannot name another tenant's user; the tenant
part comes from the key, never from the request. That makes cross-tenant reads
impossible by construction rather than by a check each endpoint must remember.

Keys are held as SHA-256 digests (a keys file may already contain `sha256:<hex>` entries),
so a leaked keys file or memory dump of the server does not hand out working keys.
"""
from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Iterable, Mapping, Optional

from ..errors import ConfigError
from ..user_id import TENANT_PATTERN, valid_tenant
from .tokens import PREFIX as TOKEN_PREFIX

__all__ = ["KeyRing", "KeysFileError"]
MIN_KEY_LENGTH = 16


class KeysFileError(ConfigError):
    """The keys file is missing or malformed; the message names the file and the problem."""


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class KeyRing:
    """Maps a presented bearer key to its tenant.

    The same key twice (twice raw, or raw and as its `sha256:` digest) is an error naming both entries: silently
    keeping the last one would hand one tenant's key to another."""

    def __init__(self, keys: Mapping[str, str] | Iterable[tuple[str, str]]):
        self._by_digest: dict[str, str] = {}
        seen: dict[str, str] = {}   # digest -> how the entry that gave it is named in errors
        pairs = list(keys.items()) if isinstance(keys, Mapping) else list(keys)
        for n, (key, tenant) in enumerate(pairs, 1):
            if not valid_tenant(tenant):
                raise KeysFileError(f"tenant {tenant!r} (for a key) must match {TENANT_PATTERN}")
            if not isinstance(key, str):
                raise KeysFileError(f"key for tenant {tenant!r} must be a string")
            if key.startswith("sha256:"):
                digest = key.removeprefix("sha256:").lower()
                if not re.fullmatch(r"[0-9a-f]{64}", digest):
                    raise KeysFileError(f"key for tenant {tenant!r}: 'sha256:' must be followed by 64 hex digits")
                name = f"entry {n} ('sha256:{digest[:12]}...' for tenant {tenant!r})"
            else:
                if len(key) < MIN_KEY_LENGTH:
                    raise KeysFileError(f"key for tenant {tenant!r} is shorter than {MIN_KEY_LENGTH} characters")
                if not key.isascii() or not key.isprintable() or any(c.isspace() for c in key):
                    # a header value loses surrounding spaces and cannot carry control or non-ASCII characters:
                    # such a key could never be sent, so it is a typo in the file
                    raise KeysFileError(f"key for tenant {tenant!r} (entry {n}) contains whitespace, control or "
                                        "non-ASCII characters, so no client could send it")
                if key.startswith(TOKEN_PREFIX + "."):
                    raise KeysFileError(f"key for tenant {tenant!r} (entry {n}) looks like a user token ('{TOKEN_PREFIX}."
                                        "...'): every credential of that shape is checked as a token, so it could "
                                        "never authenticate as a key; use another key")
                digest = _digest(key)
                name = f"entry {n} (a raw key for tenant {tenant!r})"
            if digest in seen:
                raise KeysFileError(f"the same API key is given twice: {seen[digest]} and {name}; "
                                    "each key must belong to exactly one tenant")
            seen[digest] = name
            self._by_digest[digest] = tenant
        if not self._by_digest:
            raise KeysFileError("no API keys configured")

    def tenant(self, key: Optional[str]) -> Optional[str]:
        if not key:
            return None
        return self._by_digest.get(_digest(key))

    @property
    def tenants(self) -> set[str]:
        return set(self._by_digest.values())

    @classmethod
    def load(cls, path: str | Path) -> "KeyRing":
        """Read a keys file: JSON or TOML, either flat `{key: tenant}` or under a `keys` table (not both)."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise KeysFileError(f"{p}: cannot read keys file ({e.strerror})") from e
        is_json = p.suffix.lower() == ".json"
        try:
            data = json.loads(text, object_pairs_hook=_pairs) if is_json else tomllib.loads(text)
        except _DuplicateJsonKey as e:
            raise KeysFileError(f"{p}: {e}") from e
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
            fmt = "JSON" if is_json else "TOML"
            dup = None if is_json else _toml_duplicate(text)
            raise KeysFileError(f"{p}: {dup or f'not valid {fmt}: {e}'}") from e
        if isinstance(data, dict) and isinstance(data.get("keys"), dict):
            rest = [k for k in data if k != "keys"]
            if rest:
                raise KeysFileError(f"{p}: keys both under [keys] and at the top level ({len(rest)} of them); "
                                    "put them all in one place")
            data = data["keys"]
        if not isinstance(data, dict):
            raise KeysFileError(f"{p}: expected a mapping of key -> tenant")
        try:
            return cls(data)
        except KeysFileError as e:
            raise KeysFileError(f"{p}: {e}") from e


class _DuplicateJsonKey(ValueError):
    pass


def _pairs(pairs: list[tuple[str, object]]) -> dict:
    """json.loads keeps the last of two equal keys; a keys file must not."""
    out: dict = {}
    at: dict[str, int] = {}
    for n, (k, v) in enumerate(pairs, 1):
        if k in out:
            raise _DuplicateJsonKey(f"the same API key is given twice: entry {at[k]} (tenant {out[k]!r}) and entry {n} "
                                    f"(tenant {v!r}); each key must belong to exactly one tenant")
        out[k], at[k] = v, n
    return out


_TOML_ENTRY = re.compile(r"""\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)\s*=\s*(.*?)\s*(?:#.*)?""")


def _toml_duplicate(text: str) -> Optional[str]:
    """tomllib refuses a key defined twice but names only the second line; name both entries."""
    first: dict[tuple[str, str], tuple[int, str]] = {}
    table = ""
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s.startswith("["):
            table = s
            continue
        m = _TOML_ENTRY.fullmatch(line)
        if not m:
            continue
        key = m.group(1).strip("'\"") if m.group(1)[0] in "'\"" else m.group(1)
        if (table, key) in first:
            n0, t0 = first[(table, key)]
            return (f"the same API key is given twice: line {n0} (tenant {t0}) and line {n} (tenant {m.group(2)}); "
                    "each key must belong to exactly one tenant")
        first[(table, key)] = (n, m.group(2))
    return None
