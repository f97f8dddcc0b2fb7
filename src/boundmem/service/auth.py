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
from typing import Mapping, Optional

USER_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,127}$"
TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
MIN_KEY_LENGTH = 16
_USER_RE = re.compile(USER_ID_PATTERN)
_TENANT_RE = re.compile(TENANT_PATTERN)
_SEP = ":"


class KeysFileError(ValueError):
    pass


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class KeyRing:
    """Maps a presented bearer key to its tenant."""

    def __init__(self, keys: Mapping[str, str]):
        self._by_digest: dict[str, str] = {}
        for key, tenant in keys.items():
            if not isinstance(tenant, str) or not _TENANT_RE.match(tenant):
                raise KeysFileError(f"tenant {tenant!r} (for a key) must match {TENANT_PATTERN}")
            if not isinstance(key, str):
                raise KeysFileError(f"key for tenant {tenant!r} must be a string")
            if key.startswith("sha256:"):
                digest = key.removeprefix("sha256:").lower()
                if not re.fullmatch(r"[0-9a-f]{64}", digest):
                    raise KeysFileError(f"key for tenant {tenant!r}: 'sha256:' must be followed by 64 hex digits")
            else:
                if len(key) < MIN_KEY_LENGTH:
                    raise KeysFileError(f"key for tenant {tenant!r} is shorter than {MIN_KEY_LENGTH} characters")
                digest = _digest(key)
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
        """Read a keys file: JSON or TOML, either flat `{key: tenant}` or under a `keys` table."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise KeysFileError(f"{p}: cannot read keys file ({e.strerror})") from e
        try:
            data = json.loads(text) if p.suffix.lower() == ".json" else tomllib.loads(text)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
            raise KeysFileError(f"{p}: not valid {'JSON' if p.suffix.lower() == '.json' else 'TOML'}: {e}") from e
        if isinstance(data, dict) and isinstance(data.get("keys"), dict):
            data = data["keys"]
        if not isinstance(data, dict):
            raise KeysFileError(f"{p}: expected a mapping of key -> tenant")
        try:
            return cls(data)
        except KeysFileError as e:
            raise KeysFileError(f"{p}: {e}") from e


def valid_user_id(user: str) -> bool:
    return bool(_USER_RE.match(user))


def namespaced(tenant: str, user: str) -> str:
    """The store's user id for a tenant's user. Raises if either part could escape its namespace."""
    if not _TENANT_RE.match(tenant):
        raise ValueError(f"invalid tenant {tenant!r}")
    if not _USER_RE.match(user):
        raise ValueError(f"invalid user id {user!r}: must match {USER_ID_PATTERN}")
    return f"{tenant}{_SEP}{user}"
